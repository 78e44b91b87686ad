import { branchAfterLead, type DecodePlan, type PlannedBranch } from "../decode/index.js";
import type { PrefixSnapshotCache } from "./prefix-cache.js";
import type { PrefixTurn } from "./prefix-sequence.js";
import type { BranchScore, EngineCounters, ScoreRequest } from "../types.js";

/**
 * A request's turns with the in-process engine's model: a long request gives the model up to
 * requests waiting, between the decode calls of its prefix or between its branches, and resumes
 * in a later turn (docs/decisions/103). What one turn leaves for the next.
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
   * evaluated so far, or (`parkedWithLead`) the prefix and the lead of the branches.
   */
  parked?: string | undefined;
  /** Whether `parked` holds the prefix and the lead (the turn stopped between two branches). */
  parkedWithLead?: boolean;
  /** Scores of the branches earlier turns ran, by index; absent before the branches start. */
  scores?: (BranchScore | undefined)[];
}

/** What a turn returns when it gave the model up before the request was done. */
export const YIELDED = Symbol("yielded");

/**
 * The branches of a one-lane plan's run that earlier turns did not score, the first of them
 * planned from the common lead (the branch before it is no longer in the KV cache).
 * @param scores - by branch index, `undefined` where not scored yet
 * @returns the rest of lane 0's run, in its order
 */
export function restOfRun(
  request: ScoreRequest,
  plan: DecodePlan,
  scores: readonly (BranchScore | undefined)[],
  batchSize: number,
): PlannedBranch[] {
  const rest = plan.lanes[0]!.filter(({ index }) => scores[index] === undefined);
  return rest.map((branch, k) =>
    k === 0 ? branchAfterLead(request, branch.index, plan.lead.length, batchSize) : branch,
  );
}

/** Forgets what the request's last turn parked, deleting its snapshot from `cache`. */
export function dropParked(progress: Progress, cache: PrefixSnapshotCache | undefined): void {
  if (progress.parked !== undefined) cache?.delete(progress.parked);
  progress.parked = undefined;
  progress.parkedWithLead = false;
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
