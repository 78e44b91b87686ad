/**
 * Allowances: how many tokens (input + output, as the ledger counts them) an account may use per
 * UTC calendar day, per UTC calendar month, or in total.
 */

export type AllowancePeriod = "day" | "month" | "total";

export const ALLOWANCE_PERIODS: readonly AllowancePeriod[] = ["day", "month", "total"];

export interface Allowance {
  readonly tokens: number;
  readonly period: AllowancePeriod;
}

/**
 * The period containing `now` (ms since the epoch, UTC): its start, and its end (when the
 * allowance renews; `undefined` for `total`, which never renews), both ms.
 * @example `allowanceWindow("day", Date.UTC(2026, 0, 2, 15))` → `{ start: Date.UTC(2026, 0, 2), end: Date.UTC(2026, 0, 3) }`
 */
export function allowanceWindow(
  period: AllowancePeriod,
  now: number,
): { start: number; end: number | undefined } {
  const d = new Date(now);
  switch (period) {
    case "day": {
      const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
      return { start, end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) };
    }
    case "month":
      return {
        start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1),
        end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1),
      };
    case "total":
      return { start: 0, end: undefined };
  }
}
