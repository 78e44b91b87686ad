import { LRUCache } from "lru-cache";
import type { Engine, ScoreBranch, ScoreResult, Token } from "../engine/types.js";
import type { LabelTrie } from "./labels.js";
import type { Plan } from "./plan.js";
import { normalisedLabels } from "./readout.js";
import type { QuestionShape } from "./types.js";

/** Distinct question views whose content-free priors are kept. */
export const PRIOR_CACHE_ENTRIES = 4096;

/** The label trie and label count of the question view that produced a branch. */
export interface BranchLabels {
  readonly trie: LabelTrie;
  readonly count: number;
}

/**
 * The label trie and label count of the question view (or the contrast branch) that produced
 * branch `index` of a plan.
 * @throws `Error` when no question of the plan owns the branch
 */
export function labelsOfBranch(plan: Plan<QuestionShape>, index: number): BranchLabels {
  if (plan.contrast?.branch === index) return { trie: plan.contrast.trie, count: 2 };
  for (const q of plan.questions) {
    const v = index - q.firstBranch;
    if (v >= 0 && v < q.views.length) return { trie: q.views[v]!.trie, count: q.labelCount };
  }
  throw new Error(`no question owns branch ${index}`);
}

/**
 * The content-free prior of some branches from their scores on top of each content-free prefix:
 * per branch, log p by label position, normalised over the labels, with the probabilities
 * averaged over the content-free states.
 * @param labels - the labels of each branch, in the order of the results' branches
 * @param results - one score result per content-free state, each over the same branches
 * @returns per branch, the log-probability of each label
 * @example
 * ```ts
 * averagePriors([{ trie, count: 2 }], [r1, r2, r3]); // → [[ln 0.6, ln 0.4]]
 * ```
 */
export function averagePriors(
  labels: readonly BranchLabels[],
  results: readonly ScoreResult[],
): number[][] {
  const sums = labels.map((l) => new Array<number>(l.count).fill(0));
  for (const result of results)
    labels.forEach((l, i) => {
      const lp = normalisedLabels(l.trie, result.branches[i]!, l.count);
      lp.forEach((x, j) => (sums[i]![j]! += Math.exp(x) / results.length));
    });
  return sums.map((s) => s.map(Math.log));
}

/**
 * Content-free priors of question views, kept in an LRU of {@link PRIOR_CACHE_ENTRIES} keyed by
 * the view's branch (its tokens and candidate tree): a question asked again costs nothing.
 */
export class PriorCache {
  private readonly priors = new LRUCache<string, number[]>({ max: PRIOR_CACHE_ENTRIES });

  /**
   * The content-free prior of every branch of a plan, from the cache or by scoring the uncached
   * branches on top of each content-free prefix (same system message, state block and media-free
   * user turn). These evaluations are not counted in the request's usage.
   * @param contentFreePrefixes - one prefix per `CONTENT_FREE_STATES` entry
   * @returns per branch of the plan, log p by label position
   * @throws what the engine throws; the signal's reason when aborted
   */
  async of(
    plan: Plan<QuestionShape>,
    engine: Pick<Engine, "score">,
    contentFreePrefixes: readonly Token[][],
    signal?: AbortSignal,
  ): Promise<number[][]> {
    const keys = plan.branches.map(viewKey);
    const missing = [...new Set(keys.filter((key) => !this.priors.has(key)))];
    if (missing.length > 0) {
      const at = missing.map((key) => keys.indexOf(key));
      const branches = at.map((index) => plan.branches[index]!);
      const labels = at.map((index) => labelsOfBranch(plan, index));
      const results: ScoreResult[] = [];
      // Read as the question is (in its windows, decision 113): it is the question's one branch.
      const windows = plan.windows && branches.length === plan.branches.length ? plan.windows : [];
      for (const prefix of contentFreePrefixes)
        results.push(
          await engine.score({ prefix, branches, ...(windows.length ? { windows } : {}) }, signal),
        );
      const priors = averagePriors(labels, results);
      missing.forEach((key, i) => this.priors.set(key, priors[i]));
    }
    return keys.map((key) => this.priors.get(key)!);
  }
}

/** A question view's identity for the prior cache: its branch tokens and candidate tree. */
function viewKey(branch: ScoreBranch): string {
  return JSON.stringify(branch);
}
