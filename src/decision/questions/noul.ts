import type { Question as WireQuestion } from "../../protocol/schemas.js";
import { NOUL_LABELS } from "../labels.js";
import { renderText } from "../prompt.js";
import type { NoulAnswer, NoulQuestion } from "../types.js";
import { identityOrder, instructionsOf, type QuestionType, wireBase } from "./question-type.js";

/**
 * `noul`: a yes/no-style question answered with P(true). Asked with a `Yes means: …` and a
 * `No means: …` line for the sides the caller describes, answered `Yes` or `No` at the start of
 * the reply (no word labels), read against the state alone when the question contrast is on.
 * Its answer is `noul` = P(true); probabilities are `[true, false]`.
 */
export const noul: QuestionType<
  NoulQuestion,
  NoulAnswer,
  Extract<WireQuestion, { type: "noul" }>
> = {
  name: "noul",

  fromWire(wire) {
    // A side given as null counts as undescribed.
    const criteria = wire.criteria
      ? {
          ...(wire.criteria.true != null ? { true: wire.criteria.true } : {}),
          ...(wire.criteria.false != null ? { false: wire.criteria.false } : {}),
        }
      : undefined;
    return { type: "noul", ...instructionsOf(wire), ...(criteria ? { criteria } : {}) };
  },
  toWire: (question) =>
    question.criteria ? { ...wireBase(question), criteria: question.criteria } : wireBase(question),

  labelCount: () => 2,
  fixedLabels: () => [...NOUL_LABELS],
  canonicalOrder: () => identityOrder(2),
  debiased: false,
  contrasted: true,

  lines(question, labels) {
    const [yes, no] = labels;
    const t = question.criteria?.true;
    const f = question.criteria?.false;
    const lines: string[] = [];
    if (t != null) lines.push(`${yes} means: ${renderText(t)}`);
    if (f != null) lines.push(`${no} means: ${renderText(f)}`);
    return lines;
  },

  bucket: () => "2",
  answer: (_question, probabilities) => ({ type: "noul", noul: probabilities[0]! }),
};
