/**
 * The JSON shapes of the console's API (`/console/api/…`): snake_case fields, times as ISO 8601
 * strings in UTC (`null` for never), the same fields as `decisiond keys list --json`. The server
 * (src/console/views.ts) writes them; the console's front end (console/src/api.ts) reads them.
 */

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

/** A key just created: shown this once, with the key itself. */
export type CreatedKey = KeyView & { key: string; account_created: boolean };

/** An allowance as of now: tokens per period, used, left, and when it renews (`null`: never). */
export interface AllowanceView {
  tokens: number;
  period: "day" | "month" | "total";
  used: number;
  remaining: number;
  renews_at: string | null;
}

/** An account in the accounts list. */
export interface AccountView {
  name: string;
  created_at: string | null;
  allowance: AllowanceView | null;
  /** Keys not revoked. */
  active_keys: number;
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

/** Calls and tokens over a span of days. */
export interface UsageTotals {
  calls: number;
  failed_calls: number;
  input_tokens: number;
  output_tokens: number;
}

/** `GET /console/api/usage`: per-day usage, the window's and all-time totals, the allowance. */
export interface UsageView {
  account: string;
  days: DayView[];
  window: UsageTotals;
  all_time: UsageTotals;
  allowance: AllowanceView | null;
}

/** `GET /console/api/session`: who the credential is. */
export type SessionView = { role: "admin" } | { role: "account"; account: string; key: KeyView };

/** `GET /console/api/config`: what sign-in the server offers. */
export interface ConfigView {
  auth: boolean;
  admin_sign_in: boolean;
}
