import {
  agreeingTokens,
  callSizes,
  FA_TILE_ROWS,
  resumeAfter,
  resumePoint,
  sequenceCallSizes,
  tiledEnd,
} from "./kernel-split.js";
import { branchTotalTokens, type ScoreBranch, type Token } from "../types.js";

/**
 * Which branch each KV-cache sequence ("lane") evaluates, and in what order, so that tokens that
 * branches share at their start are evaluated once instead of once per branch. Branches of one
 * request often start alike: questions over the same options carry the same option lines, and
 * questions worded alike share their first words. This is prefix sharing between the branches
 * of a request, the idea of RadixAttention (Zheng et al. 2023, "SGLang: Efficient Execution of
 * Structured Language Model Programs"), done with KV-cache sequences:
 *
 * - the tokens every branch starts with (the request's common lead) are evaluated once, on top of
 *   the prefix, before the lanes are forked from it;
 * - each lane takes a run of neighbouring branches in token order, and a branch starts from the
 *   tokens it shares with the lane's previous branch, which stay in the lane's KV cache.
 *
 * Logits are exact: a branch's tokens sit at the same positions, after the same tokens, as when
 * it is evaluated alone, and go through the same attention kernels: tokens are taken over from
 * the lead or the previous branch only as far as they were cut into decode calls the way the
 * branch cuts itself (see kernel-split.ts), so the lead and the shared starts are those counts,
 * not always every token in common. Pure functions: the engine and the benchmark's floor
 * (bench/run.mjs) evaluate exactly the tokens a schedule names, in the calls
 * {@link branchCallSizes} gives.
 */

/** One branch in a lane's run. */
export interface ScheduledBranch {
  /** Index of the branch in the request. */
  readonly index: number;
  /**
   * Leading tokens of the branch already in the lane's KV cache when it starts (the common lead
   * included): its evaluation starts at `tokens[shared]`. Always less than `tokens.length`, since
   * the last token must be evaluated to read the answer position. At most the tokens it has in
   * common with the lead or the lane's previous branch; fewer where those were cut into calls
   * differently (kernel-split.ts).
   */
  readonly shared: number;
}

/** A request's schedule: see {@link scheduleBranches}. */
export interface BranchSchedule {
  /**
   * Leading tokens every branch has in common, evaluated once on top of the prefix (in the calls
   * {@link leadCallSizes} gives). At most {@link commonLeadLength}; fewer where the branches
   * would cut those tokens into calls differently. A lone branch's lead is its tokens before its
   * last decode call ({@link loneLead}).
   */
  readonly lead: number;
  /** One run per lane (lane 0 first); every branch index appears in exactly one run. */
  readonly lanes: readonly (readonly ScheduledBranch[])[];
}

