import type { DecisionRequest, Question } from "./types.js";
import type { SystemOneRequest } from "../protocol/schemas.js";

/**
 * The validated wire request as the decision layer's {@link DecisionRequest}: questions and
 * options keep the caller's order (JSON object order), and `null` instructions count as absent.
 */
export function toDecisionRequest(body: SystemOneRequest): DecisionRequest {
  const questions = Object.entries(body.questions).map(([id, q]): [string, Question] => {
    const instructions = q.instructions ?? undefined;
    const base = instructions === undefined ? {} : { instructions };
    switch (q.type) {
      case "choice":
        return [
          id,
          {
            type: "choice",
            ...base,
            options: Object.entries(q.criteria).map(
              ([option, description]) => [option, description] as const,
            ),
          },
        ];
      case "noul": {
        const criteria = q.criteria
          ? {
              ...(q.criteria.true != null ? { true: q.criteria.true } : {}),
              ...(q.criteria.false != null ? { false: q.criteria.false } : {}),
            }
          : undefined;
        return [id, { type: "noul", ...base, ...(criteria ? { criteria } : {}) }];
      }
      case "score":
        return [id, { type: "score", ...base, levels: q.criteria }];
    }
  });
  return { state: body.state, questions };
}
