import { LRUCache } from "lru-cache";
import { assemble } from "./answer.js";
import { expectation } from "./math.js";
import { renderText } from "./prompt.js";
import type {
  Answer,
  DecisionRequest,
  Json,
  Question,
  ScoreAnswer,
  ScoreQuestion,
} from "./types.js";

// Why, and what it was measured to do: docs/decisions/115-scales-read-in-their-own-direction.md
/**
 * A score answered with level numbers is read by position: the tuned model learnt scales that
 * rise with the quality asked about (sst5's very negative to very positive), and answers "How
 * angry is the customer?" over `very angry, frustrated, calm` with the number of the most angry
 * position whatever its text says. Each scale's direction is therefore asked of the model itself,
 * once: its first and last level texts, each as the state, placed on a neutral scale of the same
 * question ({@link neutralScale}: `lowest` … `highest`, no level text of the caller's shown, so
 * the model cannot answer by finding the state's own words in the list). A scale whose first
 * level is placed above its last by more than {@link ORIENTATION_MARGIN} of the scale's span is
 * falling: it is asked reversed, and its answer given back in the caller's order.
 */

/** The share of a scale's span (levels − 1) its first level must be placed above its last. */
export const ORIENTATION_MARGIN = 0.1;

/** Distinct score questions whose direction is kept. */
export const ORIENTATION_CACHE_ENTRIES = 4096;

/**
 * The most scales of one request asked which way they run (two short asks each, not charged):
 * every question a request may hold, so that a request is answered the same the first time and
 * every time after (a scale left unasked would be read as given once and reversed later).
 */
export const MAX_SCALES_ASKED = 16;

/**
 * The probabilities by level the model gives one score question about `state` (the question's
 * levels in its own order), uncalibrated; `undefined` when the question cannot be asked about it
 * (a level text longer than the context).
 */
export type ScaleProbe = (
  state: Json,
  question: ScoreQuestion,
) => Promise<readonly number[] | undefined>;

/**
 * Directions of score scales, kept in an LRU of {@link ORIENTATION_CACHE_ENTRIES} keyed by the
 * question (instructions and levels): a scale asked again costs nothing.
 * @example
 * ```ts
 * const scales = new ScaleOrientations();
 * const falling = await scales.falling(request, probe); // → Set { "anger" }
 * const asked = reverseScales(request, falling);
 * const answers = answersInCallerOrder(request, falling, (await decide(asked)).answers);
 * ```
 */
export class ScaleOrientations {
  /** By question: whether it is falling, once known or being asked (requests at once share it). */
  private readonly reversed = new LRUCache<string, Promise<boolean>>({
    max: ORIENTATION_CACHE_ENTRIES,
  });

  /**
   * The ids of the request's score questions whose scale the model reads as falling. A scale of
   * fewer than two levels, or whose first or last level has no text, is taken as given; so is one
   * past the first {@link MAX_SCALES_ASKED} not known yet, or whose asking failed (neither is
   * kept: a later request asks again).
   * @param probe - asks the model one score question about a state; its evaluations are not
   *   counted in the request's usage
   * @param signal - the request's: once it is aborted, its reason is thrown
   * @throws the signal's reason when aborted
   */
  async falling(
    request: DecisionRequest,
    probe: ScaleProbe,
    signal?: AbortSignal,
  ): Promise<ReadonlySet<string>> {
    const ids = new Set<string>();
    let asked = 0;
    for (const [id, question] of request.questions) {
      if (question.type !== "score") continue;
      const key = JSON.stringify([question.instructions ?? null, question.levels]);
      let known = this.reversed.get(key);
      if (!known) {
        if (asked++ >= MAX_SCALES_ASKED) continue;
        known = isFalling(question, probe);
        this.reversed.set(key, known);
        known.catch(() => this.reversed.delete(key));
      }
      try {
        if (await known) ids.add(id);
      } catch {
        // An engine that failed here may answer the request itself: taken as given.
        if (signal?.aborted) throw signal.reason;
      }
    }
    return ids;
  }
}

