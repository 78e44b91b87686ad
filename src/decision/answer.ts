import { temperatureFor, type CalibrationProfile } from "./calibration.js";
import { canonicalOrder } from "./label-style.js";
import { choiceConfidence, expectation, scoreConfidence, softmax } from "./math.js";
import type { Plan } from "./plan.js";
import type { Answer, Question, TextValue } from "./types.js";

/**
 * The answers of a plan's questions from their readout: each question's log-scores divided by
 * the profile's temperature for its (type, option count), softmaxed over its labels, and
 * assembled into its typed answer.
 * @param scores - per question of the plan, in plan order, the log-scores in option order
 *   (what `readout` returns)
 * @param calibration - the temperature profile; without one, T = 1
 * @returns answers keyed by question id, in request order
 * @example
 * ```ts
 * answer(plan, readout(plan, result), profile); // → { topic: { type: "choice", choice: "Sports", … } }
 * ```
 */
export function answer(
  plan: Pick<Plan, "questions">,
  scores: readonly (readonly number[])[],
  calibration?: CalibrationProfile,
): Record<string, Answer> {
  const answers: Record<string, Answer> = {};
  plan.questions.forEach((q, i) => {
    const temperature = temperatureFor(calibration, q.question.type, q.labelCount);
    answers[q.id] = assemble(q.question, softmax(scores[i]!, temperature));
  });
  return answers;
}

/**
 * The typed answer of a question from its probabilities.
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
  switch (question.type) {
    case "choice": {
      const record: Record<string, number> = {};
      question.options.forEach(([id], i) => {
        record[id] = probabilities[i]!;
      });
      // Ties go to the option first in id order, as shown, so they too ignore the caller's order.
      const top = canonicalOrder(question).reduce((best, i) =>
        probabilities[i]! > probabilities[best]! ? i : best,
      );
      return {
        type: "choice",
        choice: question.options[top]![0],
        probabilities: record,
        confidence: choiceConfidence(probabilities),
      };
    }
    case "noul":
      return { type: "noul", noul: probabilities[0]! };
    case "score": {
      const record: Record<string, number> = {};
      // The level as the request gave it (structured text stays structured, as the official
      // clients type it); an undescribed (null) level as "", since the clients want no null here.
      const legend: Record<string, TextValue> = {};
      question.levels.forEach((level, i) => {
        record[String(i)] = probabilities[i]!;
        legend[String(i)] = level ?? "";
      });
      return {
        type: "score",
        score: expectation(probabilities),
        legend,
        probabilities: record,
        confidence: scoreConfidence(probabilities),
      };
    }
  }
}
