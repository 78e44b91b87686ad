import { z } from "zod";
import {
  countBoundError,
  MAX_CHOICE_OPTIONS,
  MAX_SCORE_LEVELS,
  MIN_CHOICE_OPTIONS,
  MIN_SCORE_LEVELS,
} from "./limits.js";

/**
 * The request schema of `POST /v1/decisions`, OpenAI's Decisions wire, as the official SDKs type
 * it (`openai` 7.55 on npm: `resources/decisions.d.ts`; 3.51 on PyPI:
 * `openai/types/decision_create_params.py`); the response's are in ./decisions-response.ts. The
 * same schemas validate requests and generate the OpenAPI document. Unknown fields are ignored
 * (a newer SDK may send more).
 *
 * Limits: 1–400 questions (the SDKs' types; the tokens one request may put through the model
 * bound them further), choices 2–255, levels 2–10 (as System One's, ./limits.ts), one image per
 * request wherever it stands, images as base64 data URLs only (this service fetches nothing).
 * Why this wire is a translation onto System One's: docs/decisions/085-decisions-wire.md
 */

/** Most questions in one `POST /v1/decisions` request (the SDKs' types); the least is 1. */
export const MAX_DECISION_QUESTIONS = 400;

/** Longest `safety_identifier`, in characters (the Responses API's limit, which the SDKs cite). */
export const MAX_SAFETY_IDENTIFIER_LENGTH = 64;

/** A base64 data URL, the only image source accepted. */
export const IMAGE_DATA_URL = /^data:[a-z0-9.+-]+\/[a-z0-9.+-]+;base64,/i;

/** A URL (http(s), file, ftp), which the upstream API fetches (http(s)) and this service does not. */
const REMOTE_URL = /^(https?|file|ftp):/i;

/** `"Field required"` for a missing value, else `message`. */
const required = (message: string) => (issue: { input?: unknown }) =>
  issue.input === undefined ? "Field required" : message;

const PromptCacheBreakpoint = z
  .object({ mode: z.literal("explicit") })
  .nullable()
  .optional();

/** A text part. */
const InputTextPart = z.object({
  type: z.literal("input_text"),
  text: z.string({ error: required("Input should be a string") }),
  prompt_cache_breakpoint: PromptCacheBreakpoint,
});

/** An image's URL: a base64 data URL; an http(s) URL is refused in words of its own. */
const ImageUrl = z
  .string({ error: required("Input should be a string") })
  .superRefine((url, ctx) => {
    if (REMOTE_URL.test(url))
      ctx.addIssue({
        code: "custom",
        message:
          "decisiond fetches nothing: send the image inline as a base64 data URL (data:image/png;base64,...), not a URL",
        params: { code: "image_url_not_supported" },
      });
    else if (!IMAGE_DATA_URL.test(url))
      ctx.addIssue({
        code: "custom",
        message: "Input should be a base64 data URL (data:<mime>;base64,...)",
        params: { code: "invalid_image_url" },
      });
  });

const ImageDetail = z.enum(["low", "high", "auto", "original"]).nullable().optional();

/** An image part of the input. */
const InputImagePart = z.object({
  type: z.literal("input_image"),
  image_url: ImageUrl,
  detail: ImageDetail,
  prompt_cache_breakpoint: PromptCacheBreakpoint,
});

/** A JSON object, as a JSON part's `data` holds (or an array of them). */
const JsonObject = z.record(z.string(), z.json(), {
  error: "Input should be a JSON object",
});

/** A JSON part: an object or an array of objects, rendered as compact JSON. */
const InputJsonPart = z.object({
  type: z.literal("input_json"),
  data: z.union([JsonObject, z.array(JsonObject)], {
    error: required("Input should be a JSON object or an array of objects"),
  }),
});

const partError = (types: string) =>
  `Input should be a content part with a 'type' of ${types}` as const;

/** A part of a user message: text, an image or JSON. */
const UserPart = z.discriminatedUnion("type", [InputTextPart, InputImagePart, InputJsonPart], {
  error: partError("'input_text', 'input_image' or 'input_json'"),
});

