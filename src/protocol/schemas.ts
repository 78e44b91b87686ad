import { z } from "zod";
import {
  countBoundError,
  MAX_CHOICE_OPTIONS,
  MAX_QUESTIONS,
  MAX_SCORE_LEVELS,
  MIN_CHOICE_OPTIONS,
  MIN_SCORE_LEVELS,
} from "./limits.js";

/**
 * Request and response schemas of `POST /v1/systemone`, in the shapes of the System One API.
 * The same schemas validate requests (as JSON Schema, ./json-schema.ts) and generate
 * `GET /openapi.json`; zod words the 422 details.
 *
 * Limits (./limits.ts): 1–16 questions; choice 2–255 options; score 2–10 levels; instructions and
 * descriptions are text: a non-empty string, or an object or array (structured text); one image
 * or one video.
 */

/**
 * What a refinement checks, as JSON Schema keywords, for the validator's JSON Schema: zod cannot
 * express a `superRefine` there. `replace` stands for the whole schema instead of adding to it.
 * Not used by the OpenAPI document, which states these limits in words.
 */
export type JsonSchemaExtra = Record<string, unknown> & { replace?: Record<string, unknown> };

/** The {@link JsonSchemaExtra} of each schema that has one (read by ./json-schema.ts). */
export const jsonSchemaExtras = z.registry<JsonSchemaExtra>();

/** `schema`, with `extra` recorded for the validator's JSON Schema. */
function withExtra<T extends z.ZodType>(schema: T, extra: JsonSchemaExtra): T {
  jsonSchemaExtras.add(schema, extra);
  return schema;
}

/**
 * Any JSON value. In the validator's JSON Schema it is left unchecked (`{}`): the body came from
 * `JSON.parse`, and src/api/json-shape.ts has checked its depth and numbers.
 */
export const JsonValue = withExtra(z.json(), { replace: {} });

/**
 * Text in the validator's JSON Schema: each of `minLength`, `minItems` and `minProperties`
 * applies to its own type only, so one type check does what zod's union does.
 */
const TEXT = { type: ["string", "array", "object"], minLength: 1, minItems: 1, minProperties: 1 };

/** Text: a non-empty string, or a non-empty object or array rendered as structured text. */
export const TextValue = withExtra(
  z.union(
    [
      z.string().min(1, "Text should not be empty"),
      z.array(z.json()).min(1, "Text should not be an empty array"),
      z
        .record(z.string(), z.json())
        .refine((o) => Object.keys(o).length > 0, "Text should not be an empty object"),
    ],
    { error: "Input should be a string, an object or an array" },
  ),
  { replace: TEXT },
);

/** Text or `null` (an undescribed option or level; absent instructions). */
const NullableText = withExtra(TextValue.nullable(), {
  replace: { ...TEXT, type: ["null", ...TEXT.type] },
});

const ChoiceQuestionSchema = z.object({
  type: z.literal("choice"),
  instructions: NullableText.optional(),
  criteria: withExtra(
    z
      .record(z.string().min(1, "Option ids should not be empty"), NullableText, {
        error: (issue) =>
          issue.input === undefined
            ? "Field required"
            : "Input should be an object of option id → description",
      })
      .superRefine((criteria, ctx) => {
        const n = Object.keys(criteria).length;
        if (n < MIN_CHOICE_OPTIONS || n > MAX_CHOICE_OPTIONS)
          ctx.addIssue({
            code: n < MIN_CHOICE_OPTIONS ? "too_small" : "too_big",
            origin: "object",
            minimum: MIN_CHOICE_OPTIONS,
            maximum: MAX_CHOICE_OPTIONS,
            input: criteria,
            message: `A choice needs ${MIN_CHOICE_OPTIONS} to ${MAX_CHOICE_OPTIONS} options, got ${n}`,
          } as never);
      }),
    { minProperties: MIN_CHOICE_OPTIONS, maxProperties: MAX_CHOICE_OPTIONS },
  ),
});

/** A property that is present and not `null`, in JSON Schema. */
const present = (name: string) => ({
  type: "object",
  required: [name],
  properties: { [name]: { not: { type: "null" } } },
});

const NoulQuestionSchema = withExtra(
  z
    .object({
      type: z.literal("noul"),
      instructions: NullableText.optional(),
      criteria: z
        .strictObject(
          { true: NullableText.optional(), false: NullableText.optional() },
          { error: "Input should be an object with 'true' and/or 'false'" },
        )
        .nullable()
        .optional(),
    })
    .superRefine((q, ctx) => {
      if (q.instructions == null && q.criteria?.true == null && q.criteria?.false == null)
        ctx.addIssue({
          code: "custom",
          path: ["instructions"],
          message:
            "A noul question needs instructions, or criteria that describe 'true' or 'false'",
        });
    }),
  {
    anyOf: [
      present("instructions"),
      { type: "object", required: ["criteria"], properties: { criteria: present("true") } },
      { type: "object", required: ["criteria"], properties: { criteria: present("false") } },
    ],
  },
);

/** The level bound's message with the count sent: `A score needs 2 to 10 levels, got 11`. */
const levelCount = countBoundError(
  `A score needs ${MIN_SCORE_LEVELS} to ${MAX_SCORE_LEVELS} levels`,
);

