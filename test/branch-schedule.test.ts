import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  branchCallSizes,
  commonLeadLength,
  leadCallSizes,
  scheduleBranches,
  sharedStart,
  type BranchSchedule,
} from "../src/engine/decode/branch-schedule.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";
import type { ScoreBranch } from "../src/engine/types.js";

const branch = (tokens: number[], children?: ScoreBranch[]): ScoreBranch => ({
  tokens,
  candidates: [1],
  ...(children ? { children } : {}),
});

/** Most tokens one decode call takes, as the engine's default. */
const BATCH = 1024;

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
      branch([1, 9, 2, 5, 6, 6]),
      branch([1, 9, 3, 5, 6, 6]),
      branch([1, 9, 2, 5, 7, 7]),
      branch([1, 9, 3, 5, 7, 7]),
    ];
    const schedule = scheduleBranches(branches, 2, BATCH);
    expect(schedule.lead).toBe(2);
    expect(schedule.lanes).toEqual([
      [
        { index: 0, shared: 2 },
        { index: 2, shared: 4 },
      ],
      [
        { index: 1, shared: 2 },
        { index: 3, shared: 4 },
      ],
    ]);
  });

  it("uses one lane per branch when there are no more branches than lanes", () => {
    const branches = [branch([4, 1]), branch([3, 1]), branch([2, 1])];
    const schedule = scheduleBranches(branches, 4, BATCH);
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
    const schedule = scheduleBranches(branches, 4, BATCH);
    expect(schedule.lanes).toHaveLength(4);
    expect(indices(schedule)).toEqual([0, 1, 2, 3, 4]);
    // The expensive branch has a lane to itself. The one token all share is no lead: alone it
    // would be a decode call of one token, which takes another attention kernel.
    expect(schedule.lead).toBe(0);
    expect(schedule.lanes[0]).toEqual([{ index: 0, shared: 0 }]);
    for (const run of schedule.lanes)
      for (const s of run) expect(s.shared).toBeLessThan(branches[s.index]!.tokens.length);
  });

  it("never shares a branch's last token, nor leaves it a call of its own", () => {
    // Identical neighbours: each evaluates its last two tokens in one call (a one-token call
    // takes llama.cpp's single-row attention path, which sums otherwise).
    const schedule = scheduleBranches(
      [branch([1, 2, 3]), branch([1, 2, 3]), branch([1, 2, 3])],
      1,
      BATCH,
    );
    expect(schedule.lead).toBe(0);
    expect(schedule.lanes).toEqual([
      [
        { index: 0, shared: 0 },
        { index: 1, shared: 1 },
        { index: 2, shared: 1 },
      ],
    ]);
  });

  it("cuts long branches into calls as each would alone (kernel-split.ts)", () => {
    // 103-token branches sharing their first 80 tokens: alone, each is one tiled call of 64
    // tokens and one of 39. The lead keeps the cut at 64.
    const start = Array.from({ length: 80 }, (_, i) => 100 + i);
    const tail = (k: number) => Array.from({ length: 23 }, (_, i) => 1000 * k + i);
    const branches = [1, 2, 3].map((k) => branch([...start, ...tail(k)]));
    const schedule = scheduleBranches(branches, 1, BATCH);
    expect(schedule.lead).toBe(80);
    expect(leadCallSizes(branches, schedule.lead, 1024)).toEqual([64, 16]);
    expect(schedule.lanes[0]!.map((s) => s.shared)).toEqual([80, 80, 80]);
    expect(branchCallSizes(branches[0]!, 80, 1024)).toEqual([23]);
    expect(branchCallSizes(branches[0]!, 0, 1024)).toEqual([64, 39]);

    // Branches of 60 and 103 tokens cut differently (60 has no tiled part; 103 is tiled up to
    // 64): nothing is shared that one of them would evaluate with the other kernel, and the
    // lead, tiled for both, would be a call under 64 tokens, so there is none.
    const mixed = [branch([...start.slice(0, 58), 7, 7]), branch([...start, ...tail(1)])];
    const both = scheduleBranches(mixed, 1, BATCH);
    expect(both.lead).toBe(0);
    expect(both.lanes[0]!.map((s) => s.shared)).toEqual([0, 0]);
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
    const prefix = await engine.tokenize("A parcel arrived late and the box was crushed.\n");
    const candidates = await engine.tokenize(" billing shipping yes no");
    const questions = [
      "Options: billing, shipping. Which team should handle this?",
      "Options: billing, shipping. Which team should be told?",
      "Options: billing, shipping. Is this about a refund?",
      "Options: billing, shipping. Which team should handle this first?",
      "Is the customer angry?",
    ];
    const ship = await engine.tokenize(" ship");
    const shipEnds = await engine.tokenize("ping ped");
    const branches = [];
    for (const q of questions)
      branches.push({
        tokens: await engine.tokenize(`${q}\nAnswer:`),
        candidates,
        children: [{ tokens: ship, candidates: shipEnds }],
      });
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

/**
 * With the real model: branches long enough for llama.cpp's tiled attention kernel (64 tokens
 * or more) give the same logits, to the bit, alone and beside branches that share most of their
 * start: every token goes through the kernel it would alone (kernel-split.ts). Before the cut
 * was aligned, the same 103-token branch moved by up to 0.3 in log-probability.
 */
describe("kernel-aligned calls on the real model", () => {
  let engine: LlamaEngine;
  beforeAll(async () => {
    engine = await openLlamaEngine({
      modelPath: inject("modelPath"),
      contextSize: 2048,
      prefixCacheBytes: 0,
      parallelBranches: 1,
    });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("gives a long branch the same logits alone and among others", async () => {
    const prefix = await engine.tokenize(
      "Ticket: my parcel arrived two weeks late, the box was crushed and I was charged twice.\n",
    );
    const teams =
      "billing: Payments, invoices, refunds\nshipping: Deliveries and damaged parcels\n" +
      "technical: Bugs and outages\nsales: Pricing and new contracts\n" +
      "legal: Contracts, disputes and compliance\naccounts: Sign-in, passwords and profiles\n" +
      "returns: Returning items and exchanges\nfeedback: Praise and suggestions\n";
    const candidates = await engine.tokenize(" billing shipping technical sales");
    const branches = [];
    for (const q of [
      "Which team should handle this first?",
      "Which team should be told?",
      "Which team would a customer pick?",
    ])
      branches.push({ tokens: await engine.tokenize(`${teams}${q}\nAnswer:`), candidates });
    for (const b of branches) expect(b.tokens.length).toBeGreaterThan(64);
    const together = await engine.score({ prefix, branches });
    for (const [i, b] of branches.entries()) {
      const alone = await engine.score({ prefix, branches: [b] });
      expect(together.branches[i]!.logprobs).toEqual(alone.branches[0]!.logprobs);
    }
  });
});