/** `string | part[]`: a message's content. */
const contentOf = <T extends z.ZodType>(part: T) =>
  z.union([z.string(), z.array(part)], {
    error: required("Input should be a string or an array of content parts"),
  });

const messageType = z.literal("message").optional();

const UserMessage = z.object({
  role: z.literal("user"),
  type: messageType,
  content: contentOf(UserPart),
});
const DeveloperMessage = z.object({
  role: z.literal("developer"),
  type: messageType,
  content: contentOf(InputTextPart),
});
const SystemMessage = z.object({
  role: z.literal("system"),
  type: messageType,
  content: contentOf(InputTextPart),
});
const AssistantPart = z.discriminatedUnion(
  "type",
  [
    z.object({ type: z.literal("output_text"), text: z.string() }),
    z.object({ type: z.literal("refusal"), refusal: z.string() }),
  ],
  { error: partError("'output_text' or 'refusal'") },
);
const AssistantMessage = z.object({
  role: z.literal("assistant"),
  type: messageType,
  content: contentOf(AssistantPart),
  phase: z.enum(["commentary", "final_answer"]).nullable().optional(),
});

/** A message, by role. */
const Message = z.discriminatedUnion(
  "role",
  [UserMessage, DeveloperMessage, SystemMessage, AssistantMessage],
  { error: "Input should have a 'role' of 'user', 'developer', 'system' or 'assistant'" },
);

const ItemStatus = z.enum(["in_progress", "completed", "incomplete"]).nullable().optional();
const itemId = z.string().nullable().optional();
const callId = z
  .string({ error: required("Input should be a string") })
  .min(1, "Call ids should not be empty");

/** A tool output: text, or text and image parts. */
const ToolOutput = z.union(
  [
    z.string(),
    z.array(
      z.discriminatedUnion("type", [InputTextPart, InputImagePart], {
        error: partError("'input_text' or 'input_image'"),
      }),
    ),
  ],
  { error: "Input should be a string or a list of 'input_text' and 'input_image' parts" },
);

const FunctionCall = z.object({
  type: z.literal("function_call"),
  call_id: callId,
  name: z.string(),
  arguments: z.string(),
  id: itemId,
  namespace: z.string().nullable().optional(),
  status: ItemStatus,
});
const FunctionCallOutput = z.object({
  type: z.literal("function_call_output"),
  call_id: callId,
  output: ToolOutput,
  id: itemId,
  status: ItemStatus,
});
const CustomToolCall = z.object({
  type: z.literal("custom_tool_call"),
  call_id: callId,
  name: z.string(),
  input: z.string(),
  id: itemId,
  namespace: z.string().nullable().optional(),
  status: ItemStatus,
});
const CustomToolCallOutput = z.object({
  type: z.literal("custom_tool_call_output"),
  call_id: callId,
  output: ToolOutput,
  id: itemId,
  status: ItemStatus,
});

/** One item of an input array: a message (`type` "message" or absent), a tool call or output. */
export const DecisionInputItemSchema = z.discriminatedUnion(
  "type",
  [Message, FunctionCall, FunctionCallOutput, CustomToolCall, CustomToolCallOutput],
  {
    error:
      "Input should be a message (with a 'role') or have a 'type' of 'function_call', 'function_call_output', 'custom_tool_call' or 'custom_tool_call_output'",
  },
);

/** A part of a question's instructions: text, an image or JSON. */
const QuestionPart = z.discriminatedUnion(
  "type",
  [
    z.object({ type: z.literal("input_text"), text: z.string() }),
    z.object({ type: z.literal("input_image"), image_url: ImageUrl, detail: ImageDetail }),
    InputJsonPart,
  ],
  { error: partError("'input_text', 'input_image' or 'input_json'") },
);

/** A question's instructions: non-empty text, or a non-empty list of parts. */
const Instructions = z.union(
  [
    z.string().min(1, "Instructions should not be empty"),
    z.array(QuestionPart).min(1, "Instructions should not be an empty list"),
  ],
  { error: required("Input should be a string or an array of content parts") },
);

const questionName = z.string().nullable().optional();
const description = z.string().nullable().optional();

