import { describe, expect, it } from "vitest";
import {
  branchFrom,
  leadCallsFrom,
  planDecode,
  prefixCallsFrom,
  type DecodePlan,
} from "../src/engine/decode/index.js";
import { FA_TILE_ROWS, sequenceCallSizes } from "../src/engine/decode/kernel-split.js";
import type { ScoreBranch } from "../src/engine/types.js";

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
const LIMITS = { lanes: 1, batchSize: 1024 };

/** Branches sharing `lead` tokens at their start, then `own` tokens each. */
function branches(count: number, lead: number, own: number): ScoreBranch[] {
  return range(0, count).map((b) => ({
    tokens: [...range(1000, lead), ...range(5000 + 100 * b, own)],
    candidates: [1, 2],
  }));
}

/** Every token is evaluated once: the plan's calls cover each sequence from where it resumes. */
function expectCovered(plan: DecodePlan, prefix: number, request: readonly ScoreBranch[]) {
  expect(plan.prefix.resume + sum(plan.prefix.calls)).toBe(prefix);
  expect(sum(plan.prefix.wholeCalls)).toBe(prefix);
  expect(sum(plan.lead.calls)).toBe(plan.lead.length);
  const seen = plan.lanes.flat().map((b) => b.index);
  expect([...seen].sort((a, b) => a - b)).toEqual(range(0, request.length));
  for (const b of plan.lanes.flat()) {
    expect(b.shared + sum(b.calls)).toBe(request[b.index]!.tokens.length);
    expect(b.shared).toBeGreaterThanOrEqual(plan.lead.length);
  }
}

