import type { Answer, SystemOneRequest, SystemOneResponse } from "../protocol/schemas.js";

// Why answers are typed from the question map: docs/decisions/089
/** A choice answer, as the wire gives it. */
type ChoiceAnswer = Extract<Answer, { type: "choice" }>;
/** A noul answer: `noul` = P(true). */
export type NoulAnswer = Extract<Answer, { type: "noul" }>;
/** A score answer: `score` = Σ i·pᵢ, with its `legend`, `probabilities` and `confidence`. */
export type ScoreAnswer = Extract<Answer, { type: "score" }>;

/** `T` with every property, at every depth, `readonly`: a request written `as const` is one. */
export type DeepReadonly<T> = T extends (infer E)[]
  ? readonly DeepReadonly<E>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

/** What {@link DecisiondClient.decide} takes: a `DecideRequest`, also one written `as const`. */
export type DecideInput = DeepReadonly<SystemOneRequest>;

/** A choice answer whose `choice` is one of the option ids `Id` (the keys of its `criteria`). */
export interface ChoiceAnswerOf<Id extends string> extends Omit<
  ChoiceAnswer,
  "choice" | "probabilities"
> {
  /** The most probable option id. */
  choice: Id;
  /** Option id → probability, over every option of the question. */
  probabilities: Record<Id, number>;
}

/**
 * The answer to question `Q`, typed by it: a choice's `choice` is the union of its option ids, a
 * noul answer has `noul`, a score answer its fields; `Answer` when `Q`'s type is not known.
 * @example
 * ```ts
 * type A = AnswerOf<{ type: "choice"; criteria: { billing: null; technical: null } }>;
 * // A["choice"] is "billing" | "technical"
 * ```
 */
export type AnswerOf<Q> = Q extends { readonly type: "choice"; readonly criteria: infer C }
  ? ChoiceAnswerOf<keyof C & string>
  : Q extends { readonly type: "noul" }
    ? NoulAnswer
    : Q extends { readonly type: "score" }
      ? ScoreAnswer
      : Answer;

/**
 * The response to request `R`, its answers typed by its question map (see {@link AnswerOf}):
 * one answer per question id. A request whose question ids are not known to the compiler (a
 * `DecideRequest` variable) gets the untyped `DecideResponse`.
 */
export type DecideResponseOf<R> = R extends { readonly questions: infer Q }
  ? string extends keyof Q
    ? SystemOneResponse
    : Omit<SystemOneResponse, "answers"> & {
        /** Question id → its answer. */
        answers: { -readonly [Id in keyof Q]: AnswerOf<Q[Id]> };
      }
  : SystemOneResponse;
