import type { Question as WireQuestion } from "../../protocol/schemas.js";
import type { Answer, Question, QuestionShape } from "../types.js";
import { choice } from "./choice.js";
import { noul } from "./noul.js";
import type { AnyQuestionType, QuestionType } from "./question-type.js";
import { score } from "./score.js";

export type { AnyQuestionType, QuestionType, WordSettings } from "./question-type.js";

/**
 * The question types decisiond serves, by name: one module each (questions/choice.ts, noul.ts,
 * score.ts). A new type is one new module and one line here (its wire schema aside, in
 * protocol/); a caller may also plan with a registry of its own (`{ ...QUESTION_TYPES, rank }`,
 * plan.ts `Planner.types`).
 */
export const QUESTION_TYPES = { choice, noul, score } as const;

/** A registry of question types: name → module. */
export type QuestionTypes = Readonly<Record<string, AnyQuestionType>>;

/** A built-in question type, typed on any built-in question, answer and wire question. */
export type BuiltinQuestionType = QuestionType<Question, Answer, WireQuestion>;

/**
 * The module of a built-in question type.
 * @example
 * ```ts
 * builtinType("score").bucket(5); // → "4-5"
 * ```
 */
export function builtinType(name: Question["type"]): BuiltinQuestionType {
  return QUESTION_TYPES[name];
}

/**
 * The module of a question's type: the one dispatch on `question.type`.
 * @param types - the registry (default {@link QUESTION_TYPES})
 * @throws `Error` when the registry has no such type
 * @example
 * ```ts
 * questionTypeOf({ type: "noul" }).fixedLabels({ type: "noul" }); // → ["Yes", "No"]
 * ```
 */
export function questionTypeOf(
  question: QuestionShape,
  types: QuestionTypes = QUESTION_TYPES,
): AnyQuestionType {
  const kind = Object.hasOwn(types, question.type) ? types[question.type] : undefined;
  if (!kind) throw new Error(`unknown question type ${JSON.stringify(question.type)}`);
  return kind;
}

/** A validated wire question as the domain question, by its type's module. */
export function questionFromWire(wire: WireQuestion): Question {
  return builtinType(wire.type).fromWire(wire);
}

/** A domain question as its wire question, by its type's module. */
export function questionToWire(question: Question): Record<string, unknown> {
  return builtinType(question.type).toWire(question);
}
