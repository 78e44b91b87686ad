import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { PostgresStore } from "../src/accounts/postgres-store.js";
import { postJson } from "./support/service.js";
import { startPostgres, type TestPostgres } from "./support/postgres.js";
import { startReplica, type Replica } from "./support/replica.js";

/**
 * Several `decisiond serve` processes (the real CLI, the real model) on one real PostgreSQL:
 * admission, the ledger and the allowance hold across replicas; a killed replica frees its
 * accounts; SIGTERM drains. Timings here are limits, not goals (bench/ has the goals).
 */

let postgres: TestPostgres;
let storeUrl: string;
let store: PostgresStore;
let dir: string;
const replicas: Replica[] = [];

const MODEL = "jev-latest";

async function replica(): Promise<Replica> {
  const r = await startReplica(
    [
      "--model",
      inject("modelPath"),
      "--threads",
      "1",
      "--context-size",
      "2048",
      "--console",
      "off",
      "--log-level",
      "warn",
      "--drain-timeout",
      "240000",
    ],
    {
      DECISIOND_STORE: storeUrl,
      DECISIOND_HOME: join(dir, "home"),
      XDG_CONFIG_HOME: join(dir, "config"),
    },
  );
  replicas.push(r);
  return r;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-replicas-"));
  postgres = await startPostgres();
  storeUrl = await postgres.createDatabase("replicas");
  store = await PostgresStore.open(storeUrl);
}, 300_000);

