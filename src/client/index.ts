/**
 * The typed client of the decisiond HTTP API, for apps, agents and the `decisiond ask` / `mcp`
 * commands. It imports nothing from the server side (only types from the API's schemas).
 */
export {
  type AnswerOf,
  type ChoiceAnswerOf,
  type DecideInput,
  type DecideResponseOf,
  type NoulAnswer,
  type ScoreAnswer,
} from "./answers.js";
export {
  DecisiondClient,
  type Answer,
  type CallOptions,
  type DecideRequest,
  type DecideResponse,
  type DecisiondClientOptions,
  type ModelEntry,
  type Question,
} from "./client.js";
export {
  DEFAULT_BASE_URL,
  DEFAULT_MODEL_NAME,
  defaultModel,
  keyFilePath,
  normalizeBaseUrl,
  resolveClientConfig,
  type ClientConfig,
  type ResolveOptions,
} from "./config.js";
export {
  ClientConfigError,
  DecisiondError,
  type DecisiondErrorInit,
  type ValidationDetail,
} from "./errors.js";
export {
  answerConfidence,
  formatAnswerValue,
  formatProbability,
  renderAnswerLines,
  topProbabilities,
} from "./render.js";
