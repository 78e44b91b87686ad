import { InvalidArgumentError, type Command } from "commander";
import { ALLOWANCE_PERIODS, type AllowancePeriod } from "../accounts/allowance.js";
import type { AccountUsage } from "../accounts/store.js";
import { allowanceView } from "../console/views.js";
import { err, isoTime, out, table, time, withStore } from "./keys.js";
import { digits, storeOption } from "./options.js";

/**
 * `decisiond usage [--account NAME]` (calls and tokens from the ledger, and each allowance) and
 * `decisiond accounts list|create|set-allowance`, on the store of `--store` (see
 * {@link storeOption}).
 * @example `registerUsageCommands(program);`
 */
export function registerUsageCommands(program: Command): void {
  program
    .command("usage")
    .description("calls and tokens per account, and what is left of each allowance")
    .option("--account <name>", "only this account")
    .option("--json", "print a JSON array")
    .addOption(storeOption())
    .action((flags: { account?: string; json?: boolean; store?: string }) =>
      withStore(flags.store, async (store) => {
        const rows = await store.usage(flags.account);
        if (flags.json) {
          out(JSON.stringify(rows.map(usageJson)));
          return;
        }
        if (rows.length === 0) {
          err("no accounts");
          return;
        }
        out(
          table(
            [
              "account",
              "calls",
              "failed",
              "input tokens",
              "output tokens",
              "last call",
              "allowance",
              "used",
              "left",
              "renews",
            ],
            rows.map((u) => [
              u.account,
              u.calls,
              u.failedCalls,
              u.inputTokens,
              u.outputTokens,
              time(u.lastCallAt),
              u.allowance ? allowanceText(u.allowance) : "none",
              u.allowance ? u.allowance.used : "",
              u.allowance ? u.allowance.remaining : "",
              u.allowance ? time(u.allowance.renewsAt) || "never" : "",
            ]),
          ),
        );
      }),
    );

  const accounts = program
    .command("accounts")
    .description("list and create accounts, set allowances");

  accounts
    .command("list")
    .description("list accounts and their allowances")
    .option("--json", "print a JSON array")
    .addOption(storeOption())
    .action((flags: { json?: boolean; store?: string }) =>
      withStore(flags.store, async (store) => {
        const list = await store.listAccounts();
        if (flags.json) {
          out(
            JSON.stringify(
              list.map((a) => ({
                name: a.name,
                created_at: isoTime(a.createdAt),
                allowance: a.allowance ?? null,
              })),
            ),
          );
          return;
        }
        if (list.length === 0) {
          err("no accounts");
          return;
        }
        const liveKeys = await Promise.all(
          list.map(
            async (a) =>
              (await store.listKeys(a.name)).filter((k) => k.revokedAt === undefined).length,
          ),
        );
        out(
          table(
            ["account", "created", "allowance", "keys"],
            list.map((a, i) => [
              a.name,
              time(a.createdAt),
              a.allowance ? allowanceText(a.allowance) : "none",
              liveKeys[i]!,
            ]),
          ),
        );
      }),
    );

  accounts
    .command("create")
    .description("create an account (keys create also creates a missing one)")
    .argument("<name>", "ASCII letters, digits, '.', '_' or '-'")
    .addOption(storeOption())
    .action((name: string, flags: { store?: string }) =>
      withStore(
        flags.store,
        async (store) => {
          await store.createAccount(name);
          err(`created account "${name}"`);
        },
        true,
      ),
    );

  accounts
    .command("set-allowance")
    .description(
      "limit the tokens (input + output) an account may use per UTC day, per UTC month or in total",
    )
    .argument("<name>", "the account")
    .option("--tokens <n>", "tokens per period", positiveIntOrZero)
    .option("--period <period>", `one of ${ALLOWANCE_PERIODS.join(", ")}`, period)
    .option("--none", "remove the allowance (no limit)")
    .addOption(storeOption())
    .action(
      (
        name: string,
        flags: { tokens?: number; period?: AllowancePeriod; none?: boolean; store?: string },
      ) => {
        // The flags first: a usage error says so before the store is looked for.
        if (flags.none && (flags.tokens !== undefined || flags.period !== undefined))
          throw new InvalidArgumentError("--none takes neither --tokens nor --period");
        if (!flags.none && (flags.tokens === undefined || flags.period === undefined))
          throw new InvalidArgumentError("give --tokens N and --period day|month|total, or --none");
        return withStore(flags.store, async (store) => {
          if (flags.none) {
            await store.setAllowance(name, undefined);
            err(`account "${name}" has no allowance now (no limit)`);
            return;
          }
          const account = await store.setAllowance(name, {
            tokens: flags.tokens!,
            period: flags.period!,
          });
          const state = (await store.allowanceState(account))!;
          err(
            `account "${name}": ${allowanceText(state)}; used ${state.used}, left ${state.remaining}`,
          );
        });
      },
    );
}

function positiveIntOrZero(value: string): number {
  const n = digits(value);
  if (n === undefined)
    throw new InvalidArgumentError(`expected a whole number ≥ 0, got "${value}"`);
  return n;
}

function period(value: string): AllowancePeriod {
  if (!(ALLOWANCE_PERIODS as readonly string[]).includes(value))
    throw new InvalidArgumentError(
      `expected one of ${ALLOWANCE_PERIODS.join(", ")}, got "${value}"`,
    );
  return value as AllowancePeriod;
}

function allowanceText(a: { tokens: number; period: AllowancePeriod }): string {
  return a.period === "total"
    ? `${a.tokens} tokens in total`
    : `${a.tokens} tokens per ${a.period}`;
}

function usageJson(u: AccountUsage) {
  return {
    account: u.account,
    calls: u.calls,
    failed_calls: u.failedCalls,
    input_tokens: u.inputTokens,
    output_tokens: u.outputTokens,
    last_call_at: isoTime(u.lastCallAt),
    allowance: allowanceView(u.allowance),
  };
}
