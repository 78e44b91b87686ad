// Why the calls are cut so, with the measurements: docs/decisions/054
/**
 * Where decode calls are cut, so that a token's logits do not depend on how its sequence was cut
 * into calls.
 *
 * llama.cpp's CPU flash attention has three kernels, and which one a token's query goes through
 * depends on the `llama_decode` call it is in (ggml/src/ggml-cpu/ops.cpp,
 * `ggml_compute_forward_flash_attn_ext_f16`, in the llama.cpp that node-llama-cpp 3.22 builds):
 * - a call of at least {@link FA_TILE_ROWS} tokens (`GGML_FA_TILE_Q`) takes the tiled kernel,
 *   which accumulates in f32;
 * - a call of 2–63 tokens takes the one-row kernel, which accumulates the values in f16 for an f16
 *   KV cache (llama.cpp casts an f32 cache to f16 for flash attention, so an f32 cache does not
 *   help);
 * - a call of one token over at least 512 KV cells takes a split-KV path that sums partials.
 * Each kernel gives a row the same result whatever other rows its call holds, but the kernels
 * differ from each other, enough to move an answer's logits when one sequence is cut into calls
 * differently.
 *
 * So every sequence decisiond evaluates (a prefix, a branch) goes through the kernels by a map
 * that depends only on its own length L ({@link TiledEndMap}). A branch's map ({@link tiledEnd})
 * puts the tokens before the last multiple of 64 in calls of at least 64 tokens (tiled) and the
 * rest (fewer than 64) in one call of at least two tokens, because its neighbours may take its
 * start over as their common lead. A prefix's map ({@link prefixTiledEnd}) tiles all of it from
 * 64 tokens on: no neighbour splits a prefix, and the tiled kernel is both the nearer to exact and,
 * deep in a long state, the cheaper per token. Reusing tokens already in the KV cache (another
 * request's prefix, a snapshot, a neighbouring branch, the common lead) is allowed only as far as
 * they were evaluated by the same map ({@link resumePoint}). Then a question gets the same logits
 * alone or beside others, and a state the same from a cache hit as from a miss, on the CPU with
 * one KV-cache sequence per request (the default there). With several sequences, node-llama-cpp
 * may merge their calls; a GPU backend has its own kernels.
 */

/** Rows (query tokens) from which a call takes the tiled kernel: `GGML_FA_TILE_Q` in ggml-cpu. */
export const FA_TILE_ROWS = 64;

/**
 * A call map: where the tiled part of a sequence of `length` tokens ends. Tokens `[0, end)` go
 * through the tiled kernel in calls of at least {@link FA_TILE_ROWS}, tokens `[end, length)`
 * through the one-row kernel in one call.
 */
export type TiledEndMap = (length: number) => number;

/**
 * A branch's map (also the common lead's, see branch-schedule.ts): 0 below {@link FA_TILE_ROWS}
 * tokens; otherwise the last multiple of 64, or the whole length when that would leave a single
 * token. Cutting at multiples of 64 from the branch's start is what lets a neighbour that shares
 * the first tokens evaluate them for both.
 */
export function tiledEnd(length: number): number {
  if (length < FA_TILE_ROWS) return 0;
  const end = length - (length % FA_TILE_ROWS);
  return length - end === 1 ? length : end;
}

/**
 * A prefix's map: the whole prefix tiled from {@link FA_TILE_ROWS} tokens on (0 below). A prefix
 * shares its start only with other requests' prefixes and snapshots, which are taken over as far
 * as both were tiled, so its last tokens need not wait for a multiple of 64; the tiled kernel is
 * also the cheaper per token deep in a long state (docs/decisions/054).
 */
export function prefixTiledEnd(length: number): number {
  return length < FA_TILE_ROWS ? 0 : length;
}

/**
 * How many leading tokens of a sequence of `length` tokens can be taken over from one of
 * `heldLength` tokens (sharing its start) that was evaluated by the same `map`: all the held ones
 * when both cut at the same place, otherwise only up to the earlier cut. Never more than
 * `heldLength`: tokens after the held sequence (a lead or branch behind a prefix) went through
 * another map.
 */
export function agreeingTokens(
  heldLength: number,
  length: number,
  map: TiledEndMap = tiledEnd,
): number {
  const a = map(heldLength);
  const b = map(length);
  return a === b ? heldLength : Math.min(a, b);
}

