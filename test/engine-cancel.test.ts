import type { LlamaContextSequence } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Decider } from "../src/decision/decide.js";
import { scoreRequestOf } from "../src/decision/plan.js";
import type { DecisionRequest } from "../src/decision/types.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";
import { TOPIC_QUESTIONS } from "./support/questions.js";

/**
 * Hardening: a cancelled request (client gone, deadline passed) frees the engine after the decode
 * call in flight, not after its whole prefix, and the next request is answered as before: the
 * part evaluated before the abort was cut by no call map the next one can take over, so it
 * evaluates its prefix from the start.
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
    sequence.evaluateWithoutGeneratingNewTokens = async (...args) => {
      calls++;
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

    const after = await engine.score(request);
    expect(after.cachedPrefixTokens).toBe(0);
    expect(engine.counters.prefixTokensEvaluated).toBe(
      before.prefixTokensEvaluated + request.prefix.length,
    );

    // The same request after another state gives the same log-probabilities.
    await engine.score(scoreRequestOf(await decider.plan({ ...REQUEST, state: "Other." })));
    const fresh = await engine.score(request);
    expect(fresh.cachedPrefixTokens).toBeLessThan(request.prefix.length);
    const a = after.branches[0]!.logprobs;
    const b = fresh.branches[0]!.logprobs;
    for (let i = 0; i < a.length; i++) expect(a[i]).toBeCloseTo(b[i]!, 4);
  });
});
