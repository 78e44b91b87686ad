import type { AnswerShape, QuestionShape, TextValue } from "../types.js";

// Why one module per type, and what stays outside them: docs/decisions/091-question-types-as-modules.md
/**
 * What a question type is, in one module: how its wire question becomes the domain question and
 * back, which labels it is answered with, the lines it is asked in, and how the probabilities of
 * its labels become its typed answer. The planner, the readout and the answer dispatch on
 * `question.type` once, through a registry of these (questions/index.ts); nothing else branches
 * on a question's type.
 *
 * Methods, not function-valued properties: a module typed on its own question
 * (`QuestionType<ChoiceQuestion, …>`) is then usable where any question type is
 * ({@link AnyQuestionType}); the registry hands each module only questions of its own name.
 *
 * @typeParam Q - the domain question, `type` = {@link QuestionType.name}
 * @typeParam A - the typed answer
 * @typeParam W - the wire question (protocol/), as validated
 * @example
 * ```ts
 * const order = choice.canonicalOrder(question); // options sorted by id
 * choice.answer(question, [0.2, 0.8]); // → { type: "choice", choice: "dog", … }
 * ```
 */
export interface QuestionType<
  Q extends QuestionShape = QuestionShape,
  A extends AnswerShape = AnswerShape,
  W = unknown,
> {
  /** The name on the wire and in `question.type`, e.g. `choice`. */
  readonly name: Q["type"];

  /**
   * The validated wire question as the domain question: `null` instructions count as absent
   * (see {@link instructionsOf}), everything else keeps the caller's order.
   */
  fromWire(wire: W): Q;
  /** The domain question as a wire question (the inverse of {@link QuestionType.fromWire}). */
  toWire(question: Q): Record<string, unknown>;

  /** How many labels the question is answered with (options, levels, sides). */
  labelCount(question: Q): number;
  /**
   * The labels read at the start of the reply, by position (one per label, no cue): letters,
   * `Yes`/`No`, level numbers.
   */
  fixedLabels(question: Q): string[];
  /**
   * The order the labels are shown in: option indices, position p showing option `order[p]`.
   * The first of the orders the planner shows, and the order ties are broken in.
   */
  canonicalOrder(question: Q): number[];
  /** Whether option-order debiasing (`debias`) shows it in more orders than its canonical one. */
  readonly debiased: boolean;
  /**
   * Whether the question contrast (`questionContrast`) reads it against the state alone: its
   * labels must then be the contrast branch's (the first such question's trie is used for all).
   */
  readonly contrasted: boolean;

  /**
   * The question's lines after its `Question: …` line, asked with fixed labels.
   * @param labels - the label of each shown position
   * @param order - the option index shown at each position
   */
  lines(question: Q, labels: readonly string[], order: readonly number[]): string[];
  /**
   * Word labels: the question answered with texts of its own after the `Answer:` cue. Absent
   * when the type has none; the planner falls back to {@link QuestionType.fixedLabels} when
   * `texts` gives none, or when they are too long or not prefix-free as tokens.
   */
  readonly words?: {
    /**
     * The word labels, by option index, without their leading space.
     * @param settings - the readout's `scoreLabels` (a score names its levels only with `levels`)
     * @returns undefined when the question is not answered with words under these settings
     */
    texts(question: Q, settings: WordSettings): string[] | undefined;
    /** The whole question part of the branch when asked with word labels (its inline form). */
    render(question: Q, order: readonly number[]): string;
  };

  /**
   * The calibration bucket of an option count (calibration.ts keys a temperature by
   * `${name}:${bucket}`).
   */
  bucket(labelCount: number): string;
  /**
   * The typed answer.
   * @param probabilities - by option index, summing to 1 (already tempered)
   */
  answer(question: Q, probabilities: number[]): A;
}

/** A question type as the planner and readout see it: any question, any answer. */
export type AnyQuestionType = QuestionType<QuestionShape, AnswerShape, never>;

/** The readout settings word labels depend on. */
export interface WordSettings {
  readonly scoreLabels?: "numbers" | "levels";
}

/**
 * The domain question's instructions from a wire question's: absent when null or missing.
 * @returns `{}` or `{ instructions }`, to spread after `type`
 */
export function instructionsOf(wire: { readonly instructions?: TextValue | null }): {
  instructions?: TextValue;
} {
  const instructions = wire.instructions ?? undefined;
  return instructions === undefined ? {} : { instructions };
}

/**
 * The start of a wire question: its type and, when present, its instructions.
 * @returns `{ type }` or `{ type, instructions }`
 */
export function wireBase(question: QuestionShape): Record<string, unknown> {
  return {
    type: question.type,
    ...(question.instructions !== undefined ? { instructions: question.instructions } : {}),
  };
}

/** The identity order of `n` labels: `[0, 1, …, n − 1]`. */
export function identityOrder(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
