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
 * differ from each other. With SmolLM2-135M (2026-11-25, node-llama-cpp probes, see the README's
 * "Decode calls cut alike"), a 103-token branch read in one call or cut into two gave answer
 * logits up to 0.1–0.6 apart; against a near-exact reference (flash attention off, f32 cache)
 * the tiled kernel was off by up to 0.24, the one-row kernel by 0.43.
 *
 * So every sequence decisiond evaluates (a prefix, a branch) goes through the kernels by a map
 * that depends only on its own length L: the tokens before {@link tiledEnd}(L) in calls of at
 * least 64 tokens (tiled), the rest (fewer than 64) in one call of at least two tokens. Reusing
 * tokens already in the KV cache (another request's prefix, a neighbouring branch, the common
 * lead) is allowed only as far as they were evaluated by the same map ({@link resumePoint}). Then
 * a question gets the same logits alone or beside others, and a state the same from a cache hit
 * as from a miss, on the CPU with one KV-cache sequence per request (the default there). With
 * several sequences, node-llama-cpp may merge their calls; a GPU backend has its own kernels.
 */

/** Rows (query tokens) from which a call takes the tiled kernel: `GGML_FA_TILE_Q` in ggml-cpu. */
export const FA_TILE_ROWS = 64;

/**
 * Where the tiled part of a sequence of `length` tokens ends: tokens `[0, tiledEnd)` go through
 * the tiled kernel, the rest through the one-row kernel. 0 below {@link FA_TILE_ROWS} tokens;
 * otherwise the last multiple of 64, or the whole length when that would leave a single token.
 */
export function tiledEnd(length: number): number {
  if (length < FA_TILE_ROWS) return 0;
  const end = length - (length % FA_TILE_ROWS);
  return length - end === 1 ? length : end;
}

/**
 * How many leading tokens of a sequence of `length` tokens can be taken over from one of
 * `heldLength` tokens (sharing its start) that was evaluated by its own map: all of them when both
 * maps cut at the same place, otherwise only up to the earlier cut.
 */
export function agreeingTokens(heldLength: number, length: number): number {
  const a = tiledEnd(heldLength);
  const b = tiledEnd(length);
  return a === b ? Infinity : Math.min(a, b);
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
): number {
  return resumePoint(shared, agreeingTokens(heldLength, length), length, complete);
}

/**
 * The token to resume evaluating a sequence of `length` tokens from, when its first `shared`
 * tokens are in the KV cache and were evaluated by this sequence's own map as far as `agreeing`.
 * Stays at or before both; then steps back so the tiled part left is one call of at least 64
 * tokens and the one-row part is not a single token (unless the sequence is one token long).
 * @param complete whether the sequence may be taken over whole (a prefix may; a branch must
 *   evaluate at least its last token, whose logits are read).
 * @returns a point in `[0, length]` (`[0, length − 1]` unless `complete`).
 */
export function resumePoint(
  shared: number,
  agreeing: number,
  length: number,
  complete = false,
): number {
  let at = Math.max(0, Math.min(shared, agreeing, complete ? length : length - 1));
  if (at === length) return at;
  const end = tiledEnd(length);
  if (at < end) return end - at < FA_TILE_ROWS ? end - FA_TILE_ROWS : at;
  if (length - at === 1 && length > 1) at -= 1;
  return at;
}

/**
 * The sizes of the decode calls that evaluate tokens `[from, to)` of a sequence whose tiled part
 * ends at `end` ({@link tiledEnd}): the tiled tokens in as few calls of at most `batchSize` as
 * possible, of about equal size (each at least 64), then the rest in one call.
 * @throws RangeError when `batchSize` < 128, or when the cut would put tiled tokens in a call of
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
 * `length` tokens, cut by its own map.
 */
export function sequenceCallSizes(from: number, length: number, batchSize: number): number[] {
  return callSizes(from, length, tiledEnd(length), batchSize);
}
