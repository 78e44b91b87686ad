import { FA_TILE_ROWS } from "../decode/index.js";

// Why paced, with the measurements: docs/decisions/109
/**
 * How many tokens the next decode call of a stretch (a prefix, a lead, a branch of a one-lane
 * plan) takes. A request that comes while another's call is in flight waits for that call:
 * llama.cpp cannot stop a `llama_decode` part way, not even for a client that hung up. A call's
 * time grows with its depth in the context (each token attends to all before it), so on a slow
 * machine a call of the batch size deep in a long state holds the model for many budgets. Once a
 * call has been timed, the next takes what fits in {@link CALL_BUDGET_MS} at that call's rate,
 * and a stretch that starts deep takes its first call's size from the engine's last timed call
 * ({@link CallHistory}), so a call in flight ends within about the budget wherever it is; on a
 * machine where a whole batch fits in the budget nothing changes.
 */

/** Default of {@link CallLimits.budgetMs}: the time one paced decode call aims at. */
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
  /**
   * Time one paced decode call aims at, in ms ({@link CALL_BUDGET_MS}): a stretch's calls after
   * its first, and the first of one that goes on from a timed call or starts deep.
   */
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

/** Depth in the context from which a stretch's first call is cut small on a slow machine. */
export const DEEP_START_TOKENS = 1024;

/**
 * The last decode call the engine timed, across requests and stretches: how deep in the context
 * it ended and its rate. A stretch's first call is sized from it ({@link startFor}), so that a
 * call deep in a state (a state the engine has cached, asked a new question; a transcript that
 * grew) does not take the batch size at once where that would run far past the budget.
 */
export class CallHistory {
  private last: { readonly depth: number; readonly msPerToken: number } | undefined;
  private count = 0;

  /** Calls taken so far: a stretch that timed a call since a reading goes past it. */
  get calls(): number {
    return this.count;
  }

  /**
   * Takes a call just timed (calls of fewer than 64 tokens are not: they say more of a call's
   * fixed cost than of its tokens).
   * @param depth - tokens in the sequence once the call was made
   */
  record(tokens: number, ms: number, depth: number): void {
    if (tokens < FA_TILE_ROWS || !(ms > 0)) return;
    this.last = { depth, msPerToken: ms / tokens };
    this.count++;
  }

  /**
   * The first call's bound for a stretch whose first token goes at `depth`, before clamping. What
   * fits in the budget at the last call's rate where the stretch `continues` one that made it (a
   * lead right after its prefix), or starts from {@link DEEP_START_TOKENS} on and no deeper than
   * that call ended (a token costs no more there). Deeper than that, the contended size where a
   * batch at the last call's rate runs past the budget (a slow machine). Else, and before any
   * call was timed, the batch size: a request of up to a batch of new tokens near the start of
   * the context is one call, and a machine whose batches fit the budget is unchanged.
   */
  startFor(depth: number, limits: CallLimits, continues = false): number {
    const { last } = this;
    if (!last) return limits.batchSize;
    const deep = depth >= DEEP_START_TOKENS;
    if (continues || (deep && depth <= last.depth)) return limits.budgetMs / last.msPerToken;
    const slow = last.msPerToken * limits.batchSize > limits.budgetMs;
    return deep && slow ? CONTENDED_CALL_TOKENS : limits.batchSize;
  }
}

/**
 * The size bound of each decode call of one stretch: the first from the engine's
 * {@link CallHistory} (or {@link CONTENDED_CALL_TOKENS} for a request that gave the model up),
 * then, after each call timed with {@link record}, what fits in the budget at that call's rate, in
 * multiples of 64 tokens, between {@link CONTENDED_CALL_TOKENS} and the batch size.
 * @example
 * ```ts
 * const pace = new CallPace({ batchSize: 1024, budgetMs: 2000 }, false, new CallHistory(), 0);
 * pace.tokens; // → 1024
 * pace.record(1024, 4096, 1024); // 4 ms a token
 * pace.tokens; // → 448
 * ```
 */
export class CallPace {
  /** The most any call takes. */
  private readonly most: number;
  /** The fewest a paced bound gives. */
  private readonly fewest: number;
  private bound: number;

  /**
   * @param limits - the engine's batch size and budget
   * @param contended - whether the request gave the model up before: then every call takes at
   *   most {@link CONTENDED_CALL_TOKENS}
   * @param history - the engine's last timed call, which sizes the first call and takes this
   *   stretch's calls
   * @param depth - tokens in the sequence before the stretch's first call
   * @param continues - whether the stretch goes on from the engine's last timed call, made in
   *   this turn (a lead right after the prefix it evaluated)
   */
  constructor(
    private readonly limits: CallLimits,
    contended: boolean,
    private readonly history: CallHistory,
    depth: number,
    continues = false,
  ) {
    this.fewest = Math.min(CONTENDED_CALL_TOKENS, limits.batchSize);
    this.most = contended ? this.fewest : limits.batchSize;
    this.bound = this.clamp(history.startFor(depth, limits, continues));
  }

  /** Most tokens the next call takes (≥ 128, as kernel-split.ts's `callSizes` asks). */
  get tokens(): number {
    return this.bound;
  }

  /**
   * Takes the rate of a call just made: the next call's bound is what fits in the budget at
   * `ms / tokens` a token. A call of fewer than 64 tokens (a stretch's short tail) says more of a
   * call's fixed cost than of its tokens, and is not taken.
   * @param tokens - the call's tokens
   * @param ms - its duration, in ms
   * @param depth - tokens in the sequence once the call was made
   */
  record(tokens: number, ms: number, depth: number): void {
    if (tokens < FA_TILE_ROWS || !(ms > 0)) return;
    this.history.record(tokens, ms, depth);
    this.bound = this.clamp((this.limits.budgetMs * tokens) / ms);
  }

  /** `fits` tokens: the most where they reach it, else in multiples of 64, at least the fewest. */
  private clamp(fits: number): number {
    if (fits >= this.most) return this.most;
    const tiles = Math.floor(fits / FA_TILE_ROWS) * FA_TILE_ROWS;
    return Math.max(this.fewest, Math.min(this.most, tiles));
  }

  /**
   * Runs one call of `tokens` and records its rate.
   * @param depth - tokens in the sequence once the call is made
   * @returns what the call returns
   */
  async time<T>(tokens: number, depth: number, call: () => Promise<T>): Promise<T> {
    const start = performance.now();
    const result = await call();
    this.record(tokens, performance.now() - start, depth);
    return result;
  }
}
