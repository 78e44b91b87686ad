import { RESERVATION_TTL_MS, type AllowanceState } from "./store.js";

/**
 * How long a call in flight has left, ms: what it is expected to take less what it has run; once
 * it has run longer than expected, about as long again as it has run.
 * @param elapsed - how long it has run, ms
 * @param expected - how long it was expected to take, ms
 */
export function timeLeft(elapsed: number, expected: number): number {
  return expected > elapsed ? expected - elapsed : elapsed;
}

/** Accounts whose turns are kept before the turns already past are dropped. */
const MAX_ACCOUNTS = 1024;

/**
 * The times calls refused for a busy account were told to come back, by account, so that calls
 * refused together are told times a typical call apart and do not all come back at one instant
 * to collide again. Measured with the official SDKs: docs/OPERATIONS.md (one request in flight
 * per account).
 * @example
 * ```ts
 * const turns = new RetryTurns();
 * turns.next(7, 1250, 1000, 200, 61_000); // → 1250
 * turns.next(7, 1250, 1000, 200, 61_000); // → 1450
 * ```
 */
export class RetryTurns {
  private readonly told = new Map<number, number>();

  /**
   * The time to tell a call of `account` refused at `now` to come back: `earliest`, or a gap after
   * the time the call refused before it was told, whichever is later, and at most `latest` (all
   * ms on one clock), so that a burst of refusals does not push the next ones past what a client
   * is told.
   */
  next(account: number, earliest: number, now: number, gapMs: number, latest: number): number {
    const at = Math.min(latest, Math.max(earliest, (this.told.get(account) ?? -Infinity) + gapMs));
    if (this.told.size >= MAX_ACCOUNTS)
      for (const [id, time] of this.told) if (time < now) this.told.delete(id);
    this.told.set(account, at);
    return at;
  }
}

/**
 * When a call refused for its account's allowance may be let in, ms from now: when the period
 * renews; or, when only reservations stand in the way (calls admitted and not yet recorded, or of
 * a process that stopped before recording them), at most {@link RESERVATION_TTL_MS}, by which
 * they are recorded or lapse. `undefined`: never by itself (an allowance that does not renew).
 * @param needed - the call's tokens (1 for a call refused before it was sized)
 */
export function retryAfterOf(state: AllowanceState, now: number, needed = 1): number | undefined {
  const renews = state.renewsAt !== undefined ? Math.max(1000, state.renewsAt - now) : undefined;
  // Only reservations stand in the way: their calls are recorded, or they lapse, by then.
  if (state.reserved > 0 && state.used + needed <= state.tokens)
    return Math.min(renews ?? Infinity, RESERVATION_TTL_MS);
  return renews;
}
