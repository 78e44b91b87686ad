import { z } from "zod";

/**
 * Response schemas of `POST /v1/decisions` (OpenAI's Decisions wire, as the official SDKs type
 * it: npm `resources/decisions.d.ts`, PyPI `openai/types/decision.py`), its error body, and the
 * OpenAI SDKs' entry of `GET /v1/models`. The request's are in ./decisions.ts.
 */

const probability = z.number().min(0).max(1);
const answerName = z.string().nullable();

/** A predicate's answer: the probability that the statement is true. */
export const PredicateAnswerSchema = z.object({
  type: z.literal("predicate"),
  name: answerName,
  probability,
});
/** A choice's answer: the most probable value, with its JSON type, and every value's probability. */
export const DecisionChoiceAnswerSchema = z.object({
  type: z.literal("choice"),
  name: answerName,
  choice: z.union([z.string(), z.boolean()]),
  confidence: probability,
  probabilities: z.array(z.object({ value: z.union([z.string(), z.boolean()]), probability })),
});
/** A score's answer: the expected level value and each level's probability. */
export const DecisionScoreAnswerSchema = z.object({
  type: z.literal("score"),
  name: answerName,
  score: z.number(),
  confidence: probability,
  probabilities: z.array(z.object({ label: z.string(), value: z.int().min(0), probability })),
});
/** A question this model cannot answer; the request's other questions are answered. */
export const RefusalAnswerSchema = z.object({ type: z.literal("refusal"), name: answerName });

/** The usage of a decision, in the SDKs' fields. */
export const DecisionUsageSchema = z.object({
  input_tokens: z.int().min(0).describe("Prompt tokens: the shared prefix once plus every branch"),
  input_tokens_details: z.object({
    cached_tokens: z.int().min(0).describe("Prefix tokens served from the engine's prefix cache"),
    cache_write_tokens: z
      .int()
      .min(0)
      .describe("Prefix tokens evaluated by this call and left in the prefix cache"),
  }),
  output_tokens: z.int().min(0).describe("Answer positions read"),
  output_tokens_details: z.object({
    reasoning_tokens: z.int().min(0).describe("Always 0: nothing is generated"),
  }),
  total_tokens: z.int().min(0),
});

/** The response body of `POST /v1/decisions`. */
export const DecisionSchema = z.object({
  model: z.string(),
  answers: z.array(
    z.discriminatedUnion("type", [
      PredicateAnswerSchema,
      DecisionChoiceAnswerSchema,
      DecisionScoreAnswerSchema,
      RefusalAnswerSchema,
    ]),
  ),
  usage: DecisionUsageSchema,
});

/** The answer to a {@link DecisionsRequest}. */
export type Decision = z.infer<typeof DecisionSchema>;
/** One answer of a {@link Decision}, in question order. */
export type DecisionAnswer = Decision["answers"][number];
/** The usage of a {@link Decision}. */
export type DecisionUsage = z.infer<typeof DecisionUsageSchema>;

/** One entry of `data` in `GET /v1/models` (the OpenAI SDKs' `Model`). */
export const OpenAiModelSchema = z.object({
  id: z.string(),
  object: z.literal("model"),
  created: z.int().describe("Unix seconds of the model's release date"),
  owned_by: z.string(),
});

/** One model in the OpenAI SDKs' list. */
export type OpenAiModel = z.infer<typeof OpenAiModelSchema>;

/** An error in OpenAI's shape, as every error of `POST /v1/decisions` is answered. */
export const OpenAiErrorSchema = z.object({
  error: z.object({
    message: z.string(),
    type: z.string(),
    param: z.string().nullable(),
    code: z.string().nullable(),
  }),
});

/** The body of an error of `POST /v1/decisions`. */
export type OpenAiErrorBody = z.infer<typeof OpenAiErrorSchema>;