/** Length of the longest common start of `a` and `b`. */
export function sharedStart(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * Leading tokens that all branches have in common, at most one less than the shortest branch
 * (each branch keeps its last token, whose logits are read). 0 for fewer than two branches.
 */
export function commonLeadLength(branches: readonly ScoreBranch[]): number {
  if (branches.length < 2) return 0;
  let lead = Math.min(...branches.map((b) => b.tokens.length)) - 1;
  const first = branches[0]!.tokens;
  for (const branch of branches) lead = Math.min(lead, sharedStart(first, branch.tokens));
  return Math.max(0, lead);
}

/** Element-wise order of token arrays (a shorter array first when it is a start of the other). */
function compareTokens(a: readonly Token[], b: readonly Token[]): number {
  const i = sharedStart(a, b);
  if (i < a.length && i < b.length) return a[i]! - b[i]!;
  return a.length - b.length;
}

/**
 * Plans a request's branches over at most `lanes` KV-cache sequences: branches sorted by their
 * tokens, cut into contiguous runs of about equal cost (tokens put through the model, children
 * included), one run per lane.
 * @param branches - the request's branches (each with at least one token).
 * @param lanes - sequences available, ≥ 1; fewer are used when there are fewer branches.
 * @param batchSize - most tokens one decode call takes: a lone branch's lead is its calls before
 *   its last
 * @returns the common lead and each lane's run; a run's first branch shares exactly the lead.
 */
export function scheduleBranches(
  branches: readonly ScoreBranch[],
  lanes: number,
  batchSize: number,
): BranchSchedule {
  const lead =
    branches.length === 1 ? loneLead(branches[0]!, batchSize) : kernelAlignedLead(branches);
  const order = branches.map((_, i) => i);
  order.sort((a, b) => compareTokens(branches[a]!.tokens, branches[b]!.tokens) || a - b);

  // Where each branch resumes after its neighbour before it in token order (after the lead for
  // the first), and so its cost after that neighbour: its tokens from there, plus its children.
  const shared = order.map((index, k) =>
    k === 0 ? afterLead(branches[index]!, lead) : afterPrevious(branches, index, order[k - 1]!),
  );
  const cost = order.map((index, k) => branchTotalTokens(branches[index]!) - shared[k]!);
  const total = cost.reduce((s, c) => s + c, 0);
  const laneCount = Math.max(1, Math.min(lanes, branches.length));
  const runs: ScheduledBranch[][] = [];
  let run: ScheduledBranch[] = [];
  let spent = 0;
  for (let k = 0; k < order.length; k++) {
    const lanesLeft = laneCount - runs.length;
    const branchesLeft = order.length - k;
    // Close the current run once it has its share of the cost, or when each branch left must
    // open a lane of its own.
    if (
      run.length > 0 &&
      lanesLeft > 1 &&
      (spent >= (total * (runs.length + 1)) / laneCount || branchesLeft < lanesLeft)
    ) {
      runs.push(run);
      run = [];
    }
    // A run holds neighbours in token order, so a branch resumes after the one before it in the
    // order, unless it opens a run (then only the lead is in its lane's KV cache).
    const index = order[k]!;
    run.push({ index, shared: run.length === 0 ? afterLead(branches[index]!, lead) : shared[k]! });
    spent += cost[k]!;
  }
  runs.push(run);
  return { lead, lanes: runs };
}

/**
 * The common lead cut to what every branch would evaluate the same way: as far as all branches'
 * kernel maps agree, and so that its tiled part is one call of at least 64 tokens and its
 * one-row part not a single token.
 */
function kernelAlignedLead(branches: readonly ScoreBranch[]): number {
  const lead = commonLeadLength(branches);
  if (lead === 0) return 0;
  const end = leadTiledEnd(branches);
  let at = lead;
  for (const branch of branches)
    at = Math.min(at, agreeingTokens(branches[0]!.tokens.length, branch.tokens.length));
  // No further than any branch would resume from it.
  for (const branch of branches) at = Math.min(at, afterLead(branch, at));
  if (at <= end) return at < FA_TILE_ROWS ? 0 : at;
  return at - end === 1 ? end : at;
}

/**
 * The lead of a request's only branch: its tokens before the last of the decode calls it makes
 * alone ({@link branchCallSizes}), in the same calls, so that an engine may give the model up
 * between them (with many described options a question is thousands of tokens); 0 when the
 * branch is one call. The branch then resumes at the lead in its last call, as before.
 */
function loneLead(branch: ScoreBranch, batchSize: number): number {
  const calls = branchCallSizes(branch, 0, batchSize);
  return calls.length < 2 ? 0 : branch.tokens.length - calls.at(-1)!;
}

/**
 * How many of a lead's first `lead` tokens go through the tiled kernel (kernel-split.ts): all of a
 * lone branch's lead; a lead of several branches may end in a one-row part.
 */
export function leadTiledLength(branches: readonly ScoreBranch[], lead: number): number {
  return branches.length === 0 ? 0 : Math.min(lead, leadTiledEnd(branches));
}

/** Where the tiled part of the lead ends: the branches' common one, or the earliest of theirs. */
function leadTiledEnd(branches: readonly ScoreBranch[]): number {
  return Math.min(...branches.map((b) => tiledEnd(b.tokens.length)));
}

/** Where a branch resumes with the lead (evaluated by its map, see kernelAlignedLead) in place. */
export function afterLead(branch: ScoreBranch, lead: number): number {
  return resumePoint(lead, Infinity, branch.tokens.length);
}

/** Where branch `index` resumes after branch `previous` on the same lane. */
function afterPrevious(branches: readonly ScoreBranch[], index: number, previous: number): number {
  const tokens = branches[index]!.tokens;
  const before = branches[previous]!.tokens;
  return resumeAfter(sharedStart(tokens, before), before.length, tokens.length);
}

/**
 * The decode calls that evaluate a branch from `shared` (a {@link ScheduledBranch.shared}) to its
 * end, as token counts; children are evaluated in calls of their own.
 */
export function branchCallSizes(branch: ScoreBranch, shared: number, batchSize: number): number[] {
  return sequenceCallSizes(shared, branch.tokens.length, batchSize);
}

/**
 * The decode calls that evaluate a schedule's common lead from token `from` (0: all of it), as
 * token counts.
 * @throws `RangeError` as `callSizes` does, for a `from` inside a call of the lead's tiled part
 *   that would leave fewer than 64 tiled tokens
 */
export function leadCallSizes(
  branches: readonly ScoreBranch[],
  lead: number,
  batchSize: number,
  from = 0,
): number[] {
  return lead <= from ? [] : callSizes(from, lead, leadTiledEnd(branches), batchSize);
}
