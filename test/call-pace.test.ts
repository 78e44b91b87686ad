import { describe, expect, it } from "vitest";
import {
  CallHistory,
  callLimits,
  CallPace,
  CONTENDED_CALL_TOKENS,
  DEEP_START_TOKENS,
} from "../src/engine/llama/call-pace.js";

/** The pacing of a stretch's decode calls (src/engine/llama/call-pace.ts), on made-up timings. */

describe("CallPace", () => {
  const limits = { batchSize: 1024, budgetMs: 2000 };
  /** A stretch starting at token 0 of an engine that has timed no call. */
  const fresh = (contended = false) => new CallPace(limits, contended, new CallHistory(), 0);

  it("takes the batch size until a call is timed, then what fits in the budget, in 64s", () => {
    const pace = fresh();
    expect(pace.tokens).toBe(1024);
    pace.record(1024, 4096, 1024); // 4 ms a token: 500 fit
    expect(pace.tokens).toBe(448);
    pace.record(448, 448 * 6, 1472); // deeper, 6 ms a token: 333 fit
    expect(pace.tokens).toBe(320);
  });

  it("never goes under the contended size nor over the batch size", () => {
    const pace = fresh();
    pace.record(1024, 60_000, 1024);
    expect(pace.tokens).toBe(CONTENDED_CALL_TOKENS);
    pace.record(256, 1, 1280); // a fast machine
    expect(pace.tokens).toBe(1024);
    const small = new CallPace({ batchSize: 128, budgetMs: 2000 }, false, new CallHistory(), 0);
    small.record(128, 60_000, 128);
    expect(small.tokens).toBe(128);
  });

  it("keeps a contended stretch at the contended size however fast its calls are", () => {
    const pace = fresh(true);
    expect(pace.tokens).toBe(CONTENDED_CALL_TOKENS);
    pace.record(256, 1, 256);
    expect(pace.tokens).toBe(CONTENDED_CALL_TOKENS);
  });

  it("does not take the rate of a short tail call, nor of a call that took no time", () => {
    const pace = fresh();
    pace.record(10, 5000, 10);
    pace.record(512, 0, 522);
    expect(pace.tokens).toBe(1024);
  });

  it("times a call it runs", async () => {
    const pace = new CallPace({ batchSize: 1024, budgetMs: 20 }, false, new CallHistory(), 0);
    const result = await pace.time(
      640,
      640,
      () => new Promise((r) => setTimeout(() => r("done"), 60)),
    );
    expect(result).toBe("done");
    // At least 60 ms for 640 tokens: at most 213 fit in 20 ms, so the floor.
    expect(pace.tokens).toBe(CONTENDED_CALL_TOKENS);
  });

  it("starts a stretch from the engine's last timed call: where it ended, or deep and no deeper", () => {
    const history = new CallHistory();
    const at = (depth: number, contended = false) =>
      new CallPace(limits, contended, history, depth).tokens;
    // A prefix of 3,000 tokens whose last call took 5 ms a token: 400 fit in the budget.
    new CallPace(limits, false, history, 0).record(1024, 5120, 3000);
    // The lead right after it, and a stretch deep in a state no deeper: at that rate.
    expect(at(3000)).toBe(384);
    expect(at(DEEP_START_TOKENS)).toBe(384);
    expect(at(3000, true)).toBe(CONTENDED_CALL_TOKENS);
    // Near the start of the context, a request of up to a batch is one call.
    expect(at(200)).toBe(1024);
    // Deeper than any call timed: the contended size, once a call ran past the budget.
    expect(at(5000)).toBe(CONTENDED_CALL_TOKENS);
    // Near the start, only the stretch that goes on from the call (this turn's lead after its
    // prefix) takes that rate: another request's state of a few hundred tokens stays one call.
    const near = new CallHistory();
    new CallPace(limits, false, near, 0).record(576, 2304, 600); // 4 ms a token
    expect(new CallPace(limits, false, near, 600, true).tokens).toBe(448);
    expect(new CallPace(limits, false, near, 600).tokens).toBe(1024);
    // A machine whose calls all fit the budget keeps the batch size, deep or not.
    const fast = new CallHistory();
    new CallPace(limits, false, fast, 0).record(1024, 100, 1024);
    expect(new CallPace(limits, false, fast, 7000).tokens).toBe(1024);
    expect(new CallPace(limits, false, fast, 1024).tokens).toBe(1024);
  });

  it("takes a batch size that is not a multiple of 64 whole", () => {
    const odd = new CallPace({ batchSize: 1000, budgetMs: 2000 }, false, new CallHistory(), 0);
    expect(odd.tokens).toBe(1000);
    odd.record(1000, 100, 1000); // fast: a whole batch fits
    expect(odd.tokens).toBe(1000);
    odd.record(1000, 4000, 2000); // 4 ms a token: 500 fit
    expect(odd.tokens).toBe(448);
  });

  it("checks its limits", () => {
    expect(callLimits(1024, Infinity)).toEqual({ batchSize: 1024, budgetMs: Infinity });
    expect(() => callLimits(64, 2000)).toThrow(/batchSize must be at least 128/);
    for (const budget of [0, -1, Number.NaN])
      expect(() => callLimits(1024, budget)).toThrow(/callBudgetMs must be above 0/);
  });
});
