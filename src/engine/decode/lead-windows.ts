import { FA_TILE_ROWS } from "./kernel-split.js";

/**
 * Option lines in windows (docs/decisions/113): a request's lead may be cut into windows, each
 * evaluated seeing the prefix and itself only, then placed one after the other, so that a long
 * list of options costs attention within each window instead of over the whole list (Ratner et
 * al. 2023, "Parallel Context Windows"). Windows are given as the lead-relative token index each
 * one ends at (`ScoreRequest.windows`); the first starts at the lead's start, and the lead's
 * tokens after the last window see everything before them, as without windows.
 *
 * The first window is evaluated exactly as without windows, so a lead evaluated without windows
 * is the layout `[Infinity]`: one window to the end.
 */

/** The layout of a lead evaluated without windows. */
const CAUSAL: readonly number[] = [Infinity];

/**
 * The windows a lead is evaluated in: those of `ends` that end within its tiled part, and leave
 * none of it or at least 64 tokens after them, so that every token from the lead's start to the
 * end of its tiled part goes through the tiled kernel (kernel-split.ts) in whichever request
 * evaluates it, and its cells are the same; `undefined` (no windows) for fewer than two, or when
 * one of them is shorter than 64 tokens.
 * @param ends - increasing window ends, lead-relative (`ScoreRequest.windows`)
 * @param lead - the plan's lead: its tokens before its tiled part ends (`DecodePlan.lead.tiled`)
 */
export function leadWindows(
  ends: readonly number[] | undefined,
  lead: { readonly tiled: number },
): readonly number[] | undefined {
  if (!ends) return undefined;
  const within = ends.filter((end) => end <= lead.tiled);
  // The tokens after the last window, up to the end of the tiled part, make one tiled call or more.
  while (
    within.length > 0 &&
    lead.tiled - within.at(-1)! > 0 &&
    lead.tiled - within.at(-1)! < FA_TILE_ROWS
  )
    within.pop();
  if (within.length < 2) return undefined;
  const tooSmall = within.some((end, i) => end - (i === 0 ? 0 : within[i - 1]!) < FA_TILE_ROWS);
  return tooSmall ? undefined : within;
}

/**
 * How many leading lead tokens hold the same KV cells when evaluated in windows `a` and in
 * windows `b` (either `undefined`: no windows): up to the first window they cut differently,
 * and into it as far as both evaluate it as a window from the same start; `Infinity` when they
 * are the same. The tokens themselves must be compared apart.
 * @example
 * ```ts
 * windowsAgree([512, 1024, 1536], [512, 1024, 1600]); // → 1536
 * windowsAgree(undefined, [512, 1024]); // → 512: the first window is evaluated as without windows
 * ```
 */
export function windowsAgree(
  a: readonly number[] | undefined,
  b: readonly number[] | undefined,
): number {
  const x = a ?? CAUSAL;
  const y = b ?? CAUSAL;
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if (x[i] === y[i]) continue;
    // One evaluates on causally after its windows from here: the cells part at the window's start.
    if (i >= x.length || i >= y.length) return i === 0 ? 0 : x[i - 1]!;
    return Math.min(x[i]!, y[i]!);
  }
  return Infinity;
}
