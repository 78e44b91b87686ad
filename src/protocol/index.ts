/**
 * The wire of decisiond: request and response schemas and types, limits, public model names,
 * the error table and the credential scheme. It imports nothing else of decisiond, and nothing of
 * the server (no model runtime, no database): the client, the MCP server and the console's front
 * end build on it, as do the server's routes.
 *
 * @example
 * ```ts
 * import { SystemOneRequestSchema, Errors } from "decisiond/protocol";
 * const parsed = SystemOneRequestSchema.safeParse(body);
 * if (error.errorType === Errors.concurrencyLimit.type) await sleep(1000);
 * ```
 */
export { bearerKey, WWW_AUTHENTICATE } from "./bearer.js";
export { DECISIONS_PATH, SYSTEMONE_PATH } from "./routes.js";
export { ClientQuestionSchema, type ClientQuestion } from "./client-question.js";
export {
  ApiError,
  ClientErrorTypes,
  Errors,
  errorTypeOf,
  formatMessage,
  HttpError,
  httpStatusErrorType,
  validationError,
  type ApiErrorOptions,
  type ErrorBody,
  type ErrorCode,
  type ErrorSpec,
  type ValidationDetail,
  type ValidationErrorBody,
} from "./errors.js";
export {
  DecisionInputItemSchema,
  DecisionQuestionSchema,
  DecisionsRequestSchema,
  IMAGE_DATA_URL,
  MAX_DECISION_QUESTIONS,
  MAX_SAFETY_IDENTIFIER_LENGTH,
  type ChoiceValue,
  type DecisionInputItem,
  type DecisionQuestion,
  type DecisionsRequest,
} from "./decisions.js";
export {
  DecisionChoiceAnswerSchema,
  DecisionSchema,
  DecisionScoreAnswerSchema,
  DecisionUsageSchema,
  OpenAiErrorSchema,
  OpenAiModelSchema,
  PredicateAnswerSchema,
  RefusalAnswerSchema,
  type Decision,
  type DecisionAnswer,
  type DecisionUsage,
  type OpenAiErrorBody,
  type OpenAiModel,
} from "./decisions-response.js";
export {
  decisionsError,
  DecisionsErrors,
  invalidRequestFromZod,
  OPENAI_ERROR_TYPES,
  paramOf,
  toOpenAiError,
} from "./decisions-errors.js";
export {
  decisionUsage,
  fromDecisionsRequest,
  IMAGE_MARK,
  optionId,
  refusedDecision,
  toDecisionAnswers,
  type DecisionsTranslation,
  type TranslationModel,
} from "./decisions-translate.js";
export { requestJsonSchema, type JsonSchema } from "./json-schema.js";
export * from "./limits.js";
export { CLIENT_DEFAULT_ALIAS, PUBLIC_MODEL_NAME } from "./models.js";
export {
  ChoiceAnswerSchema,
  ErrorSchema,
  JsonValue,
  ModelEntrySchema,
  NoulAnswerSchema,
  QuestionSchema,
  ScoreAnswerSchema,
  SystemOneRequestSchema,
  SystemOneResponseSchema,
  TextValue,
  ValidationErrorSchema,
  type Answer,
  type ModelEntry,
  type Question,
  type SystemOneRequest,
  type SystemOneResponse,
} from "./schemas.js";
export { detailsFromZod } from "./validation.js";
