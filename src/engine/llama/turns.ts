import {
  branchAfterLead,
  branchFrom,
  leadWindows,
  planDecode,
  type DecodeLimits,
  type DecodePlan,
  type PlannedBranch,
} from "../decode/index.js";
import type { BranchPart } from "./lanes.js";
import { commonPrefixLength, type PrefixSnapshotCache } from "./prefix-cache.js";
import type { CallLimits, CallPace } from "./call-pace.js";
import type { HeldLead, PrefixSequence, PrefixTurn } from "./prefix-sequence.js";
import type { WindowsDone } from "./windowed-lead.js";
import {
  branchTotalTokens,
  type BranchScore,
  type EngineCounters,
  type ScoreRequest,
} from "../types.js";

/**
 * A request's turns with the in-process engine's model: a long request gives the model up to
 * requests waiting, between the decode calls of its prefix, its lead or a branch, or between its
 * branches, and resumes in a later turn (docs/decisions/103). What one turn leaves for the next.
 */

/** What a request has done over its turns so far. */
export interface Progress {
  /**
   * Prefix tokens taken over from the KV cache in the first turn (not from its own parked part);
   * `undefined` until a turn has come to the prefix.
   */
  cachedPrefixTokens: number | undefined;
  /** Tokens evaluated so far, over all turns. */
  evaluatedTokens: number;
  /**
   * The prefix cache's key of what the last turn parked when it stopped: the part of the prefix
   * evaluated so far, or (`parkedWithLead`) the prefix with the lead or part of it, or with the
   * lead and part of a branch (`part`).
   */
  parked?: string | undefined;
  /**
   * Whether `parked` holds the prefix and the lead (the turn stopped between two branches), the
   * prefix and the first `leadDone` tokens of the lead (it stopped inside the lead), or the
   * prefix and the first tokens of the branch `part` names (it stopped inside that branch).
   */
  parkedWithLead?: boolean;
  /**
   * The branch a turn gave the model up inside, and its tokens `parked` holds; `undefined` when
   * none, or once a turn has taken it back.
   */
  part?: BranchPart | undefined;
  /**
   * Lead tokens evaluated when a turn gave the model up inside the lead (lead-turn.ts `runLeadTurn`), or
   * taken over from a request before ({@link takeOverLead}); `undefined` once the lead is whole.
   */
  leadDone?: number;
  /**
   * Lead tokens sequence 0 holds now on top of the prefix, evaluated in whole decode calls (this
   * turn): what the engine keeps for the next request when the turn fails or is cancelled.
   */
  leadHeld?: number | undefined;
  /** Scores of the branches earlier turns ran, by index; absent before the branches start. */
  scores?: (BranchScore | undefined)[];
  /** What {@link workLeft} said when the last turn gave the model up: the next turn's rank. */
  workLeft?: number;
  /** The windows of its lead evaluated in earlier turns, while it is evaluated in windows. */
  windows?: WindowsDone | undefined;
  /**
   * The windows the lead tokens sequence 0 holds for it were evaluated in (`leadWindows`);
   * `undefined`: none. Kept with the lead for the next request.
   */
  leadLayout?: readonly number[] | undefined;
  /**
   * Set when this request's windows could not be merged, which turned windows off: for how long,
   * ms.
   */
  windowsOff?: number;
}

/** What a turn returns when it gave the model up before the request was done. */
export const YIELDED = Symbol("yielded");

/**
 * The branches of a one-lane plan's run that earlier turns did not score, the first of them
 * planned from what the sequence holds of it: the part an earlier turn evaluated (`part`), or
 * the common lead (the branch before it is no longer in the KV cache).
 * @param scores - by branch index, `undefined` where not scored yet
 * @param part - the first branch's tokens the sequence holds, when a turn stopped inside it
 * @returns the rest of lane 0's run, in its order
 */
export function restOfRun(
  request: ScoreRequest,
  plan: DecodePlan,
  scores: readonly (BranchScore | undefined)[],
  batchSize: number,
  part?: BranchPart,
): PlannedBranch[] {
  const rest = plan.lanes[0]!.filter(({ index }) => scores[index] === undefined);
  return rest.map(({ index }, k) => {
    if (k > 0) return rest[k]!;
    return index === part?.index
      ? branchFrom(request, index, part.done, batchSize)
      : branchAfterLead(request, index, plan.lead.length, batchSize);
  });
}

/**
 * Tokens a request has left to evaluate, which rank it in the TurnQueue (least first): the rest of
 * its prefix, the lead of its branches unless it is evaluated, and every branch not scored yet
 * past the lead, its label chains included.
 * @param leadLength - tokens every branch starts with (the plan's lead, or {@link commonLead})
 * @param prefixDone - prefix tokens evaluated or taken over so far
 * @param scores - by branch index, `undefined` where not scored yet; absent: none scored
 * @param leadDone - whether the lead is evaluated; by default once any branch is scored (false
 *   for a turn that evaluates its prefix again after earlier turns scored branches)
 * @param part - a branch whose first `done` tokens are evaluated (a turn stopped inside it)
 */
