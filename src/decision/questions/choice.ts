import type { Question as WireQuestion } from "../../protocol/schemas.js";
import { choiceLabels } from "../labels.js";
import { choiceConfidence } from "../math.js";
import { inlineQuestion, renderText } from "../prompt.js";
import type { ChoiceAnswer, ChoiceQuestion, TextValue } from "../types.js";
import { identityOrder, instructionsOf, type QuestionType, wireBase } from "./question-type.js";

/**
 * `choice`: pick one of the caller's options. Asked with its option ids inline and answered with
 * an id after the `Answer:` cue (word labels), or with one `A. id: description` line per option
 * and answered with a letter (fixed labels: `A`..`Z`, then zero-padded numbers). Its options are
 * shown sorted by id, in more orders when debiased; its answer is the most probable id.
 */
export const choice: QuestionType<
  ChoiceQuestion,
  ChoiceAnswer,
  Extract<WireQuestion, { type: "choice" }>
> = {
  name: "choice",

  fromWire: (wire) => ({
    type: "choice",
    ...instructionsOf(wire),
    options: Object.entries(wire.criteria).map(
      ([option, description]) => [option, description] as const,
    ),
  }),
  toWire: (question) => ({ ...wireBase(question), criteria: Object.fromEntries(question.options) }),

  labelCount: (question) => question.options.length,
  fixedLabels: (question) => choiceLabels(question.options.length),
  // Why choices are shown in id order: docs/decisions/072-canonical-order-and-type-temperatures.md
  // Sorted by id (UTF-16 code units): the order the caller lists the options in never reaches
  // the model. E.g. options sports, business → [1, 0].
  canonicalOrder(question) {
    const ids = question.options.map(([id]) => id);
    return identityOrder(ids.length).sort((a, b) =>
      ids[a]! < ids[b]! ? -1 : ids[a]! > ids[b]! ? 1 : 0,
    );
  },
  debiased: true,
  contrasted: false,

  lines: (question, labels, order) =>
    order.map((optionIndex, position) => {
      const [id, description] = question.options[optionIndex]!;
      return optionLine(labels[position]!, id, description);
    }),
  words: {
    texts: (question) => question.options.map(([id]) => id),
    render: renderInline,
  },

  bucket: (n) => (n <= 2 ? "2" : n <= 4 ? "3-4" : n <= 8 ? "5-8" : n <= 16 ? "9-16" : "17+"),
  answer(question, probabilities) {
    const record: Record<string, number> = {};
    question.options.forEach(([id], i) => {
      record[id] = probabilities[i]!;
    });
    // Ties go to the option first in id order, as shown, so they too ignore the caller's order.
    const top = choice
      .canonicalOrder(question)
      .reduce((best, i) => (probabilities[i]! > probabilities[best]! ? i : best));
    return {
      type: "choice",
      choice: question.options[top]![0],
      probabilities: record,
      confidence: choiceConfidence(probabilities),
    };
  },
};

/** One line per option: `A. id: description` (the description omitted when null or equal to the id). */
function optionLine(label: string, id: string, description: TextValue | null): string {
  const text = description === null ? "" : renderText(description);
  return text === "" || text === id ? `${label}. ${id}` : `${label}. ${id}: ${text}`;
}

/**
 * The most options a choice is asked with its ids inline when every option has a description
 * line: 64. Above it the ids are written once, on those lines: at 77 options that answered as
 * well in 29% fewer tokens, at 30 and 17 options worse
 * (docs/decisions/102-many-options-ids-written-once.md).
 */
export const INLINE_IDS_UP_TO = 64;

// Why inline ids, descriptions first: docs/decisions/056
/**
 * A choice answered with its own option ids (word labels): the options that have a description
 * first, one `id: description` line each, then the question with the ids inline, e.g.
 * `What is the topic? sports, business or technology?`. The reply is read as the id after an
 * `Answer:` cue. Inline ids counter the small models' position bias against the middle option;
 * descriptions stay on their own lines before the question. A choice of more than
 * {@link INLINE_IDS_UP_TO} options that all have their lines, and with instructions, ends with
 * the instructions alone: its ids are on its lines already.
 * @param order - option indices in the order they are shown.
 */
function renderInline(question: ChoiceQuestion, order: readonly number[]): string {
  const lines: string[] = [];
  for (const i of order) {
    const [id, description] = question.options[i]!;
    const text = description === null ? "" : renderText(description);
    if (text !== "" && text !== id) lines.push(`${id}: ${text}`);
  }
  const asked = question.instructions === undefined ? "" : renderText(question.instructions);
  const listed = lines.length === question.options.length;
  if (question.options.length > INLINE_IDS_UP_TO && listed && asked !== "") lines.push(asked);
  else
    lines.push(
      inlineQuestion(
        question.instructions,
        order.map((i) => question.options[i]![0]),
      ),
    );
  return lines.join("\n");
}