/**
 * {@link resumePoint} after a sequence of `heldLength` tokens, evaluated by its own map, whose
 * first `shared` tokens this one shares: a previous prefix or snapshot (`complete`), or the
 * lane's previous branch.
 */
export function resumeAfter(
  shared: number,
  heldLength: number,
  length: number,
  complete = false,
  map: TiledEndMap = tiledEnd,
): number {
  return resumePoint(shared, agreeingTokens(heldLength, length, map), length, complete, map);
}

/**
 * The token to resume evaluating a sequence of `length` tokens from, when its first `shared`
 * tokens are in the KV cache and were evaluated by this sequence's own map as far as `agreeing`.
 * Stays at or before both; then steps back so the tiled part left is one call of at least 64
 * tokens and the one-row part is not a single token (unless the sequence is one token long).
 * @param complete - whether the sequence may be taken over whole (a prefix may; a branch must
 *   evaluate at least its last token, whose logits are read).
 * @param map - the sequence's call map ({@link tiledEnd} for a branch, {@link prefixTiledEnd} for a
 *   prefix).
 * @returns a point in `[0, length]` (`[0, length − 1]` unless `complete`).
 */
export function resumePoint(
  shared: number,
  agreeing: number,
  length: number,
  complete = false,
  map: TiledEndMap = tiledEnd,
): number {
  let at = Math.max(0, Math.min(shared, agreeing, complete ? length : length - 1));
  if (at === length) return at;
  const end = map(length);
  if (at < end) return end - at < FA_TILE_ROWS ? end - FA_TILE_ROWS : at;
  if (length - at === 1 && length > 1) at -= 1;
  return at;
}

/**
 * The sizes of the decode calls that evaluate tokens `[from, to)` of a sequence whose tiled part
 * ends at `end` ({@link tiledEnd}): the tiled tokens in as few calls of at most `batchSize` as
 * possible, of about equal size (each at least 64), then the rest in one call.
 * @throws `RangeError` when `batchSize` \< 128, or when the cut would put tiled tokens in a call of
 *   fewer than 64 (a `from` not from {@link resumePoint}).
 */
export function callSizes(from: number, to: number, end: number, batchSize: number): number[] {
  if (batchSize < 2 * FA_TILE_ROWS) throw new RangeError("batchSize must be at least 128");
  const sizes: number[] = [];
  const tiled = Math.max(0, Math.min(to, end) - from);
  if (tiled > 0) {
    if (tiled < FA_TILE_ROWS)
      throw new RangeError(`${tiled} tiled tokens cannot make a call of ${FA_TILE_ROWS}`);
    const calls = Math.ceil(tiled / batchSize);
    for (let i = 0; i < calls; i++)
      sizes.push(Math.floor(tiled / calls) + (i < tiled % calls ? 1 : 0));
  }
  const rest = to - Math.max(from, end);
  if (rest > 0) sizes.push(rest);
  return sizes;
}

/**
 * {@link callSizes} for tokens `[from, length)` of a whole sequence (a prefix or a branch) of
 * `length` tokens, cut by its own `map`.
 */
export function sequenceCallSizes(
  from: number,
  length: number,
  batchSize: number,
  map: TiledEndMap = tiledEnd,
): number[] {
  return callSizes(from, length, map(length), batchSize);
}

/**
 * Where a prefix of `length` tokens resumes after the prefix of `heldLength` tokens in the KV cache
 * (the previous request's or a snapshot's), whose first `shared` tokens it shares: a prefix may be
 * taken over whole, and both were cut by {@link prefixTiledEnd}. The engine and the benchmark's
 * floor both call this, so they take over the same tokens.
 * @returns a point in `[0, length]`.
 */
export function prefixResumeAfter(shared: number, heldLength: number, length: number): number {
  return resumeAfter(shared, heldLength, length, true, prefixTiledEnd);
}

/**
 * The decode calls that evaluate tokens `[from, length)` of a prefix of `length` tokens
 * ({@link prefixTiledEnd}), as token counts.
 * @throws `RangeError` as {@link callSizes} does (a `from` not from {@link prefixResumeAfter}).
 */
export function prefixCallSizes(from: number, length: number, batchSize: number): number[] {
  return sequenceCallSizes(from, length, batchSize, prefixTiledEnd);
}
