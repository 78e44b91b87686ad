import { describe, expect, it } from "vitest";
import { planDecode } from "../src/engine/decode/index.js";
import { restOfRun, workLeft } from "../src/engine/llama/turns.js";
import type { BranchScore, ScoreRequest } from "../src/engine/types.js";

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** A prefix of 70 tokens and three branches sharing a 130-token lead, then 1,500 own tokens each. */
const REQUEST: ScoreRequest = {
  prefix: range(1, 70),
  branches: range(0, 3).map((b) => ({
    tokens: [...range(1000, 130), ...range(5000 + 2000 * b, 1500)],
    candidates: [1, 2],
  })),
};
const PLAN = planDecode(REQUEST, { shared: 0, length: 0 }, { lanes: 1, batchSize: 1024 });
const SCORE: BranchScore = { logprobs: [-0.1, -2.4] };

describe("what a turn leaves for the next (pure)", () => {
  it("goes on with a branch a turn stopped inside from its parked part, the others from the lead", () => {
    expect(PLAN.lead.length).toBe(130);
    const [first, second, third] = PLAN.lanes[0]!.map((b) => b.index);
    const scores = [undefined, undefined, undefined] as (BranchScore | undefined)[];
    scores[first!] = SCORE;
    // Stopped after 512 tokens of the second branch: it resumes there, the third as planned.
    const part = { index: second!, done: 130 + 512 };
    const rest = restOfRun(REQUEST, PLAN, scores, 1024, part);
    expect(rest.map((b) => b.index)).toEqual([second, third]);
    expect(rest[0]!.shared).toBe(642);
    expect(rest[0]!.shared + rest[0]!.calls.reduce((a, b) => a + b, 0)).toBe(1630);
    expect(rest[1]).toBe(PLAN.lanes[0]![2]);
    // Without a part (the turn stopped between branches), the second resumes after the lead.
    expect(restOfRun(REQUEST, PLAN, scores, 1024)[0]!.shared).toBe(130);
  });

  it("counts the tokens of a parked part as done, once", () => {
    const [first, second] = PLAN.lanes[0]!.map((b) => b.index);
    const scores = [undefined, undefined, undefined] as (BranchScore | undefined)[];
    scores[first!] = SCORE;
    const between = workLeft(REQUEST, 130, 70, scores);
    // Two branches of 1,500 tokens past the lead, their labels' tokens none.
    expect(between).toBe(3000);
    expect(workLeft(REQUEST, 130, 70, scores, true, { index: second!, done: 642 })).toBe(2488);
    // A part of the lead alone is nothing done past it.
    expect(workLeft(REQUEST, 130, 70, scores, true, { index: second!, done: 100 })).toBe(3000);
  });
});
