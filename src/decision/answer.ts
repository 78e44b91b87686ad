import { temperatureFor, type CalibrationProfile } from "./calibration.js";
import { softmax } from "./math.js";
import type { Plan } from "./plan.js";
import { builtinType } from "./questions/index.js";
import type { Answer, AnswerShape, Question, QuestionShape } from "./types.js";

/** The answer of a question of type `Q`: a built-in {@link Answer} for a built-in question. */
export type AnswerOf<Q extends QuestionShape> = Q extends Question ? Answer : AnswerShape;

/**
 * The answers of a plan's questions from their readout: each question's log-scores divided by
 * the profile's temperature for its (type, option count), softmaxed over its labels, and
 * assembled into its typed answer by its type's module.
 * @param scores - per question of the plan, in plan order, the log-scores in option order
 *   (what `readout` returns)
 * @param calibration - the temperature profile; without one, T = 1
 * @returns answers keyed by question id, in request order
 * @example
 * ```ts
 * answer(plan, readout(plan, result), profile); // → { topic: { type: "choice", choice: "Sports", … } }
 * ```
 */
export function answer<Q extends QuestionShape = Question>(
  plan: Pick<Plan<Q>, "questions">,
  scores: readonly (readonly number[])[],
  calibration?: CalibrationProfile,
): Record<string, AnswerOf<Q>> {
  const answers: Record<string, AnswerOf<Q>> = {};
  plan.questions.forEach((q, i) => {
    const temperature = temperatureFor(calibration, q.kind, q.labelCount);
    // The module of a Q-typed question answers with Q's answer (QuestionType's A).
    answers[q.id] = q.kind.answer(q.question, softmax(scores[i]!, temperature)) as AnswerOf<Q>;
  });
  return answers;
}

/**
 * The typed answer of a built-in question from its probabilities, by its type's module.
 * @param probabilities - in option order (choice), level order (score) or `[true, false]` (noul),
 *   summing to 1
 * @returns choice: `choice` (argmax; on a tie the first in id order), `probabilities` by option
 *   id, `confidence`; noul: `noul`
 *   = P(true); score: `score` (expected level), `legend`, `probabilities` by level, `confidence`
 * @example
 * ```ts
 * assemble({ type: "noul" }, [0.8, 0.2]); // → { type: "noul", noul: 0.8 }
 * ```
 */
export function assemble(question: Question, probabilities: number[]): Answer {
  return builtinType(question.type).answer(question, probabilities);
}
