import type { SystemOneRequest } from "../protocol/schemas.js";
import { questionFromWire } from "./questions/index.js";
import type { DecisionRequest } from "./types.js";

/**
 * The validated wire request as the decision layer's {@link DecisionRequest}: each question by
 * its type's module (questions/*.ts `fromWire`), questions and options in the caller's order
 * (JSON object order), `null` instructions counting as absent.
 */
export function toDecisionRequest(body: SystemOneRequest): DecisionRequest {
  return {
    state: body.state,
    questions: Object.entries(body.questions).map(([id, q]) => [id, questionFromWire(q)] as const),
  };
}
