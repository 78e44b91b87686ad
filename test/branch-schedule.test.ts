import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  commonLeadLength,
  scheduleBranches,
  sharedStart,
  type BranchSchedule,
} from "../src/engine/branch-schedule.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama.js";
import type { ScoreBranch } from "../src/engine/types.js";

const branch = (tokens: number[], children?: ScoreBranch[]): ScoreBranch => ({
  tokens,
  candidates: [1],
  ...(children ? { children } : {}),
});

/** Every index once, across all lanes. */
function indices(schedule: BranchSchedule): number[] {
  return schedule.lanes.flatMap((run) => run.map((s) => s.index)).sort((a, b) => a - b);
}

describe("branch schedule (pure)", () => {
  it("measures shared starts", () => {
    expect(sharedStart([1, 2, 3], [1, 2, 4])).toBe(2);
    expect(sharedStart([1, 2], [1, 2, 3])).toBe(2);
    expect(sharedStart([5], [1])).toBe(0);
  });

  it("leaves every branch its last token in the common lead", () => {
    expect(commonLeadLength([branch([1, 2, 3, 9]), branch([1, 2, 3, 8])])).toBe(3);
    // Identical branches: the lead stops one token short of their end.
    expect(commonLeadLength([branch([1, 2, 3]), branch([1, 2, 3])])).toBe(2);
    // A branch that is the start of another: still one token short of the shorter one.
    expect(commonLeadLength([branch([1, 2]), branch([1, 2, 3, 4])])).toBe(1);
    expect(commonLeadLength([branch([7, 2]), branch([1, 2])])).toBe(0);
    expect(commonLeadLength([branch([1, 2, 3])])).toBe(0);
  });

  it("runs neighbours in token order on one lane, sharing their starts", () => {
    const branches = [
      branch([1, 2, 5, 6]),
      branch([1, 3, 5, 6]),
      branch([1, 2, 5, 7]),
      branch([1, 3, 5, 7]),
    ];
    const schedule = scheduleBranches(branches, 2);
    expect(schedule.lead).toBe(1);
    expect(schedule.lanes).toEqual([
      [
        { index: 0, shared: 1 },
        { index: 2, shared: 3 },
      ],
      [
        { index: 1, shared: 1 },
        { index: 3, shared: 3 },
      ],
    ]);
  });

  it("uses one lane per branch when there are no more branches than lanes", () => {
    const branches = [branch([4, 1]), branch([3, 1]), branch([2, 1])];
    const schedule = scheduleBranches(branches, 4);
    expect(schedule.lanes).toHaveLength(3);
    expect(indices(schedule)).toEqual([0, 1, 2]);
    for (const run of schedule.lanes) expect(run).toHaveLength(1);
  });

  it("fills every lane and places every branch once, whatever the costs", () => {
    const branches = [
      branch([1, 1, 1, 1, 1, 1, 1, 1, 1], [branch([2, 2, 2, 2, 2, 2, 2, 2])]),
      branch([1, 2]),
      branch([1, 3]),
      branch([1, 4]),
      branch([1, 5]),
    ];
    const schedule = scheduleBranches(branches, 4);
    expect(schedule.lanes).toHaveLength(4);
    expect(indices(schedule)).toEqual([0, 1, 2, 3, 4]);
    // The expensive branch has a lane to itself.
    expect(schedule.lanes[0]).toEqual([{ index: 0, shared: 1 }]);
    for (const run of schedule.lanes)
      for (const s of run) expect(s.shared).toBeLessThan(branches[s.index]!.tokens.length);
  });

  it("never shares a branch's last token, even with an identical neighbour", () => {
    const schedule = scheduleBranches([branch([1, 2, 3]), branch([1, 2, 3]), branch([1, 2, 3])], 1);
    expect(schedule.lanes).toEqual([
      [
        { index: 0, shared: 2 },
        { index: 1, shared: 2 },
        { index: 2, shared: 2 },
      ],
    ]);
  });
});

/**
 * With the real model: branches that share their starts, scored together (the lead evaluated
 * once, lanes keeping shared tokens), give the log-probabilities each branch gets scored alone,
 * and fewer tokens go through the model.
 */
describe("shared branch starts on the real model", () => {
  let engine: LlamaEngine;
  beforeAll(async () => {
    engine = await openLlamaEngine({
      modelPath: inject("modelPath"),
      contextSize: 1024,
      prefixCacheBytes: 0,
      parallelBranches: 2,
    });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("gives every branch the log-probabilities it gets alone", async () => {
    const prefix = engine.tokenize("A parcel arrived late and the box was crushed.\n");
    const candidates = engine.tokenize(" billing shipping yes no");
    const questions = [
      "Options: billing, shipping. Which team should handle this?",
      "Options: billing, shipping. Which team should be told?",
      "Options: billing, shipping. Is this about a refund?",
      "Options: billing, shipping. Which team should handle this first?",
      "Is the customer angry?",
    ];
    const branches = questions.map((q) => ({
      tokens: engine.tokenize(`${q}\nAnswer:`),
      candidates,
      children: [{ tokens: engine.tokenize(" ship"), candidates: engine.tokenize("ping ped") }],
    }));
    const before = engine.counters.branchTokensEvaluated;
    const together = await engine.score({ prefix, branches });
    const evaluatedTogether = engine.counters.branchTokensEvaluated - before;
    const allTokens = branches.reduce(
      (s, b) => s + b.tokens.length + b.children[0]!.tokens.length,
      0,
    );
    expect(evaluatedTogether).toBeLessThan(allTokens);
    for (const [i, b] of branches.entries()) {
      const alone = await engine.score({ prefix, branches: [b] });
      const got = together.branches[i]!;
      const want = alone.branches[0]!;
      got.logprobs.forEach((lp, j) => expect(lp).toBeCloseTo(want.logprobs[j]!, 3));
      got.children![0]!.logprobs.forEach((lp, j) =>
        expect(lp).toBeCloseTo(want.children![0]!.logprobs[j]!, 3),
      );
    }
  });
});