afterAll(async () => {
  for (const r of replicas) if (r.process.exitCode === null) r.process.kill("SIGKILL");
  await store?.close();
  await postgres?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** A one-question request; `words` makes the state (and the model's work) longer. */
function body(tag: string, words = 20) {
  // About 6 tokens a note: 100 notes and the prompt stay well inside the 2048-token context.
  const filler = Array.from({ length: words }, (_, i) => `note ${i}: still waiting`).join("; ");
  return {
    model: MODEL,
    state: { ticket: tag, text: `The customer writes about order ${tag}. ${filler}` },
    questions: { refund: { type: "noul", instructions: "Does the customer ask for a refund?" } },
  };
}

/** `decisiond_requests_in_flight` of a replica, read from its /metrics. */
async function inFlightOn(r: Replica): Promise<number> {
  const text = await (await fetch(`${r.url}/metrics`)).text();
  const family = parsePrometheusTextFormat(text).find(
    (f) => f.name === "decisiond_requests_in_flight",
  );
  return Number(family?.metrics[0]?.value);
}

/** Answers with status 200 each key got, to match against its ledger rows. */
const answered = new Map<string, number>();

async function post(r: Replica, key: string, b: unknown) {
  const response = await postJson(`${r.url}/v1/systemone`, b, { authorization: `Bearer ${key}` });
  if (response.status === 200) answered.set(key, (answered.get(key) ?? 0) + 1);
  return response;
}

describe("two replicas on one PostgreSQL", () => {
  let a: Replica;
  let b: Replica;

  beforeAll(async () => {
    // One after the other: both migrate the same database; the second finds it done.
    a = await replica();
    b = await replica();
  }, 400_000);

  it("are ready, and admit exactly one of 40 simultaneous requests of one key, three times", async () => {
    for (const r of [a, b]) {
      const ready = await fetch(`${r.url}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({
        status: "ready",
        checks: { store: "ok", engine: "ok" },
      });
      expect((await fetch(`${r.url}/healthz`)).status).toBe(200);
    }
    const { key } = await store.createKey("burst");
    for (let round = 0; round < 3; round++) {
      // A long state, new each round (no prefix-cache hit), keeps the one admitted call busy.
      const request = body(`burst-${round}-${Date.now()}`, 50);
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) => post(i % 2 === 0 ? a : b, key, request)),
      );
      const statuses = answers.map((r) => r.status).sort();
      expect(
        statuses.filter((s) => s === 200),
        `round ${round}`,
      ).toHaveLength(1);
      expect(
        statuses.filter((s) => s === 429),
        `round ${round}`,
      ).toHaveLength(39);
      for (const r of answers.filter((x) => x.status === 429))
        expect(r.body.detail.error_type).toBe("concurrency_limit");
    }
    const rows = await store.calls("burst");
    expect(rows.map((r) => r.status)).toEqual([200, 200, 200]);
  }, 300_000);

  it("8 accounts × 50 requests: no 5xx, never two in flight per account, ledger = reported usage", async () => {
    const accounts = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const { key } = await store.createKey(`load-${i}`);
        return { name: `load-${i}`, key };
      }),
    );
    const reported = new Map<string, { calls: number; tokens: number }>();
    const statuses: number[] = [];
    // Every account at once, each in 10 waves of 5 simultaneous requests split over both
    // replicas (so its requests collide): at most 40 requests in flight.
    await Promise.all(
      accounts.map(async (account) => {
        for (let wave = 0; wave < 10; wave++) {
          const answers = await Promise.all(
            Array.from({ length: 5 }, (_, i) =>
              post((wave + i) % 2 === 0 ? a : b, account.key, body(account.name, 2)),
            ),
          );
          for (const r of answers) {
            statuses.push(r.status);
            if (r.status !== 200) continue;
            const seen = reported.get(account.name) ?? { calls: 0, tokens: 0 };
            seen.calls++;
            seen.tokens += r.body.usage.input_tokens + r.body.usage.output_tokens;
            reported.set(account.name, seen);
          }
        }
      }),
    );
    console.log(
      `8 accounts × 50 requests: ${statuses.filter((s) => s === 200).length} × 200, ` +
        `${statuses.filter((s) => s === 429).length} × 429`,
    );
    expect(statuses).toHaveLength(400);
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect([...new Set(statuses)].filter((s) => s !== 200 && s !== 429)).toEqual([]);
    for (const account of accounts) {
      const rows = await store.calls(account.name);
      const seen = reported.get(account.name) ?? { calls: 0, tokens: 0 };
      expect(seen.calls, account.name).toBeGreaterThan(0);
      expect(rows.filter((r) => r.status === 200)).toHaveLength(seen.calls);
      expect(rows.reduce((sum, r) => sum + r.inputTokens + r.outputTokens, 0)).toBe(seen.tokens);
      // One call in flight per account: admitted intervals [startedAt, at] never overlap.
      const spans = rows.map((r) => [r.startedAt!, r.at] as const).sort((x, y) => x[0] - y[0]);
      for (let i = 1; i < spans.length; i++)
        expect(spans[i]![0], `${account.name} call ${i}`).toBeGreaterThanOrEqual(spans[i - 1]![1]);
    }
  }, 600_000);

  it("the allowance is never overrun: a call that would pass it is refused before it runs", async () => {
    const { key } = await store.createKey("metered");
    const probe = await post(a, key, body("metered-probe", 10));
    expect(probe.status).toBe(200);
    const cost = probe.body.usage.input_tokens + probe.body.usage.output_tokens;
    // Room for the probe, one more call and a half: the third call must be refused.
    await store.setAllowance("metered", { tokens: Math.floor(cost * 2.5), period: "day" });
    const first = await post(b, key, body("metered-probe", 10));
    expect(first.status).toBe(200);
    const refused = await post(a, key, body("metered-probe", 10));
    expect(refused.status).toBe(429);
    expect(refused.body.detail.error_type).toBe("allowance_exhausted");
    expect(refused.body.detail.message).toMatch(/needs \d+ tokens .* it was not run/);
    // Further calls, each too big for what is left, are refused too: the ledger never passes it.
    for (let i = 0; i < 6; i++) await post(i % 2 ? a : b, key, body(`m${i}`, 1));
    const [usage] = await store.usage("metered");
    expect(usage!.inputTokens + usage!.outputTokens).toBeLessThanOrEqual(Math.floor(cost * 2.5));
    expect(usage!.allowance).toMatchObject({ reserved: 0 });
    const rows = await store.calls("metered");
    expect(rows.filter((r) => r.status === 429).every((r) => r.inputTokens === 0)).toBe(true);
  }, 300_000);

  it("/metrics parses as Prometheus text and counts what the replica answered", async () => {
    const text = await (await fetch(`${a.url}/metrics`)).text();
    const families = new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f]));
    const requests = families.get("decisiond_requests_total")!;
    expect(requests.type).toBe("COUNTER");
    const count = (status: string, errorType: string) =>
      requests.metrics
        .filter(
          (m) =>
            m.labels?.route === "/v1/systemone" &&
            m.labels.status === status &&
            m.labels.error_type === errorType,
        )
        .reduce((sum, m) => sum + Number(m.value), 0);
    expect(count("200", "")).toBeGreaterThan(3);
    expect(count("429", "concurrency_limit")).toBeGreaterThan(20);
    expect(count("429", "allowance_exhausted")).toBeGreaterThanOrEqual(1);
    const duration = families.get("decisiond_request_duration_seconds")!;
    expect(duration.type).toBe("HISTOGRAM");
    // The parser keeps a histogram's buckets but not its labels: its series are read as text.
    const answeredHere = requests.metrics
      .filter((m) => m.labels?.route === "/v1/systemone")
      .reduce((sum, m) => sum + Number(m.value), 0);
    expect(text).toContain(
      `decisiond_request_duration_seconds_count{route="/v1/systemone"} ${answeredHere}\n`,
    );
    const tokens = families.get("decisiond_tokens_total")!;
    expect(
      Number(tokens.metrics.find((m) => m.labels?.direction === "input")!.value),
    ).toBeGreaterThan(0);
    for (const name of [
      "decisiond_requests_in_flight",
      "decisiond_queue_depth",
      "decisiond_engine_errors_total",
      "decisiond_draining",
    ])
      expect(families.get(name), name).toBeDefined();
    expect(families.get("decisiond_draining")!.metrics[0]!.value).toBe("0");
  });

  it("SIGKILL of one replica mid-run: its accounts are admitted on the other within 5 s", async () => {
    const victims = await Promise.all(
      Array.from({ length: 3 }, async (_, i) => (await store.createKey(`victim-${i}`)).key),
    );
    // Each victim account has a long call in flight on b.
    const inFlight = victims.map((key, i) =>
      post(b, key, body(`victim-${i}-${Date.now()}`, 100)).catch((e: Error) => e),
    );
    // Wait until b has admitted all three (it gets no other requests), then a must refuse them.
    await expect.poll(() => inFlightOn(b), { timeout: 60_000, interval: 20 }).toBe(3);
    for (const key of victims) {
      const busy = await post(a, key, body("probe", 1));
      expect(busy.status).toBe(429);
      expect(busy.body.detail.error_type).toBe("concurrency_limit");
    }
    // A load of four more accounts on both replicas runs across the kill.
    const busy = await Promise.all(
      Array.from({ length: 4 }, async (_, i) => (await store.createKey(`busy-${i}`)).key),
    );
    const loadStatuses: (number | "no answer")[] = [];
    let loading = true;
    const load = Promise.all(
      busy.map(async (key, i) => {
        while (loading) {
          const answers = await Promise.all(
            [a, b, a].map((r) => post(r, key, body(`busy-${i}`, 2)).catch(() => undefined)),
          );
          for (const r of answers) loadStatuses.push(r ? r.status : "no answer");
          if (answers.every((r) => r === undefined)) await new Promise((r) => setTimeout(r, 20));
        }
      }),
    );
    // Kill b while it has load requests in flight beside the victims' calls.
    await expect.poll(() => inFlightOn(b), { timeout: 60_000, interval: 20 }).toBeGreaterThan(3);
    const killedAt = Date.now();
    b.process.kill("SIGKILL");
    expect(await b.exited).toBe("SIGKILL");
    // Ask a again and again until it admits each account; the ledger row of that call says when
    // it was admitted (its answer may come later: the engine runs one computation at a time).
    await Promise.all(
      victims.map(async (key) => {
        for (;;) {
          const r = await post(a, key, body("after-kill", 1));
          if (r.status === 200) return;
          expect(r.status).toBe(429);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }),
    );
    const admittedAfter: number[] = [];
    for (let i = 0; i < victims.length; i++) {
      const rows = await store.calls(`victim-${i}`);
      const first = Math.min(...rows.map((r) => r.startedAt!).filter((t) => t >= killedAt));
      admittedAfter.push(first - killedAt);
    }
    loading = false;
    await load;
    const count = (x: number | string) => loadStatuses.filter((s) => s === x).length;
    console.log(
      `re-admitted after SIGKILL in ${admittedAfter.join(", ")} ms; load across the kill: ` +
        `${count(200)} × 200, ${count(429)} × 429, ${count("no answer")} without an answer`,
    );
    for (const ms of admittedAfter) expect(ms).toBeLessThan(5000);
    expect(loadStatuses.filter((x) => x !== 200 && x !== 429 && x !== "no answer")).toEqual([]);
    expect(count("no answer")).toBeGreaterThan(0); // b died with the load running
    for (let i = 0; i < busy.length; i++) {
      const rows = await store.calls(`busy-${i}`);
      expect(rows.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(
        answered.get(busy[i]!) ?? 0,
      );
    }
    // The killed calls got no answer (b runs one computation at a time: a call it finished before
    // the kill did); every answer a client did get has its ledger row.
    const results = await Promise.all(inFlight);
    expect(results.filter((r) => r instanceof Error).length).toBeGreaterThanOrEqual(2);
    for (const r of results) if (!(r instanceof Error)) expect(r.status).toBe(200);
    for (let i = 0; i < victims.length; i++) {
      const rows = await store.calls(`victim-${i}`);
      expect(rows.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(
        answered.get(victims[i]!)!,
      );
    }
  }, 300_000);

  it("SIGTERM during a request: it completes, new ones get 503, the process exits 0", async () => {
    const { key } = await store.createKey("drain");
    const other = (await store.createKey("drain-2")).key;
    const long = post(a, key, body(`drain-${Date.now()}`, 100));
    await expect.poll(() => inFlightOn(a), { timeout: 60_000, interval: 20 }).toBe(1);
    a.process.kill("SIGTERM");
    await expect
      .poll(async () => (await fetch(`${a.url}/readyz`)).status, { timeout: 10_000, interval: 20 })
      .toBe(503);
    const refused = await post(a, other, body("too-late", 1));
    expect(refused.status).toBe(503);
    expect(refused.body.detail.error_type).toBe("shutting_down");
    const completed = await long;
    expect(completed.status).toBe(200);
    expect(completed.body.answers.refund.type).toBe("noul");
    expect(await a.exited).toBe(0);
    expect(a.log()).toMatch(/SIGTERM: draining/);
    expect((await store.calls("drain")).filter((r) => r.status === 200)).toHaveLength(
      answered.get(key)!,
    );
  }, 300_000);
});
