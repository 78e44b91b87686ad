import type { Account, AccountUsage, ApiKeyRecord, DailyUsage } from "../accounts/store.js";
import type { AccountView, AllowanceView, DayView, KeyView } from "../protocol/console.js";

export type { AccountView, AllowanceView, DayView, KeyView };

/**
 * The JSON shapes the console API answers with (src/protocol/console.ts), from the store's
 * records.
 */

/** An ISO time, or `null`. */
export function isoTime(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString();
}

/** A stored key as the console lists it. */
export function keyView(r: ApiKeyRecord): KeyView {
  return {
    id: r.id,
    account: r.accountName,
    prefix: r.prefix,
    label: r.label ?? null,
    created_at: isoTime(r.createdAt),
    last_used_at: isoTime(r.lastUsedAt),
    revoked_at: isoTime(r.revokedAt),
  };
}

/** An allowance state (see `AccountStore.allowanceState`) as the console shows it. */
export function allowanceView(a: AccountUsage["allowance"]): AllowanceView | null {
  return a
    ? {
        tokens: a.tokens,
        period: a.period,
        used: a.used,
        remaining: a.remaining,
        renews_at: isoTime(a.renewsAt),
      }
    : null;
}

/** An account with its allowance state and its count of keys not revoked. */
export function accountView(
  account: Account,
  allowance: AccountUsage["allowance"],
  activeKeys: number,
): AccountView {
  return {
    name: account.name,
    created_at: isoTime(account.createdAt),
    allowance: allowanceView(allowance),
    active_keys: activeKeys,
  };
}

const DAY_MS = 86_400_000;

/**
 * The `days` UTC days ending today (oldest first), each with the ledger's row for it or zeros.
 * @param rows - the store's {@link DailyUsage} rows (days without calls left out).
 */
export function dayViews(rows: readonly DailyUsage[], now: number, days: number): DayView[] {
  const today = now - (now % DAY_MS);
  const byDay = new Map(rows.map((r) => [r.day, r]));
  return Array.from({ length: days }, (_, i) => {
    const day = today - (days - 1 - i) * DAY_MS;
    const row = byDay.get(day);
    return {
      date: new Date(day).toISOString().slice(0, 10),
      calls: row?.calls ?? 0,
      failed_calls: row?.failedCalls ?? 0,
      input_tokens: row?.inputTokens ?? 0,
      output_tokens: row?.outputTokens ?? 0,
    };
  });
}
