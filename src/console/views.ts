import type { Account, AccountUsage, ApiKeyRecord, DailyUsage } from "../accounts/store.js";

/**
 * The JSON shapes the console API answers with: snake_case fields, times as ISO 8601 strings in
 * UTC (`null` for never), the same fields as `decisiond keys list --json`.
 */

/** An ISO time, or `null`. */
export function isoTime(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString();
}

/** A key as listed: never the key itself, only its prefix. */
export interface KeyView {
  id: number;
  account: string;
  prefix: string;
  label: string | null;
  created_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
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

/** An allowance as of now: tokens per period, used, left, and when it renews (`null`: never). */
export interface AllowanceView {
  tokens: number;
  period: "day" | "month" | "total";
  used: number;
  remaining: number;
  renews_at: string | null;
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

/** An account in the accounts list. */
export interface AccountView {
  name: string;
  created_at: string | null;
  allowance: AllowanceView | null;
  /** Keys not revoked. */
  active_keys: number;
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

/** One UTC day of usage. */
export interface DayView {
  /** YYYY-MM-DD (UTC). */
  date: string;
  calls: number;
  failed_calls: number;
  input_tokens: number;
  output_tokens: number;
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
