import type { ServedModel } from "../../src/api/app.js";
import type { DecisionRequest, DecisionResult } from "../../src/decision/types.js";

/**
 * A stand-in model for tests of the HTTP layer (admission, limits, bad input): it answers every
 * question with fixed numbers, and a test may replace `impl` to hold or fail a call.
 */

export type Decide = (request: DecisionRequest, signal?: AbortSignal) => Promise<DecisionResult>;

/** Answers every question with fixed numbers and the given usage. */
export function stubAnswer(
  request: DecisionRequest,
  usage = { input_tokens: 8, output_tokens: 3 },
): DecisionResult {
  const answers: DecisionResult["answers"] = {};
  for (const [id, q] of request.questions) {
    if (q.type === "noul") answers[id] = { type: "noul", noul: 0.75 };
    else if (q.type === "choice") {
      const ids = q.options.map(([o]) => o);
      answers[id] = {
        type: "choice",
        choice: ids[0]!,
        probabilities: Object.fromEntries(ids.map((o, i) => [o, i === 0 ? 1 : 0])),
        confidence: 1,
      };
    } else {
      const legend = Object.fromEntries(q.levels.map((l, i) => [String(i), l ?? ""]));
      answers[id] = {
        type: "score",
        score: 0,
        legend,
        probabilities: Object.fromEntries(q.levels.map((_, i) => [String(i), i === 0 ? 1 : 0])),
        confidence: 1,
      };
    }
  }
  return { answers, usage, stats: { evaluatedTokens: usage.input_tokens, cachedPrefixTokens: 0 } };
}

/** A stand-in model; calls go through `decide`, which the test may replace. */
export class StubModel implements ServedModel {
  readonly names = ["stub-1"];
  readonly aliases = ["jev-latest"];
  readonly description = "a stand-in model for HTTP tests";
  readonly releaseDate = "2026-01-01";
  readonly acceptsImages = false;
  readonly acceptsVideos = false;
  inFlight = 0;
  maxInFlight = 0;
  entered = 0;
  /** Requests the model received, in order. */
  readonly received: DecisionRequest[] = [];
  impl: Decide = async (request) => stubAnswer(request);

  decide = async (request: DecisionRequest, signal?: AbortSignal): Promise<DecisionResult> => {
    this.inFlight++;
    this.entered++;
    this.received.push(request);
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      return await this.impl(request, signal);
    } finally {
      this.inFlight--;
    }
  };
}
