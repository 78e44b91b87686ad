import { PUBLIC_MODEL_NAME } from "../protocol/models.js";
import type { SystemOneRequest } from "../protocol/schemas.js";
import type { EvalItem, Expected, Split } from "./format.js";

/** What every dataset converter shares: its options, its shape and the item it writes. */

/** The model name written into request bodies (the runner evaluates whatever `--model` says). */
export const REQUEST_MODEL = PUBLIC_MODEL_NAME;

/** Options of a conversion. */
export interface ConvertOptions {
  /** The folder holding one sub-folder per dataset (`../shared/datasets`). */
  readonly datasetsDir: string;
  /** Which part to write. Default `all`. */
  readonly split?: Split | "all";
  /** At most this many items (after the split and the pseudo-random order). */
  readonly limit?: number;
  /** banking77 only: offer K options (the gold one and K−1 others drawn per item) instead of 77. */
  readonly options?: number;
  /** Seed of the distractor draw for `options`. Default 0. */
  readonly seed?: number;
  /** `model` of the request bodies. Default {@link REQUEST_MODEL}. */
  readonly model?: string;
}

/** One converter: what it reads and the items it makes. */
export interface DatasetConverter {
  readonly name: string;
  readonly description: string;
  convert(options: ConvertOptions): EvalItem[];
}

/** The questions of one request body. */
export type Questions = SystemOneRequest["questions"];

/** One evaluation item: a `/v1/systemone` body with a string or object state, and its answers. */
export function item(
  id: string,
  model: string,
  state: SystemOneRequest["state"],
  questions: Questions,
  expected: Record<string, Expected>,
): EvalItem {
  return { id, request: { model, state, questions }, expected };
}

/** The state of a claim checked against a text (RTE, CB, AX-b, AX-g, WNLI). */
export function claimState(text: string, claim: string): string {
  return `Text: ${text}\n\nClaim: ${claim}`;
}

/** Longest answer text used as its own option id; longer answers are lettered. */
export const MAX_ANSWER_ID_CHARS = 48;

/**
 * The options of a multiple-choice question over answer texts: each answer is its own option id
 * when every answer is non-empty, distinct and at most {@link MAX_ANSWER_ID_CHARS} characters (as
 * a caller lists short answers); otherwise the options are `A`, `B`, … with the answers as their
 * descriptions (as a caller letters long ones).
 * @param answers - the answer texts in the dataset's order
 * @returns the criteria map and the option id of each answer, in the same order
 * @example
 * ```ts
 * answerOptions(["cat", "dog"]); // → { criteria: { cat: null, dog: null }, ids: ["cat", "dog"] }
 * ```
 */
export function answerOptions(answers: readonly string[]): {
  criteria: Record<string, string | null>;
  ids: string[];
} {
  const texts = answers.map((a) => a.trim().replace(/\s+/g, " "));
  const asIds =
    texts.every((t) => t !== "" && t.length <= MAX_ANSWER_ID_CHARS) &&
    new Set(texts).size === texts.length;
  const ids = asIds ? texts : texts.map((_, i) => String.fromCharCode(65 + i));
  const criteria: Record<string, string | null> = {};
  ids.forEach((id, i) => (criteria[id] = asIds ? null : texts[i]!));
  return { criteria, ids };
}

/** A choice question over answer texts (see {@link answerOptions}) and the gold option's id. */
export function answerChoice(
  instructions: string,
  answers: readonly string[],
  gold: number,
): { question: Questions[string]; gold: string } {
  const { criteria, ids } = answerOptions(answers);
  const id = ids[gold];
  if (id === undefined) throw new Error(`gold answer ${gold} is not among ${answers.length}`);
  return { question: { type: "choice", instructions, criteria }, gold: id };
}