export function workLeft(
  request: ScoreRequest,
  leadLength: number,
  prefixDone: number,
  scores?: readonly (BranchScore | undefined)[],
  leadDone = scores !== undefined,
  part?: BranchPart,
): number {
  let left = request.prefix.length - prefixDone + (leadDone ? 0 : leadLength);
  request.branches.forEach((branch, i) => {
    if (scores?.[i] === undefined) left += branchTotalTokens(branch) - leadLength;
  });
  return left - Math.max(0, (part?.done ?? 0) - leadLength);
}

/**
 * The work a request has before its first turn ({@link workLeft}), as a function: asked when the
 * TurnQueue ranks it, as it depends on what sequence 0 and the prefix cache hold by then (its
 * prefix, or its prefix and lead, `PrefixSequence.takeOverLead`).
 */
export function sizeOf(
  request: ScoreRequest,
  sequence: PrefixSequence,
  limits: DecodeLimits,
  windowed: boolean,
): () => number {
  const lead = commonLead(request);
  const planned = leadOf(request, limits, windowed);
  const { length } = planned.tokens;
  return () => {
    const held = sequence.leadHeld(request.prefix, planned);
    return held > 0
      ? workLeft(request, length, request.prefix.length, undefined, false) - held
      : workLeft(request, lead, sequence.sharedNow(request.prefix));
  };
}

/**
 * The lead of `request` as {@link planDecode} plans it: the tokens every branch starts with
 * that are evaluated once (for one branch, its tokens before its last call), how many of them
 * are tiled, and, with `windowed` (the engine evaluates windows), the windows it is cut into.
 */
export function leadOf(request: ScoreRequest, limits: DecodeLimits, windowed: boolean): HeldLead {
  const { length, tiled } = planDecode(request, { shared: 0, length: 0 }, limits).lead;
  const tokens = request.branches[0]?.tokens.slice(0, length) ?? [];
  const windows = windowed ? leadWindows(request.windows, { tiled }) : undefined;
  return { tokens, tiled, ...(windows ? { windows } : {}) };
}

/** Tokens every branch of `request` starts with: the most a plan's lead can be. */
export function commonLead(request: ScoreRequest): number {
  const [first, ...rest] = request.branches.map((branch) => branch.tokens);
  if (!first) return 0;
  return rest.reduce(
    (lead, tokens) => commonPrefixLength(first.slice(0, lead), tokens),
    first.length,
  );
}

/** How a turn parks what sequence 0 holds, whether it gives way, and what bounds its calls. */
export interface TurnOptions extends CallLimits {
  /** Parks what sequence 0 holds; its key, or `undefined` when it could not be kept. */
  readonly park: () => Promise<string | undefined>;
  /**
   * Whether a request with less work left than `work` tokens waits for the model; `undefined`:
   * the turn never gives way.
   */
  readonly giveWay: ((work: number) => boolean) | undefined;
  /**
   * The pace of sequence 0's calls after the prefix (call-pace.ts): the lead's, then lane 0's
   * branches'; its first call sized by the engine's last timed call (the prefix's, when this
   * turn timed some).
   */
  readonly pace: CallPace;
}

/** How {@link runBranchTurn} runs branches and parks what sequence 0 holds. */
export interface BranchTurnOptions extends TurnOptions {
  /**
   * Runs `lanes` (lanes.ts `runLanes`), a lane stopping when `giveWay` says so: between two
   * branches (sequence 0 then holds the prefix and the lead), or between two decode calls of a
   * branch once `park` parked what sequence 0 holds.
   * @returns scores by branch index, `undefined` for those not run
   */
  readonly run: (
    lanes: readonly (readonly PlannedBranch[])[],
    giveWay: ((rest: readonly PlannedBranch[], done: number) => boolean) | undefined,
    park: ((part: BranchPart) => Promise<boolean>) | undefined,
  ) => Promise<readonly (BranchScore | undefined)[]>;
}

/**
 * A turn's branches: those the request has left (all of the plan's lanes in its first turn that
 * comes to them, else the rest of lane 0's run, from the part of its first branch an earlier turn
 * parked), until every one is scored or the turn gives the model up, between two of them or
 * between two decode calls of one. It gives way only when it can park what sequence 0 holds;
 * where it cannot (no room), it goes on to the end.
 * @param progress - updated: `scores`, and on giving way `parked`, `parkedWithLead`, `part`,
 *   `workLeft`
 * @returns every branch's score by index, or {@link YIELDED}
 */