describe("decode plan (pure)", () => {
  it("evaluates a fresh prefix whole, tiled in calls of about equal size", () => {
    const request = { prefix: range(1, 2413), branches: branches(1, 0, 20) };
    const plan = planDecode(request, { shared: 0, length: 0 }, LIMITS);
    expect(plan.prefix).toEqual({ resume: 0, calls: [805, 804, 804], wholeCalls: [805, 804, 804] });
    expect(plan.lead).toEqual({ length: 0, calls: [], tiled: 0 });
    expect(plan.lanes).toEqual([[{ index: 0, shared: 0, calls: [20] }]]);
    expectCovered(plan, 2413, request.branches);
  });

  it("takes over a held prefix only as far as it was cut alike", () => {
    const request = { prefix: range(1, 2420), branches: branches(1, 0, 5) };
    // 2405 shared with a 2413-token prefix: step back so the rest is one tiled call.
    const plan = planDecode(request, { shared: 2405, length: 2413 }, LIMITS);
    expect(plan.prefix.resume).toBe(2420 - FA_TILE_ROWS);
    expect(plan.prefix.calls).toEqual([FA_TILE_ROWS]);
    // A held prefix of unknown cut is not taken over.
    const unknown = planDecode(request, { shared: 2405, length: undefined }, LIMITS);
    expect(unknown.prefix.resume).toBe(0);
    // The same prefix again: nothing to evaluate.
    const again = planDecode(request, { shared: 2420, length: 2420 }, LIMITS);
    expect(again.prefix).toMatchObject({ resume: 2420, calls: [] });
  });

  it("evaluates the branches' common start once, as a lead, then each branch's own tokens", () => {
    const request = { prefix: range(1, 100), branches: branches(3, 130, 10) };
    const plan = planDecode(request, { shared: 0, length: 0 }, LIMITS);
    // 140-token branches cut at 128: the lead is 128 tiled tokens and 2 one-row ones.
    // The lead ends in a one-row part: its first 128 tokens are tiled.
    expect(plan.lead).toEqual({ length: 130, calls: [128, 2], tiled: 128 });
    expect(plan.lanes).toHaveLength(1);
    // Each branch resumes after the lead: its own 10 tokens in one one-row call.
    expect(plan.lanes[0]!.map((b) => [b.shared, b.calls])).toEqual([
      [130, [10]],
      [130, [10]],
      [130, [10]],
    ]);
    expectCovered(plan, 100, request.branches);
  });

  it("makes a lone branch's calls before its last its lead, in the same calls", () => {
    for (const [length, batchSize] of [
      [20, 1024],
      [100, 1024],
      [128, 1024],
      [2500, 1024],
      [2561, 512],
      [7400, 1024],
    ] as const) {
      const request = { prefix: range(1, 70), branches: branches(1, 0, length) };
      const plan = planDecode(request, { shared: 0, length: 0 }, { lanes: 1, batchSize });
      const [only] = plan.lanes[0]!;
      // The same decode calls as the branch evaluated from its start, the last one its own.
      const alone = sequenceCallSizes(0, length, batchSize);
      expect([...plan.lead.calls, ...only!.calls]).toEqual(alone);
      expect(only!.calls).toHaveLength(1);
      expect(only!.shared).toBe(plan.lead.length);
      // A lone branch's lead is all tiled: a later request may take over any start of it.
      expect(plan.lead.tiled).toBe(plan.lead.length);
      expectCovered(plan, 70, request.branches);
    }
    const long = { prefix: range(1, 70), branches: branches(1, 0, 7400) };
    const plan = planDecode(long, { shared: 0, length: 0 }, LIMITS);
    expect(plan.lead.calls).toEqual([920, 920, 920, 920, 920, 920, 920, 920]);
    expect(plan.lanes[0]).toEqual([{ index: 0, shared: 7360, calls: [40] }]);
    // A lead resumed part way, in smaller calls: the rest of it, each call tiled.
    const rest = leadCallsFrom(long, plan, plan.lead.calls[0]! + plan.lead.calls[1]!, 256);
    expect(sum(rest)).toBe(7360 - plan.lead.calls[0]! - plan.lead.calls[1]!);
    for (const size of rest) expect(size).toBeGreaterThanOrEqual(FA_TILE_ROWS);
    expect(Math.max(...rest)).toBeLessThanOrEqual(256);
    expect(() => leadCallsFrom(long, plan, 7320, 256)).toThrow(RangeError);
  });

  it("plans a branch a turn stopped inside from where its calls ended, tiled as before", () => {
    const request = { prefix: range(1, 70), branches: branches(2, 3, 1500) };
    const plan = planDecode(request, { shared: 0, length: 0 }, LIMITS);
    const [first] = plan.lanes[0]!;
    // 1,503 tokens, no lead of 64: 1,472 tiled in two calls, then 31 one-row ones.
    expect([first!.shared, first!.calls]).toEqual([0, [736, 736, 31]]);
    // Stopped after one paced call of 256 tokens: the rest tiled, then the same one-row call.
    const resumed = branchFrom(request, first!.index, 256, 1024);
    expect(resumed).toEqual({ index: first!.index, shared: 256, calls: [608, 608, 31] });
    // Stopped before the last call: only the one-row part is left.
    expect(branchFrom(request, first!.index, 1472, 1024).calls).toEqual([31]);
    // A stop that would leave fewer than 64 tiled tokens is not one the engine makes.
    expect(() => branchFrom(request, first!.index, 1440, 1024)).toThrow(RangeError);
    // Nor one that leaves a single one-row token, or none.
    expect(() => branchFrom(request, first!.index, 1502, 1024)).toThrow(RangeError);
    expect(() => branchFrom(request, first!.index, 1503, 1024)).toThrow(RangeError);
  });

  it("spreads branches over the lanes it is given", () => {
    const request = { prefix: range(1, 70), branches: branches(5, 3, 40) };
    const plan = planDecode(request, { shared: 0, length: 0 }, { lanes: 3, batchSize: 512 });
    expect(plan.lanes).toHaveLength(3);
    expectCovered(plan, 70, request.branches);
    const one = planDecode(request, { shared: 0, length: 0 }, { lanes: 8, batchSize: 512 });
    expect(one.lanes).toHaveLength(5);
  });

  it("refuses a batch below 128 tokens, and a prefix resumed off its call map", () => {
    const request = { prefix: range(1, 300), branches: branches(1, 0, 5) };
    expect(() =>
      planDecode(request, { shared: 0, length: 0 }, { lanes: 1, batchSize: 64 }),
    ).toThrow(RangeError);
    expect(prefixCallsFrom(236, 300, 1024)).toEqual([64]);
    expect(() => prefixCallsFrom(250, 300, 1024)).toThrow(RangeError);
  });
});