/**
 * Whether the scale falls: by its numbers where its levels are numbers ({@link levelNumbers}),
 * else whether the model places its first level text above its last by the margin.
 */
async function isFalling(question: ScoreQuestion, probe: ScaleProbe): Promise<boolean> {
  const { levels } = question;
  const first = levels[0];
  const last = levels.at(-1);
  if (levels.length < 2 || first == null || last == null) return false;
  const numbers = levelNumbers(question);
  if (numbers) return numbers[0]! > numbers.at(-1)!;
  // Without instructions the neutral scale would be "lowest … highest" of nothing: the caller's
  // levels are all the meaning there is.
  const shown = question.instructions == null ? question : neutralScale(question);
  const placedFirst = await probe(renderText(first), shown);
  const placedLast = placedFirst && (await probe(renderText(last), shown));
  if (!placedFirst || !placedLast) return false;
  return (
    expectation(placedFirst) - expectation(placedLast) > ORIENTATION_MARGIN * (levels.length - 1)
  );
}

/**
 * A scale's levels as numbers, when every described level is a string holding one number and
 * nothing else ("10", "9" … "1"; "-2.5", "−2.5"), the first and last described, strictly rising
 * or strictly falling: such a scale's direction is read from the numbers, not asked (the model
 * places "10" and "1" as states barely apart).
 * @returns the described levels' numbers in the scale's order; undefined otherwise
 */
export function levelNumbers(question: ScoreQuestion): number[] | undefined {
  const { levels } = question;
  if (levels[0] == null || levels.at(-1) == null) return undefined;
  const numbers: number[] = [];
  for (const level of levels) {
    if (level == null) continue;
    const text = typeof level === "string" ? level.replace(/\u2212/g, "-") : "";
    if (!/^\s*[-+]?(\d+(\.\d*)?|\.\d+)\s*$/.test(text)) return undefined;
    numbers.push(Number(text));
  }
  const steps = numbers.slice(1).map((n, i) => Math.sign(n - numbers[i]!));
  return steps.length > 0 && steps.every((s) => s === steps[0]) && steps[0] !== 0
    ? numbers
    : undefined;
}

// Why not the caller's own levels: docs/decisions/115-scales-read-in-their-own-direction.md
/**
 * The question the direction is asked on: the caller's instructions over as many levels, the
 * first named `lowest`, the last `highest`, the others undescribed, so that no level text of the
 * caller's is shown beside the state that is one of them.
 */
export function neutralScale(question: ScoreQuestion): ScoreQuestion {
  const n = question.levels.length;
  return {
    ...question,
    levels: question.levels.map((_, i) => (i === 0 ? "lowest" : i === n - 1 ? "highest" : null)),
  };
}

/** `request` with the scales of the questions named in `ids` reversed. */
export function reverseScales(request: DecisionRequest, ids: ReadonlySet<string>): DecisionRequest {
  if (ids.size === 0) return request;
  const questions = request.questions.map(([id, question]): readonly [string, Question] =>
    ids.has(id) && question.type === "score"
      ? [id, { ...question, levels: [...question.levels].reverse() }]
      : [id, question],
  );
  return { ...request, questions };
}

/**
 * The answers of a request asked with the scales of `ids` reversed ({@link reverseScales}),
 * given back on the caller's scales: probabilities by the caller's level, the legend of the
 * caller's levels, the expected level counted from the caller's first.
 */
export function answersInCallerOrder(
  request: DecisionRequest,
  ids: ReadonlySet<string>,
  answers: Readonly<Record<string, Answer>>,
): Record<string, Answer> {
  const out: Record<string, Answer> = { ...answers };
  for (const [id, question] of request.questions) {
    const asked = answers[id];
    if (!ids.has(id) || question.type !== "score" || asked?.type !== "score") continue;
    out[id] = inCallerOrder(question, asked);
  }
  return out;
}

function inCallerOrder(question: ScoreQuestion, asked: ScoreAnswer): Answer {
  const n = question.levels.length;
  return assemble(
    question,
    question.levels.map((_, i) => asked.probabilities[String(n - 1 - i)]!),
  );
}