const PredicateQuestion = z.object({
  type: z.literal("predicate"),
  instructions: Instructions,
  name: questionName,
});

/** A choice's value: a string or a boolean, typed (`"true"` and `true` are distinct values). */
const ChoiceValue = z.union(
  [z.string().min(1, "A choice value should not be empty"), z.boolean()],
  {
    error: required("Input should be a string or a boolean"),
  },
);

const CHOICE_COUNT = `A choice needs ${MIN_CHOICE_OPTIONS} to ${MAX_CHOICE_OPTIONS} choices`;
const LEVEL_COUNT = `A score needs ${MIN_SCORE_LEVELS} to ${MAX_SCORE_LEVELS} levels`;
const QUESTION_COUNT = `A request needs 1 to ${MAX_DECISION_QUESTIONS} questions`;

const ChoiceQuestion = z.object({
  type: z.literal("choice"),
  instructions: Instructions,
  name: questionName,
  choices: z
    .array(z.object({ value: ChoiceValue, description }), {
      error: required("Input should be an array of choices"),
    })
    .min(MIN_CHOICE_OPTIONS, { error: countBoundError(CHOICE_COUNT) })
    .max(MAX_CHOICE_OPTIONS, { error: countBoundError(CHOICE_COUNT) }),
});

const ScoreQuestion = z.object({
  type: z.literal("score"),
  instructions: Instructions,
  name: questionName,
  levels: z
    .array(
      z.object({
        label: z
          .string({ error: required("Input should be a string") })
          .min(1, "Level labels should not be empty"),
        description,
      }),
      { error: required("Input should be an array of levels") },
    )
    .min(MIN_SCORE_LEVELS, { error: countBoundError(LEVEL_COUNT) })
    .max(MAX_SCORE_LEVELS, { error: countBoundError(LEVEL_COUNT) }),
});

/** One question, by `type`. */
export const DecisionQuestionSchema = z.discriminatedUnion(
  "type",
  [PredicateQuestion, ChoiceQuestion, ScoreQuestion],
  { error: "Input should have a 'type' of 'predicate', 'choice' or 'score'" },
);

/** The request body of `POST /v1/decisions`. */
export const DecisionsRequestSchema = z.object({
  model: z
    .string({ error: required("Input should be a string") })
    .min(1, "Model names should not be empty"),
  input: z.union(
    [z.string(), z.array(DecisionInputItemSchema).min(1, "Input should not be an empty list")],
    { error: required("Input should be a string or an array of input items") },
  ),
  questions: z
    .array(DecisionQuestionSchema, { error: required("Input should be an array of questions") })
    .min(1, { error: countBoundError(QUESTION_COUNT) })
    .max(MAX_DECISION_QUESTIONS, { error: countBoundError(QUESTION_COUNT) }),
  prompt_cache_key: z.string().nullable().optional(),
  prompt_cache_options: z
    .object({
      mode: z.enum(["implicit", "explicit"]).nullable().optional(),
      ttl: z.literal("30m").optional(),
    })
    .nullable()
    .optional(),
  safety_identifier: z
    .string()
    .max(
      MAX_SAFETY_IDENTIFIER_LENGTH,
      `safety_identifier is at most ${MAX_SAFETY_IDENTIFIER_LENGTH} characters`,
    )
    .nullable()
    .optional(),
  // A decision is read in one pass and answered whole: a client asking for a stream is told so.
  stream: z
    .literal(false, {
      error:
        "stream is not supported: a decision is answered whole, in one JSON body; leave it out or send false",
    })
    .nullable()
    .optional(),
});

/** The body of `POST /v1/decisions`: model, input, 1–400 questions. */
export type DecisionsRequest = z.infer<typeof DecisionsRequestSchema>;
/** One item of an input array. */
export type DecisionInputItem = z.infer<typeof DecisionInputItemSchema>;
/** One question of a {@link DecisionsRequest}. */
export type DecisionQuestion = z.infer<typeof DecisionQuestionSchema>;
/** A choice's typed value. */
export type ChoiceValue = z.infer<typeof ChoiceValue>;
