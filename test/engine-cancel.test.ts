import type { LlamaContextSequence } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Decider } from "../src/decision/decide.js";
import { scoreRequestOf } from "../src/decision/plan.js";
import type { DecisionRequest } from "../src/decision/types.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";
import { TOPIC_QUESTIONS } from "./support/questions.js";

/**
 * Hardening: a cancelled request (client gone, deadline passed) frees the engine after the decode
 * call in flight, not after its whole prefix, and the next request is answered as before: it takes
 * over the calls made before the abort (a tiled prefix's part is a prefix of its own,
 * docs/decisions/103) and answers as a cold engine does, to the bit.
 */

const REQUEST: DecisionRequest = {
  state: "The striker scored twice as United beat City in the league final. ".repeat(150),
  questions: TOPIC_QUESTIONS,
};

/** sequence 0 of an engine (private: the test wraps its decode calls). */
const prefixSequenceOf = (engine: LlamaEngine) =>
  (engine as unknown as { prefixSequence: LlamaContextSequence }).prefixSequence;

describe("cancelling a request on the real model", () => {
  let engine: LlamaEngine;
  let decider: Decider;
  beforeAll(async () => {
    engine = await openLlamaEngine({
      modelPath: inject("modelPath"),
      contextSize: 4096,
      batchSize: 512,
      prefixCacheBytes: 0,
    });
    decider = new Decider(engine, { contentFree: false });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("stops a long prefix after the call in flight; the next request answers as a fresh one", async () => {
    const request = scoreRequestOf(await decider.plan(REQUEST));
    expect(request.prefix.length).toBeGreaterThan(3 * 512);
    const sequence = prefixSequenceOf(engine);
    const evaluate = sequence.evaluateWithoutGeneratingNewTokens.bind(sequence);
    const controller = new AbortController();
    let calls = 0;
    let firstCall = 0;
    sequence.evaluateWithoutGeneratingNewTokens = async (...args) => {
      calls++;
      firstCall = args[0].length;
      await evaluate(...args);
      controller.abort(new Error("the client closed the connection"));
    };
    const before = { ...engine.counters };
    try {
      await expect(engine.score(request, controller.signal)).rejects.toThrow(/client closed/);
    } finally {
      sequence.evaluateWithoutGeneratingNewTokens = evaluate;
    }
    expect(calls).toBe(1);
    expect(engine.counters.prefixTokensEvaluated).toBe(before.prefixTokensEvaluated);
    expect(engine.counters.branchTokensEvaluated).toBe(before.branchTokensEvaluated);

    // The next request takes over the one call made, and evaluates the rest.
    const after = await engine.score(request);
    expect(firstCall).toBeGreaterThanOrEqual(64);
    expect(after.cachedPrefixTokens).toBe(firstCall);
    expect(engine.counters.prefixTokensEvaluated).toBe(
      before.prefixTokensEvaluated + request.prefix.length - firstCall,
    );

    // The same request after another state, evaluated from its start, gives the same
    // log-probabilities to the bit.
    await engine.score(scoreRequestOf(await decider.plan({ ...REQUEST, state: "Other." })));
    const fresh = await engine.score(request);
    expect(fresh.cachedPrefixTokens).toBeLessThan(firstCall);
    expect(after.branches).toEqual(fresh.branches);
  });
});
