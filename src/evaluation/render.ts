import type { Plan } from "../decision/decide.js";
import type { LabelTrie } from "../decision/labels.js";
import type { Token } from "../engine/types.js";
import type { EvalItem, Expected } from "./format.js";

/**
 * Training examples rendered by the server's own planner: what `training/` trains on is exactly
 * what `engine.score` is asked at serving time (docs/TRAINING.md).
 */

/** One question of one item, as token ids. */
export interface RenderedExample {
  /** The item id (its group decides the split, format.ts splitOf). */
  readonly id: string;
  /** The question id inside the item. */
  readonly question: string;
  readonly type: "choice" | "noul" | "score";
  /** The shared prefix: chat head, media captions, state block. */
  readonly prefix: Token[];
  /** The question's branch: question text, user-turn close, assistant opening, answer cue. */
  readonly branch: Token[];
  /**
   * Token sequence of each label as the model writes it after {@link branch}, in the question's
   * class order (choice: option order; noul: [yes, no]; score: levels 0..n−1).
   */
  readonly labels: Token[][];
  /** Index into {@link labels} of the expected answer. */
  readonly gold: number;
}

/**
 * The label token sequences a trie reads, by label index.
 * @example labelSequences(buildLabelTrie([[5], [6, 7]]), 2) // → [[5], [6, 7]]
 */
export function labelSequences(trie: LabelTrie, count: number): Token[][] {
  const out: Token[][] = new Array<Token[]>(count);
  const walk = (node: LabelTrie, path: Token[]) => {
    node.next.forEach((next, i) => {
      const here = [...path, node.tokens[i]!];
      if (typeof next === "number") out[next] = here;
      else walk(next, here);
    });
  };
  walk(trie, []);
  return out;
}

/**
 * Index of an expected answer among a question's classes.
 * @throws {@link Error} when the answer does not name a class of the question.
 */
export function goldIndex(
  question: Plan["questions"][number]["question"],
  expected: Expected,
): number {
  switch (question.type) {
    case "choice": {
      const at = question.options.findIndex(([id]) => id === expected);
      if (at < 0) throw new Error(`expected answer ${String(expected)} is not an option`);
      return at;
    }
    case "noul":
      if (typeof expected !== "boolean") throw new Error("a noul answer must be true or false");
      return expected ? 0 : 1;
    case "score":
      if (typeof expected !== "number" || expected < 0 || expected >= question.levels.length)
        throw new Error(`expected level ${String(expected)} is out of range`);
      return expected;
  }
}

/**
 * The examples of one planned item: one per question, read from the question's first view (the
 * order the server shows: a choice's options in id order, plan.ts `ordersOf`; plan with
 * debiasing off).
 * @throws {@link Error} when an expected answer names no class of its question.
 */
export function renderPlan(item: EvalItem, plan: Plan): RenderedExample[] {
  return plan.questions.map((q) => {
    const view = q.views[0]!;
    const byPosition = labelSequences(view.trie, q.labelCount);
    // Position p shows option view.order[p]: put the sequences back in class order.
    const labels = new Array<Token[]>(q.labelCount);
    view.order.forEach((optionIndex, position) => (labels[optionIndex] = byPosition[position]!));
    return {
      id: item.id,
      question: q.id,
      type: q.question.type,
      prefix: plan.prefix,
      branch: [...plan.branches[q.firstBranch]!.tokens],
      labels,
      gold: goldIndex(q.question, item.expected[q.id]!),
    };
  });
}