const ScoreQuestionSchema = z.object({
  type: z.literal("score"),
  instructions: NullableText.optional(),
  criteria: z
    .array(NullableText, {
      error: (issue) =>
        issue.input === undefined
          ? "Field required"
          : "Input should be a list of level descriptions (index = value)",
    })
    .min(MIN_SCORE_LEVELS, { error: levelCount })
    .max(MAX_SCORE_LEVELS, { error: levelCount }),
});

/** One question, discriminated by `type`. */
export const QuestionSchema = withExtra(
  z.discriminatedUnion("type", [ChoiceQuestionSchema, NoulQuestionSchema, ScoreQuestionSchema], {
    error: "Input should have a 'type' of 'choice', 'noul' or 'score'",
  }),
  // Ajv reads `type` first and checks the one matching branch.
  {
    type: "object",
    required: ["type"],
    properties: { type: { type: "string" } },
    discriminator: { propertyName: "type" },
  },
);

/**
 * One base64 data URL. (JSON Schema patterns have no flags: the validator's pattern spells out
 * the case-insensitive match.)
 */
const DataUrl = withExtra(
  z.string().regex(/^data:[a-z0-9.+-]+\/[a-z0-9.+-]+;base64,/i, {
    error: (issue) =>
      typeof issue.input === "string" && /^(https?|file|ftp):/i.test(issue.input)
        ? "decisiond fetches nothing: send the image or video inline as a base64 data URL (data:image/png;base64,...), not a URL"
        : "Input should be a base64 data URL (data:<mime>;base64,...)",
  }),
  { pattern: "^[Dd][Aa][Tt][Aa]:[A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+;[Bb][Aa][Ss][Ee]64," },
);

/** The request body of `POST /v1/systemone`. Unknown top-level fields are ignored. */
export const SystemOneRequestSchema = z.object({
  model: z
    .string({
      error: (i) => (i.input === undefined ? "Field required" : "Input should be a string"),
    })
    .min(1, "Model names should not be empty"),
  state: JsonValue,
  questions: withExtra(
    z
      .record(z.string().min(1, "Question ids should not be empty"), QuestionSchema, {
        error: (i) =>
          i.input === undefined
            ? "Field required"
            : "Input should be an object of question id → question",
      })
      .superRefine((questions, ctx) => {
        const n = Object.keys(questions).length;
        if (n < 1 || n > MAX_QUESTIONS)
          ctx.addIssue({
            code: "custom",
            message: `A request needs 1 to ${MAX_QUESTIONS} questions, got ${n}`,
          });
      }),
    { minProperties: 1, maxProperties: MAX_QUESTIONS },
  ),
  images: z.array(DataUrl).length(1, "Send exactly one image").optional(),
  videos: z.array(DataUrl).length(1, "Send exactly one video").optional(),
});

/** The body of `POST /v1/systemone`: model, state, 1–16 questions, optionally one image or video. */
export type SystemOneRequest = z.infer<typeof SystemOneRequestSchema>;
/** One question of a request (`choice`, `noul` or `score`). */
export type Question = SystemOneRequest["questions"][string];

const Probabilities = z.record(z.string(), z.number().min(0).max(1));

/** A noul answer: P(true). */
export const NoulAnswerSchema = z.object({
  type: z.literal("noul"),
  noul: z.number().min(0).max(1),
});
/** A choice answer. */
export const ChoiceAnswerSchema = z.object({
  type: z.literal("choice"),
  choice: z.string(),
  probabilities: Probabilities,
  confidence: z.number().min(0).max(1),
});
/** A score answer. */
export const ScoreAnswerSchema = z.object({
  type: z.literal("score"),
  score: z.number(),
  /** Level descriptions as the request gave them ("" for an undescribed, null, level). */
  legend: z.record(
    z.string(),
    z.union([z.string(), z.record(z.string(), z.json()), z.array(z.json())]),
  ),
  probabilities: Probabilities,
  confidence: z.number().min(0).max(1),
});

/** The response body of `POST /v1/systemone`. */
export const SystemOneResponseSchema = z.object({
  model: z.string(),
  answers: z.record(
    z.string(),
    z.discriminatedUnion("type", [NoulAnswerSchema, ChoiceAnswerSchema, ScoreAnswerSchema]),
  ),
  usage: z.object({
    input_tokens: z
      .int()
      .min(0)
      .describe("Prompt tokens: the shared prefix once plus every branch"),
    output_tokens: z.int().min(0).describe("Answer positions read"),
  }),
});

/** The answer to a {@link SystemOneRequest}: `{model, answers, usage}`. */
export type SystemOneResponse = z.infer<typeof SystemOneResponseSchema>;
/** One answer of a response, discriminated by `type`. */
export type Answer = SystemOneResponse["answers"][string];

/** One entry of `GET /v1/models`. */
export const ModelEntrySchema = z.object({
  name: z.string(),
  description: z.string(),
  release_date: z.string(),
});

/** One model served (`GET /v1/models`). */
export type ModelEntry = z.infer<typeof ModelEntrySchema>;

/** A validation failure (FastAPI shape): 422 `{"detail": [{loc, msg, type}]}`. */
export const ValidationErrorSchema = z.object({
  detail: z.array(
    z.object({
      loc: z.array(z.union([z.string(), z.number()])),
      msg: z.string(),
      type: z.string(),
    }),
  ),
});

/** Any other error: `{"detail": {"error_type", "message"}}`. */
export const ErrorSchema = z.object({
  detail: z.object({
    error_type: z.string(),
    message: z.string(),
    request_id: z.string().optional(),
  }),
});
