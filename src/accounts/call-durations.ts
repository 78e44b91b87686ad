/**
 * How long a call of so many tokens takes here, learnt from the calls answered: a straight line,
 * duration = fixed + perToken × tokens, fitted by least squares over recent calls, each older
 * call weighing {@link DECAY} of the next. A short call's duration is mostly its fixed part (the
 * request's overhead and its wait for other accounts' work), a long call's mostly its tokens, so
 * an average of ms per token, which short calls dominate, overstates a long call several times
 * over on a busy server (an outside probe: 41 s said for a call of 14.6 s).
 * Why: docs/decisions/104-retry-after-from-a-line.md
 */

/** The weight of a call one call older than the newest (about ten calls remembered). */
const DECAY = 0.9;
/** What a call is expected to take per token before any has been answered, ms. */
const PRIOR_MS_PER_TOKEN = 5;
/**
 * The least spread of the calls' sizes (standard deviation over mean) a line is fitted to: calls
 * of nearly one size say nothing of how a longer one scales, and a line through them, carried to a
 * call fifty times their size, is noise times fifty.
 */
const MIN_SPREAD = 0.5;

export class CallDurations {
  /** Decayed sums over the calls answered: weight, tokens, ms, tokens², tokens × ms. */
  private w = 0;
  private x = 0;
  private y = 0;
  private xx = 0;
  private xy = 0;

  /**
   * Learns from a call answered.
   * @param tokens - its size: the tokens the engine evaluated for it (`Engine.workOf`), or where
   *   an engine does not say, those it reserved (input + output); more than 0, others ignored.
   * @param ms - how long it took, ms, ≥ 0.
   */
  add(tokens: number, ms: number): void {
    if (!(tokens > 0) || !(ms >= 0)) return;
    this.w = DECAY * this.w + 1;
    this.x = DECAY * this.x + tokens;
    this.y = DECAY * this.y + ms;
    this.xx = DECAY * this.xx + tokens * tokens;
    this.xy = DECAY * this.xy + tokens * ms;
  }

  /**
   * How long a call of `tokens` tokens is expected to take, ms (≥ 0). Where the calls seen so far
   * do not fix a line (of nearly one size, or longer ones not slower): a call no longer than their
   * mean size at their ms per token (total ms over total tokens, so long calls weigh by their
   * tokens); a longer one as long as they took on average, plus each further token at their ms per
   * token or {@link PRIOR_MS_PER_TOKEN}, whichever is less (their ms per token holds their fixed
   * part too: carried to a call a hundred times their size, it said 49 s for one of 4 s; on
   * hardware slower than the prior, a long call is then foretold short until calls spread). Where
   * the line would start below 0, the line through 0 that fits them best.
   * @example `durations.add(100, 3000); durations.add(5000, 15000); durations.expectedMs(5000) // 15000`
   */
  expectedMs(tokens: number): number {
    if (this.w === 0) return PRIOR_MS_PER_TOKEN * tokens;
    const mean = this.x / this.w;
    const variance = this.xx / this.w - mean * mean;
    const slope = (this.xy / this.w - mean * (this.y / this.w)) / variance;
    if (!(variance >= (MIN_SPREAD * mean) ** 2) || !(slope > 0)) {
      const perToken = this.y / this.x;
      if (tokens <= mean) return perToken * tokens;
      return this.y / this.w + Math.min(perToken, PRIOR_MS_PER_TOKEN) * (tokens - mean);
    }
    const fixed = this.y / this.w - slope * mean;
    return fixed >= 0 ? fixed + slope * tokens : (this.xy / this.xx) * tokens;
  }
}
