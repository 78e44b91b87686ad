import { describe, expect, it } from "vitest";
import { callLimits, CallPace, CONTENDED_CALL_TOKENS } from "../src/engine/llama/call-pace.js";

/** The pacing of a stretch's decode calls (src/engine/llama/call-pace.ts), on made-up timings. */

describe("CallPace", () => {
  const limits = { batchSize: 1024, budgetMs: 2000 };

  it("takes the batch size until a call is timed, then what fits in the budget, in 64s", () => {
    const pace = new CallPace(limits, false);
    expect(pace.tokens).toBe(1024);
    pace.record(1024, 4096); // 4 ms a token: 500 fit
    expect(pace.tokens).toBe(448);
    pace.record(448, 448 * 6); // deeper, 6 ms a token: 333 fit
    expect(pace.tokens).toBe(320);
  });

  it("never goes under the contended size nor over the batch size", () => {
    const pace = new CallPace(limits, false);
    pace.record(1024, 60_000);
    expect(pace.tokens).toBe(CONTENDED_CALL_TOKENS);
    pace.record(256, 1); // a fast machine
    expect(pace.tokens).toBe(1024);
    const small = new CallPace({ batchSize: 128, budgetMs: 2000 }, false);
    small.record(128, 60_000);
    expect(small.tokens).toBe(128);
  });

  it("keeps a contended stretch at the contended size however fast its calls are", () => {
    const pace = new CallPace(limits, true);
    expect(pace.tokens).toBe(CONTENDED_CALL_TOKENS);
    pace.record(256, 1);
    expect(pace.tokens).toBe(CONTENDED_CALL_TOKENS);
  });

  it("does not take the rate of a short tail call, nor of a call that took no time", () => {
    const pace = new CallPace(limits, false);
    pace.record(10, 5000);
    pace.record(512, 0);
    expect(pace.tokens).toBe(1024);
  });

  it("times a call it runs", async () => {
    const pace = new CallPace({ batchSize: 1024, budgetMs: 20 }, false);
    const result = await pace.time(640, () => new Promise((r) => setTimeout(() => r("done"), 60)));
    expect(result).toBe("done");
    // At least 60 ms for 640 tokens: at most 213 fit in 20 ms, so the floor.
    expect(pace.tokens).toBe(CONTENDED_CALL_TOKENS);
  });

  it("starts a stretch where the one before it ended, once that one timed a call", () => {
    const prefix = new CallPace(limits, false);
    expect(prefix.timedTokens).toBeUndefined();
    prefix.record(1024, 5120); // 5 ms a token: 400 fit
    expect(prefix.timedTokens).toBe(384);
    expect(new CallPace(limits, false, prefix.timedTokens).tokens).toBe(384);
    expect(new CallPace(limits, false, 64).tokens).toBe(CONTENDED_CALL_TOKENS);
    expect(new CallPace(limits, false, 4096).tokens).toBe(1024);
    expect(new CallPace(limits, true, 1024).tokens).toBe(CONTENDED_CALL_TOKENS);
  });

  it("checks its limits", () => {
    expect(callLimits(1024, Infinity)).toEqual({ batchSize: 1024, budgetMs: Infinity });
    expect(() => callLimits(64, 2000)).toThrow(/batchSize must be at least 128/);
    for (const budget of [0, -1, Number.NaN])
      expect(() => callLimits(1024, budget)).toThrow(/callBudgetMs must be above 0/);
  });
});
