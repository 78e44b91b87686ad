import type { BranchScore, ScoreResult } from "../engine/types.js";
import { readTrie, type LabelTrie } from "./labels.js";
import { logSumExp } from "./math.js";
import type { Plan } from "./plan.js";
import type { QuestionShape } from "./types.js";

/**
 * Log-probabilities normalised over exactly the given labels.
 * @param logprobs - natural-log probabilities, one per label
 * @returns the same less their log-sum-exp (their exponentials sum to 1)
 * @example
 * ```ts
 * normalised([Math.log(0.2), Math.log(0.6)]); // → [ln 0.25, ln 0.75]
 * ```
 */
export function normalised(logprobs: readonly number[]): number[] {
  const norm = logSumExp(logprobs);
  return logprobs.map((x) => x - norm);
}

/**
 * The labels' log-probabilities read from one branch's score through its trie (chained over
 * multi-token labels), normalised over the labels.
 * @param count - number of labels in the trie
 * @returns log p by label position
 */
export function normalisedLabels(trie: LabelTrie, score: BranchScore, count: number): number[] {
  return normalised(readTrie(trie, score, count));
}

/**
 * The readout: per question, one log-score per option (choice), level (score) or side (noul,
 * `[true, false]`), read from the engine's scores of a plan. For each option order the label
 * log-probabilities are normalised over the labels, mapped back from positions to options, less
 * the content-free prior of each position (when given) and, for contrasted (noul) questions with
 * a contrast branch, less what the state alone says about Yes/No; then averaged over the option
 * orders.
 * Pure: the same plan, scores and priors give the same numbers to the bit.
 * @param result - the engine's answer to the plan's score request
 * @param priors - content-free prior per branch of the plan (log p by label position), or
 *   `undefined` without contextual calibration
 * @returns per question of the plan, in plan order, the log-scores in option order (not
 *   normalised once a prior is taken off)
 * @example
 * ```ts
 * const scores = readout(plan, await engine.score(scoreRequestOf(plan)), priors);
 * softmax(scores[0]!); // → probabilities of the first question's options
 * ```
 */
export function readout(
  plan: Plan<QuestionShape>,
  result: ScoreResult,
  priors?: readonly (readonly number[])[],
): number[][] {
  // What the state alone says about Yes/No, less the content-free prior (question contrast).
  const contrast = plan.contrast;
  const statePush = contrast
    ? normalisedLabels(contrast.trie, result.branches[contrast.branch]!, 2).map(
        (lp, j) => lp - (priors?.[contrast.branch]?.[j] ?? 0),
      )
    : undefined;
  return plan.questions.map((q) => {
    const perOrder = q.views.map((view, v) => {
      const byPosition = normalisedLabels(
        view.trie,
        result.branches[q.firstBranch + v]!,
        q.labelCount,
      );
      const prior = priors?.[q.firstBranch + v];
      // Map positions back to option indices, less the content-free prior of each position.
      const byOption = new Array<number>(q.labelCount);
      const push = q.kind.contrasted ? statePush : undefined;
      view.order.forEach((optionIndex, position) => {
        byOption[optionIndex] =
          byPosition[position]! - (prior?.[position] ?? 0) - (push?.[position] ?? 0);
      });
      return byOption;
    });
    return perOrder[0]!.map(
      (_, i) => perOrder.reduce((sum, lp) => sum + lp[i]!, 0) / perOrder.length,
    );
  });
}