export async function runBranchTurn(
  request: ScoreRequest,
  plan: DecodePlan,
  progress: Progress,
  options: BranchTurnOptions,
): Promise<BranchScore[] | typeof YIELDED> {
  const scores = progress.scores ?? new Array<BranchScore | undefined>(request.branches.length);
  const lead = plan.lead.length;
  let lanes = progress.scores
    ? [restOfRun(request, plan, scores, options.batchSize, progress.part)]
    : plan.lanes;
  // Sequence 0 will not hold the part again: it is evaluated on from here.
  progress.part = undefined;
  // The branches left in the lane past the lead, less what is evaluated of the first, are all
  // the work left (one lane).
  const wanted = options.giveWay;
  let giveWay =
    wanted &&
    ((left: readonly PlannedBranch[], done: number) =>
      wanted(
        left.reduce(
          (work, { index }) => work + branchTotalTokens(request.branches[index]!) - lead,
          -Math.max(0, done - lead),
        ),
      ));
  // Parks inside a branch; the request's progress holds the key at once, so that a lane that
  // fails after it still leaves nothing pinned in the cache (takeTurns drops it).
  const park =
    giveWay &&
    (async (part: BranchPart) => {
      const parked = await options.park();
      if (parked !== undefined) Object.assign(progress, { parked, part });
      return parked !== undefined;
    });
  for (;;) {
    const ran = await options.run(lanes, giveWay, park);
    for (let i = 0; i < scores.length; i++) scores[i] ??= ran[i];
    if (!scores.includes(undefined)) return scores as BranchScore[];
    progress.scores = scores;
    // Stopped between two branches (nothing parked yet), or inside one (parked).
    progress.parked ??= await options.park();
    if (progress.parked !== undefined) {
      progress.parkedWithLead = true;
      const left = workLeft(request, lead, request.prefix.length, scores, true, progress.part);
      progress.workLeft = left;
      return YIELDED;
    }
    lanes = [restOfRun(request, plan, scores, options.batchSize)];
    giveWay = undefined;
  }
}

/**
 * Forgets what the request's last turn parked, deleting its snapshot from `cache`.
 * @param tookBack - whether sequence 0 holds it now; if not, a branch part it held is forgotten
 *   too (the turn evaluates that branch from the lead)
 */
export function dropParked(
  progress: Progress,
  cache: PrefixSnapshotCache | undefined,
  tookBack = false,
): void {
  if (progress.parked !== undefined) cache?.delete(progress.parked);
  progress.parked = undefined;
  progress.parkedWithLead = false;
  if (!tookBack) progress.part = undefined;
}

/**
 * In a request's first turn, puts its prefix and as much of its lead as a request before left
 * into sequence 0 (`PrefixSequence.takeOverLead`), counted as cached prefix tokens.
 * @param windowed - whether the engine evaluates leads in windows (`leadOf`)
 * @param progress - updated: `leadHeld` (reset for the turn), `cachedPrefixTokens`, `leadLayout`,
 *   and `leadDone` when part of the lead is left
 * @returns whether sequence 0 holds them now (the turn evaluates the rest of the lead, if any, and
 *   the branches)
 */
export async function takeOverLead(
  request: ScoreRequest,
  progress: Progress,
  sequence: PrefixSequence,
  limits: DecodeLimits,
  counters: EngineCounters,
  windowed: boolean,
): Promise<boolean> {
  progress.leadHeld = undefined;
  if (progress.cachedPrefixTokens !== undefined) return false;
  const lead = leadOf(request, limits, windowed);
  const taken = lead.tiled > 0 ? await sequence.takeOverLead(request.prefix, lead) : 0;
  if (taken === 0) return false;
  const cached = request.prefix.length + taken;
  countPrefixTurn(progress, { cached, evaluated: 0, parked: undefined }, counters);
  progress.leadDone = taken < lead.tokens.length ? taken : undefined;
  progress.leadHeld = taken;
  progress.leadLayout = lead.windows;
  return true;
}

/**
 * Adds what a turn did with the prefix to the request's progress and the engine's counters. Tokens
 * taken over from the request's own parked part are not cached tokens: they count as evaluated, in
 * the turn that evaluated them; only the first turn's are cached.
 */
export function countPrefixTurn(
  progress: Progress,
  turn: PrefixTurn,
  counters: EngineCounters,
): void {
  const firstTurn = progress.cachedPrefixTokens === undefined;
  progress.cachedPrefixTokens ??= turn.cached;
  progress.evaluatedTokens += turn.evaluated;
  counters.prefixTokensEvaluated += turn.evaluated;
  if (firstTurn) counters.prefixTokensCached += turn.cached;
}
