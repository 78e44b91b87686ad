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
