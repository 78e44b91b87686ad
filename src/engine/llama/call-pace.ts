import { FA_TILE_ROWS } from "../decode/index.js";

// Why paced, with the measurements: docs/decisions/109
/**
 * How many tokens the next decode call of a stretch (a prefix, a lead, a branch of a one-lane
 * plan) takes. A request that comes while another's call is in flight waits for that call: llama.cpp
 * cannot stop a `llama_decode` part way, not even for a client that hung up. A call's time grows
 * with its depth in the context (each token attends to all before it), so a call of the batch
 * size (1,024 tokens) took 4 s at the start of a state on the 2-core development VM and 13 s deep
 * in a 7,000-token one. Once a call of the stretch has been timed, the next takes what fits in
 * {@link CALL_BUDGET_MS} at that call's rate, so a call in flight ends within about the budget
 * wherever it is; on a machine where a whole batch fits in the budget nothing changes.
 */

/** Default of {@link CallLimits.budgetMs}: the time one call of a stretch after its first aims at. */
export const CALL_BUDGET_MS = 2000;

/**
 * Most tokens of one decode call of a stretch whose request has given the model up (others are
 * waiting for it), and the fewest a paced call takes: a request that comes waits for the call in
 * flight, about a quarter as long as with calls of the batch size (1,024), for about 6% more time
 * on the long request (docs/decisions/103). Any cut is the same to the bit: every call of at
 * least 64 tokens is tiled (kernel-split.ts).
 */
export const CONTENDED_CALL_TOKENS = 256;

/** What bounds the decode calls of the in-process engine. */
export interface CallLimits {
  /** Most tokens one decode call takes, ≥ 128. */
  readonly batchSize: number;
  /** Time one call of a stretch after its first aims at, in ms ({@link CALL_BUDGET_MS}). */
  readonly budgetMs: number;
}

/**
 * Checked call limits.
 * @throws `RangeError` when `batchSize` is below 128 (kernel-split.ts's `callSizes` needs two
 *   tiles) or `budgetMs` is not above 0 (`Infinity`: calls are never cut for time)
 */
export function callLimits(batchSize: number, budgetMs: number): CallLimits {
  if (!(batchSize >= 128)) throw new RangeError("batchSize must be at least 128");
  if (!(budgetMs > 0)) throw new RangeError("callBudgetMs must be above 0");
  return { batchSize, budgetMs };
}

/**
 * The size bound of each decode call of one stretch: the batch size (or
 * {@link CONTENDED_CALL_TOKENS} for a request that gave the model up), then, after each call
 * timed with {@link record}, what fits in the budget at that call's rate, in multiples of 64
 * tokens, between {@link CONTENDED_CALL_TOKENS} and that first bound.
 * @example
 * ```ts
 * const pace = new CallPace({ batchSize: 1024, budgetMs: 2000 }, false);
 * pace.tokens; // → 1024
 * pace.record(1024, 4096); // 4 ms a token
 * pace.tokens; // → 448
 * ```
 */
export class CallPace {
  /** The bound before any call is timed, and the most any call takes. */
  private readonly most: number;
  /** The fewest a paced bound gives. */
  private readonly fewest: number;
  private bound: number;

  /** Whether a call has been timed. */
  private timedOne = false;

  /**
   * @param limits - the engine's batch size and budget
   * @param contended - whether the request gave the model up before: then every call takes at
   *   most {@link CONTENDED_CALL_TOKENS}
   * @param start - the first call's bound, where a stretch just before it was timed at the same
   *   depth (a lead after its prefix); default the batch size
   */
  constructor(
    private readonly limits: CallLimits,
    contended: boolean,
    start?: number,
  ) {
    this.fewest = Math.min(CONTENDED_CALL_TOKENS, limits.batchSize);
    this.most = contended ? this.fewest : limits.batchSize;
    this.bound = Math.max(this.fewest, Math.min(this.most, start ?? this.most));
  }

  /** Most tokens the next call takes (≥ 128, as kernel-split.ts's `callSizes` asks). */
  get tokens(): number {
    return this.bound;
  }

  /** {@link tokens} once a call has been timed (what a stretch after this one starts at), else `undefined`. */
  get timedTokens(): number | undefined {
    return this.timedOne ? this.bound : undefined;
  }

  /**
   * Takes the rate of a call just made: the next call's bound is what fits in the budget at
   * `ms / tokens` a token. A call of fewer than 64 tokens (a stretch's short tail) says more of a
   * call's fixed cost than of its tokens, and is not taken.
   * @param tokens - the call's tokens
   * @param ms - its duration, in ms
   */
  record(tokens: number, ms: number): void {
    if (tokens < FA_TILE_ROWS || !(ms > 0)) return;
    this.timedOne = true;
    const fits = (this.limits.budgetMs * tokens) / ms;
    const tiles = Math.floor(fits / FA_TILE_ROWS) * FA_TILE_ROWS;
    this.bound = Math.max(this.fewest, Math.min(this.most, tiles));
  }

  /**
   * Runs one call of `tokens` and records its rate.
   * @returns what the call returns
   */
  async time<T>(tokens: number, call: () => Promise<T>): Promise<T> {
    const start = performance.now();
    const result = await call();
    this.record(tokens, performance.now() - start);
    return result;
  }
}
