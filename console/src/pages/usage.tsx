import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { AllowanceView, UsageView } from "../api";
import { AccountPicker } from "../components/account-picker";
import { BarChart } from "../components/bar-chart";
import { formatNumber, formatTime } from "../format";
import { useLoad } from "../hooks";
import { useSession } from "../session";

const PERIODS = [7, 30, 90] as const;

/** Usage: requests and tokens per UTC day, a chart, and what the allowance has left. */
export function UsagePage() {
  const { who, api } = useSession();
  const admin = who?.role === "admin";
  const accounts = useLoad(() => (admin ? api.accounts() : Promise.resolve(undefined)), [api]);
  const [account, setAccount] = useState("");
  const [days, setDays] = useState<number>(30);
  const [metric, setMetric] = useState<"tokens" | "calls">("tokens");

  // The admin looks at the first account until another is picked.
  useEffect(() => {
    if (admin && account === "" && accounts.data && accounts.data.length > 0)
      setAccount(accounts.data[0]!.name);
  }, [admin, account, accounts.data]);

  const usage = useLoad(
    () =>
      admin && account === ""
        ? Promise.resolve(undefined)
        : api.usage(admin ? account : undefined, days),
    [api, account, days],
  );

  if (who === null)
    return (
      <section class="page">
        <h1>Usage</h1>
        <p class="notice">
          This server runs without accounts (<code>--auth off</code>): no usage is recorded.
        </p>
      </section>
    );

  const u = usage.data;
  return (
    <section class="page">
      <div class="page-head">
        <h1>Usage</h1>
        <p class="muted">
          Requests to <code>/v1/systemone</code> and <code>/v1/decisions</code> and their tokens
          (input + output), per UTC day.
        </p>
      </div>
      <div class="toolbar">
        {admin && (
          <AccountPicker
            id="usage-account"
            accounts={accounts.data}
            value={account}
            onChange={setAccount}
          />
        )}
        <div class="segmented" role="group" aria-label="Period">
          {PERIODS.map((n) => (
            <button key={n} type="button" aria-pressed={days === n} onClick={() => setDays(n)}>
              {n} days
            </button>
          ))}
        </div>
      </div>
      {admin && accounts.data?.length === 0 && <p class="muted">No accounts yet.</p>}
      {/* The admin's usage waits for the accounts: when they cannot be listed, say why. */}
      {accounts.error && accounts.error.status !== 401 && (
        <p class="error" role="alert">
          {accounts.error.message}
        </p>
      )}
      {usage.error && usage.error.status !== 401 && (
        <p class="error" role="alert">
          {usage.error.message}
        </p>
      )}
      {u && (
        <>
          <div class="stats">
            <Stat label={`Requests, ${days} days`} value={formatNumber(u.window.calls)}>
              {u.window.failed_calls > 0
                ? `${formatNumber(u.window.failed_calls)} failed`
                : "none failed"}
            </Stat>
            <Stat
              label={`Tokens, ${days} days`}
              value={formatNumber(u.window.input_tokens + u.window.output_tokens)}
            >
              {formatNumber(u.window.input_tokens)} in · {formatNumber(u.window.output_tokens)} out
            </Stat>
            <AllowanceStat allowance={u.allowance} />
          </div>
          <div class="card">
            <div class="card-head">
              <h2>{metric === "tokens" ? "Tokens per day" : "Requests per day"}</h2>
              <div class="segmented" role="group" aria-label="Chart">
                <button
                  type="button"
                  aria-pressed={metric === "tokens"}
                  onClick={() => setMetric("tokens")}
                >
                  Tokens
                </button>
                <button
                  type="button"
                  aria-pressed={metric === "calls"}
                  onClick={() => setMetric("calls")}
                >
                  Requests
                </button>
              </div>
            </div>
            <BarChart
              label={metric === "tokens" ? "Tokens per day" : "Requests per day"}
              unit={metric === "tokens" ? "tokens" : "requests"}
              days={u.days.map((d) => ({
                date: d.date,
                value: metric === "tokens" ? d.input_tokens + d.output_tokens : d.calls,
              }))}
            />
          </div>
          <DayTable usage={u} />
        </>
      )}
    </section>
  );
}

function Stat(props: { label: string; value: string; children?: ComponentChildren }) {
  return (
    <div class="card stat">
      <div class="stat-label">{props.label}</div>
      <div class="stat-value">{props.value}</div>
      {props.children !== undefined && <div class="stat-note">{props.children}</div>}
    </div>
  );
}

function AllowanceStat({ allowance }: { allowance: AllowanceView | null }) {
  if (!allowance)
    return (
      <Stat label="Allowance left" value="No limit">
        no allowance is set for this account
      </Stat>
    );
  const per =
    allowance.period === "total"
      ? "in total"
      : allowance.period === "day"
        ? "per UTC day"
        : "per UTC month";
  const usedShare = allowance.tokens === 0 ? 1 : Math.min(1, allowance.used / allowance.tokens);
  return (
    <div class="card stat">
      <div class="stat-label">Allowance left</div>
      <div class="stat-value" data-testid="allowance-left">
        {formatNumber(allowance.remaining)}
      </div>
      <div
        class="meter"
        role="meter"
        aria-label="Allowance used"
        aria-valuemin={0}
        aria-valuemax={allowance.tokens}
        aria-valuenow={Math.min(allowance.used, allowance.tokens)}
      >
        <div
          class={usedShare >= 0.9 ? "meter-fill warn" : "meter-fill"}
          style={{ width: `${usedShare * 100}%` }}
        />
      </div>
      <div class="stat-note">
        {formatNumber(allowance.used)} of {formatNumber(allowance.tokens)} tokens used {per}
        {allowance.renews_at ? `; renews ${formatTime(allowance.renews_at)}` : ""}
      </div>
    </div>
  );
}

function DayTable({ usage }: { usage: UsageView }) {
  const active = usage.days.filter((d) => d.calls > 0).reverse();
  return (
    <div class="card">
      <h2>Days with requests (UTC)</h2>
      {active.length === 0 ? (
        <p class="muted">No requests in these {usage.days.length} days.</p>
      ) : (
        <div class="table-scroll">
          <table class="days">
            <thead>
              <tr>
                <th scope="col">Day</th>
                <th scope="col" class="num">
                  Requests
                </th>
                <th scope="col" class="num">
                  Failed
                </th>
                <th scope="col" class="num">
                  Tokens
                </th>
                <th scope="col" class="num wide-only">
                  Input
                </th>
                <th scope="col" class="num wide-only">
                  Output
                </th>
              </tr>
            </thead>
            <tbody>
              {active.map((d) => (
                <tr key={d.date}>
                  <td>{d.date}</td>
                  <td class="num">{formatNumber(d.calls)}</td>
                  <td class="num">{formatNumber(d.failed_calls)}</td>
                  <td class="num">{formatNumber(d.input_tokens + d.output_tokens)}</td>
                  <td class="num wide-only">{formatNumber(d.input_tokens)}</td>
                  <td class="num wide-only">{formatNumber(d.output_tokens)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <p class="hint">
        All time: {formatNumber(usage.all_time.calls)} requests,{" "}
        {formatNumber(usage.all_time.input_tokens + usage.all_time.output_tokens)} tokens.
      </p>
    </div>
  );
}
