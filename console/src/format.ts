/** Display formats: times in UTC (the ledger's days are UTC days), numbers with separators. */

const numbers = new Intl.NumberFormat("en-US");

/** `1,234,567`. */
export const formatNumber = (n: number) => numbers.format(n);

/** `2026-11-21 14:03 UTC`, or `never` for `null`. */
export function formatTime(iso: string | null, never = "never"): string {
  if (iso === null) return never;
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

/** `42.1%` of a probability. */
export const formatPercent = (p: number) => `${(p * 100).toFixed(1)}%`;

/** A short day label: `Nov 21` from `2026-11-21`. */
export function formatDay(date: string): string {
  const months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(" ");
  return `${months[Number(date.slice(5, 7)) - 1]} ${Number(date.slice(8, 10))}`;
}
