import type { Token } from "../engine/types.js";

// Why, with the measurements: docs/decisions/113-option-lines-in-windows.md
/**
 * Where a long question is cut into windows of whole lines (`ScoreRequest.windows`), so that an
 * engine may evaluate each window seeing the state and itself only: a list of hundreds of
 * described options then costs attention within each window, not over the whole list.
 */

/** Fewest tokens of listed lines (all the question's lines but its last) cut into windows. */
export const LIST_WINDOWS_FROM_TOKENS = 2048;

/** Most tokens of one window: whole lines, a longer line alone. */
export const LIST_WINDOW_TOKENS = 512;

/** Fewest tokens of a window: a shorter last one joins the one before (kernel-split.ts tiles). */
const MIN_WINDOW_TOKENS = 64;

/** Most lines a question is cut at: more than any option list the wire accepts, with its asking. */
const MAX_LINES = 4096;

/**
 * The windows of a question's text, as the token index each ends at (from the start of `tokens`,
 * the text's tokens): its lines but the last, packed in order into windows of at most
 * {@link LIST_WINDOW_TOKENS}; `undefined` when the listed lines hold fewer than
 * {@link LIST_WINDOWS_FROM_TOKENS} tokens, when the text has more than `maxTokens` tokens or
 * 4,096 lines (it is not cut line by line then: such a request is refused, or not a list), or
 * when the lines tokenized one by one do not make up `tokens` exactly (a tokenizer that merges
 * across a line break).
 * @param tokenize - tokenizes text as `tokens` were
 * @param maxTokens - the context size: a longer question is refused without windows
 * @example
 * ```ts
 * await listWindows(text, await tokenize(text), tokenize); // → [498, 1003, …, 3952]
 * ```
 */
export async function listWindows(
  text: string,
  tokens: readonly Token[],
  tokenize: (text: string) => Promise<Token[]>,
  maxTokens = Infinity,
): Promise<number[] | undefined> {
  if (tokens.length < LIST_WINDOWS_FROM_TOKENS || tokens.length > maxTokens) return undefined;
  const lines = text.split("\n", MAX_LINES + 1);
  if (lines.length < 3 || lines.length > MAX_LINES) return undefined;
  const pieces: Token[][] = [];
  for (const [i, line] of lines.entries())
    pieces.push(await tokenize(i < lines.length - 1 ? `${line}\n` : line));
  const joined = pieces.flat();
  if (joined.length !== tokens.length || joined.some((t, i) => t !== tokens[i])) return undefined;
  const ends: number[] = [];
  let at = 0;
  let start = 0;
  for (const piece of pieces.slice(0, -1)) {
    if (at > start && at + piece.length - start > LIST_WINDOW_TOKENS) {
      ends.push(at);
      start = at;
    }
    at += piece.length;
  }
  if (at < LIST_WINDOWS_FROM_TOKENS) return undefined;
  if (at - start < MIN_WINDOW_TOKENS) ends.pop();
  ends.push(at);
  return ends.length >= 2 ? ends : undefined;
}
