import { expectation } from "../../src/decision/math.js";
import { inlineQuestion } from "../../src/decision/prompt.js";
import {
  identityOrder,
  instructionsOf,
  type QuestionType,
  wireBase,
} from "../../src/decision/questions/question-type.js";
import type { TextValue } from "../../src/decision/types.js";

/**
 * A question type that exists only in the tests: `likert`, how much the state agrees with a
 * statement on the five-point scale. It is what a new question type takes: this one file, and
 * one registration line where it is planned (`{ ...QUESTION_TYPES, likert }`).
 */

/** The five points, lowest first. */
export const LIKERT_POINTS = [
  "strongly disagree",
  "disagree",
  "neutral",
  "agree",
  "strongly agree",
] as const;

/** Does the state agree with `statement`? */
export interface LikertQuestion {
  readonly type: "likert";
  readonly instructions?: TextValue;
  readonly statement: string;
}

/** The agreement 0..1 (the expected point over 4) and each point's probability. */
export interface LikertAnswer {
  readonly type: "likert";
  readonly agreement: number;
  readonly probabilities: Record<string, number>;
}

/** Its wire form. */
export interface LikertWire {
  readonly type: "likert";
  readonly instructions?: TextValue | null;
  readonly statement: string;
}

export const likert: QuestionType<LikertQuestion, LikertAnswer, LikertWire> = {
  name: "likert",

  fromWire: (wire) => ({ type: "likert", ...instructionsOf(wire), statement: wire.statement }),
  toWire: (question) => ({ ...wireBase(question), statement: question.statement }),

  labelCount: () => LIKERT_POINTS.length,
  fixedLabels: () => LIKERT_POINTS.map((_, i) => String(i + 1)),
  canonicalOrder: () => identityOrder(LIKERT_POINTS.length),
  debiased: false,
  contrasted: false,

  lines: (question, labels, order) => [
    `Statement: ${question.statement}`,
    ...order.map((point) => `${labels[point]} = ${LIKERT_POINTS[point]}`),
  ],
  words: {
    texts: () => [...LIKERT_POINTS],
    render: (question, order) =>
      `Statement: ${question.statement}\n` +
      inlineQuestion(
        question.instructions ?? "Does the state agree?",
        order.map((point) => LIKERT_POINTS[point]!),
      ),
  },

  bucket: () => "5",
  answer: (_question, probabilities) => ({
    type: "likert",
    agreement: expectation(probabilities) / (LIKERT_POINTS.length - 1),
    probabilities: Object.fromEntries(LIKERT_POINTS.map((point, i) => [point, probabilities[i]!])),
  }),
};
