import type { PrefixImage } from "../engine/types.js";

/**
 * The decision layer's own view of a request and its answers. It is filled by the API layer from
 * validated JSON and knows nothing of HTTP.
 */

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * Text a caller may give for instructions and descriptions: a string, or structured JSON (an
 * object or array) that is rendered into the prompt as compact JSON.
 */
export type TextValue = string | Json[] | { [key: string]: Json };

/** Pick one of the caller's options. `options` keeps the caller's order. */
export interface ChoiceQuestion {
  readonly type: "choice";
  readonly instructions?: TextValue;
  /** Option id → description; a `null` description reuses the id. */
  readonly options: readonly (readonly [id: string, description: TextValue | null])[];
}

/** A yes/no-style question answered with P(true). */
export interface NoulQuestion {
  readonly type: "noul";
  readonly instructions?: TextValue;
  /** What "true" and "false" mean; either side may be absent. */
  readonly criteria?: { readonly true?: TextValue | null; readonly false?: TextValue | null };
}

/** Place the state on an ordered scale; `levels[i]` describes value i (`null`: undescribed). */
export interface ScoreQuestion {
  readonly type: "score";
  readonly instructions?: TextValue;
  readonly levels: readonly (TextValue | null)[];
}

export type Question = ChoiceQuestion | NoulQuestion | ScoreQuestion;
/** The name of a built-in question type: `choice`, `noul` or `score`. */
export type QuestionTypeName = Question["type"];

/**
 * What every question has, whatever its type: the name of its type (the key of its module in a
 * question-type registry, see questions/index.ts) and optional instructions. The planner and the
 * readout take any question of this shape; its module knows the rest.
 */
export interface QuestionShape {
  readonly type: string;
  readonly instructions?: TextValue;
}

/** What every answer has: the name of its question's type. */
export interface AnswerShape {
  readonly type: string;
}

/** One image of a request's media: the picture, or a video frame and its time. */
export interface MediaFrame {
  readonly image: PrefixImage;
  /** Video frames only: seconds from the start of the video. */
  readonly seconds?: number;
}

/** A request's image, or the frames sampled from its video; shown before the state. */
export interface DecisionMedia {
  readonly kind: "image" | "video";
  readonly frames: readonly MediaFrame[];
  /** Video only: its length in seconds. */
  readonly durationSeconds?: number;
}

/**
 * A validated request: the state and the questions in the caller's order. `Q` is the built-in
 * {@link Question} unless a caller plans with a registry of its own (questions/index.ts).
 */
export interface DecisionRequest<Q extends QuestionShape = Question> {
  readonly state: Json;
  readonly questions: readonly (readonly [id: string, question: Q])[];
  /** One image or one video's frames, placed in the prefix (needs a vision engine). */
  readonly media?: DecisionMedia;
  /**
   * A question whose branch cannot fit the context beside the prefix: `"fail"` (default) refuses
   * the request ({@link StateTooLongError} from the planner); `"refuse"` leaves the question out,
   * names it in {@link DecisionResult.refused} and answers the others (the Decisions wire).
   */
  readonly unfit?: "fail" | "refuse";
}

export interface ChoiceAnswer {
  readonly type: "choice";
  /** The most probable option id. */
  readonly choice: string;
  /** Option id → probability, over every option; sums to 1. */
  readonly probabilities: Record<string, number>;
  /** (m − 1/n)/(1 − 1/n), m the top probability, n the option count. */
  readonly confidence: number;
}

export interface NoulAnswer {
  readonly type: "noul";
  /** P(true). */
  readonly noul: number;
}

export interface ScoreAnswer {
  readonly type: "score";
  /** Expected level Σ i·pᵢ. */
  readonly score: number;
  /** "0".."n−1" → the caller's level descriptions. */
  readonly legend: Record<string, TextValue>;
  /** "0".."n−1" → probability; sums to 1. */
  readonly probabilities: Record<string, number>;
  /** max(0, 1 − Σ pᵢ|i − k| / D), k the mode, D the same sum for the uniform distribution. */
  readonly confidence: number;
}

export type Answer = ChoiceAnswer | NoulAnswer | ScoreAnswer;

/** Token counts of one decision. */
export interface Usage {
  /**
   * Prompt tokens of the request: the shared prefix once (image and frame positions included)
   * plus every branch (cached or not).
   */
  readonly input_tokens: number;
  /** Answer positions read: one per question and option order, plus one per chained label step. */
  readonly output_tokens: number;
}

/** The decision for one request. */
export interface DecisionResult {
  /** Answers keyed by question id, in request order. */
  readonly answers: Record<string, Answer>;
  readonly usage: Usage;
  /** Engine diagnostics, not part of the public answer. */
  readonly stats: {
    readonly evaluatedTokens: number;
    readonly cachedPrefixTokens: number;
    /** Tokens of the shared prefix, when the decision layer planned it. */
    readonly prefixTokens?: number;
    /**
     * When the option lines were planned in windows (decision 113): how many were planned, how
     * many the engine read them in (0: it read the list whole), and `off` when the engine stopped
     * reading windows in this call (a state it could not merge): for how long, ms.
     */
    readonly listWindows?: {
      readonly planned: number;
      readonly read: number;
      readonly off?: number;
    };
  };
  /** Ids of the questions left unanswered (see {@link DecisionRequest.unfit}); absent when none. */
  readonly refused?: readonly string[];
}
