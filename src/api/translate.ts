import type { DecisionRequest, Json, Question, TextValue } from "../decision/types.js";
import type { SystemOneRequest } from "../protocol/schemas.js";

/**
 * The validated wire request as the decision layer's {@link DecisionRequest}: questions and
 * options keep the caller's order (JSON object order), and `null` instructions count as absent.
 */
export function toDecisionRequest(body: SystemOneRequest): DecisionRequest {
  const questions = Object.entries(body.questions).map(([id, q]): [string, Question] => {
    const instructions = (q.instructions ?? undefined) as TextValue | undefined;
    const base = instructions === undefined ? {} : { instructions };
    switch (q.type) {
      case "choice":
        return [
          id,
          {
            type: "choice",
            ...base,
            options: Object.entries(q.criteria).map(
              ([option, description]) => [option, description as TextValue | null] as const,
            ),
          },
        ];
      case "noul": {
        const criteria = q.criteria
          ? {
              ...(q.criteria.true != null ? { true: q.criteria.true as TextValue } : {}),
              ...(q.criteria.false != null ? { false: q.criteria.false as TextValue } : {}),
            }
          : undefined;
        return [id, { type: "noul", ...base, ...(criteria ? { criteria } : {}) }];
      }
      case "score":
        return [id, { type: "score", ...base, levels: q.criteria as (TextValue | null)[] }];
    }
  });
  return { state: body.state as Json, questions };
}
