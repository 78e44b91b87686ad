import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { Decider } from "../src/decision/decide.js";
import type { DecisionRequest } from "../src/decision/types.js";
import {
  openLlamaEngine,
  SNAPSHOT_WRITE_DELAY_MS,
  type LlamaEngine,
} from "../src/engine/llama/index.js";
import { commonPrefixLength, PrefixSnapshotCache } from "../src/engine/llama/prefix-cache.js";
import { TOPIC_QUESTIONS } from "./support/questions.js";

/**
 * Issue 5: the prefix cache. A state seen before, even with other states in between, skips its
 * prefill, and the answers are the same as when it was evaluated.
 */

function state(seed: string): string {
  return (
    `${seed}: ` + "The striker scored twice as United beat City in the league final. ".repeat(12)
  );
}

function request(seed: string): DecisionRequest {
  return { state: state(seed), questions: TOPIC_QUESTIONS };
}

/** One choice of `count` described teams about `state(seed)`: long enough to have a lead. */
function routing(seed: string, count: number, instructions = "Which team?"): DecisionRequest {
  const teams: [string, string][] = Array.from({ length: count }, (_, i) => [
    `team_${i + 1}`,
    `Handles tickets about product area number ${i + 1} and its billing`,
  ]);
  return {
    state: state(seed),
    questions: [["team", { type: "choice", instructions, options: teams }]],
  };
}

describe("prefix cache on the real model", () => {
  let engine: LlamaEngine;
  let decider: Decider;
  beforeAll(async () => {
    engine = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 1024 });
    decider = new Decider(engine);
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("answers a state seen before without evaluating its prefix again, with the same answer", async () => {
    const first = await decider.decide(request("alpha"));
    const prefixLength = (await decider.plan(request("alpha"))).prefix.length;
    expect(first.stats.cachedPrefixTokens).toBeLessThan(prefixLength);
    await decider.decide(request("bravo"));
    await decider.decide(request("charlie"));
    const again = await decider.decide(request("alpha"));
    expect(again.stats.cachedPrefixTokens).toBe(prefixLength);
    expect(engine.prefixCache!.stats.loaded).toBeGreaterThanOrEqual(1);
    const p1 = first.answers.topic!;
    const p2 = again.answers.topic!;
    if (p1.type !== "choice" || p2.type !== "choice") throw new Error("not a choice");
    for (const id of ["sports", "business", "technology"])
      expect(p2.probabilities[id]).toBeCloseTo(p1.probabilities[id]!, 5);
  });

  it("answers a state that extends the previous one as a cold engine does, to the bit", async () => {
    // The longer state takes over the shorter one's prefix only as far as both cut it into
    // decode calls alike (src/engine/decode/kernel-split.ts), so its logits match a fresh evaluation.
    // Extended by a few tokens (the last 64 are evaluated again, as one tiled call) and by more
    // than 64 (only the new ones are evaluated).
    for (const [seed, more] of [
      ["hotel", "The referee added six minutes."],
      ["india", "The referee added six minutes. ".repeat(12)],
    ] as const) {
      const cold = await openLlamaEngine({
        modelPath: inject("modelPath"),
        contextSize: 1024,
        prefixCacheBytes: 0,
      });
      try {
        const short = await decider.plan(request(seed));
        const long = await decider.plan({
          state: `${state(seed)} ${more}`,
          questions: TOPIC_QUESTIONS,
        });
        await engine.score({ prefix: short.prefix, branches: short.branches });
        const warm = await engine.score({ prefix: long.prefix, branches: long.branches });
        const fresh = await cold.score({ prefix: long.prefix, branches: long.branches });
        expect(warm.cachedPrefixTokens).toBeGreaterThan(short.prefix.length - 64);
        expect(fresh.cachedPrefixTokens).toBe(0);
        expect(warm.branches.map((b) => b.logprobs)).toEqual(fresh.branches.map((b) => b.logprobs));
      } finally {
        await cold.close();
      }
    }
  });

  it("writes the last state's snapshot after the request, not while the next one waits", async () => {
    const cache = engine.prefixCache!;
    await decider.decide(request("delta"));
    const saved = cache.stats.saved;
    // The write-behind comes SNAPSHOT_WRITE_DELAY_MS later, on its own.
    await vi.waitFor(() => expect(cache.stats.saved).toBe(saved + 1), {
      timeout: 5000,
      interval: SNAPSHOT_WRITE_DELAY_MS,
    });
    const delta = (await decider.plan(request("delta"))).prefix;
    expect(cache.find(delta)?.shared).toBe(delta.length);
    // The next state drops delta from sequence 0 without writing it again first.
    await decider.decide(request("echo"));
    expect(cache.stats.saved).toBe(saved + 1);
    await engine.idle();
    expect(cache.stats.saved).toBe(saved + 2);
    // A request that comes before the write-behind writes its predecessor itself (once).
    await decider.decide(request("foxtrot"));
    await decider.decide(request("golf"));
    expect(cache.stats.saved).toBe(saved + 3);
    const foxtrot = (await decider.plan(request("foxtrot"))).prefix;
    expect(cache.find(foxtrot)?.shared).toBe(foxtrot.length);
    await engine.idle();
    expect(cache.stats.saved).toBe(saved + 4);
  });

  it("answers one long question asked again of the same state from the lead it kept, to the bit", async () => {
    // Twenty described teams: the question is past 64 tokens, so its tokens before the last
    // call are the plan's lead, which sequence 0 keeps after the request.
    const plan = await decider.plan(routing("kilo", 20));
    const total = plan.prefix.length + plan.branches[0]!.tokens.length;
    const first = await engine.score({ prefix: plan.prefix, branches: plan.branches });
    const again = await engine.score({ prefix: plan.prefix, branches: plan.branches });
    expect(again.cachedPrefixTokens).toBeGreaterThan(plan.prefix.length + 64);
    expect(again.cachedPrefixTokens).toBeLessThan(total);
    expect(again.evaluatedTokens + again.cachedPrefixTokens).toBe(
      first.evaluatedTokens + first.cachedPrefixTokens,
    );
    expect(again.branches).toEqual(first.branches);
    // Another state in between: the state and its lead come back from the prefix cache.
    const other = await decider.plan(routing("lima", 20));
    await engine.score({ prefix: other.prefix, branches: other.branches });
    await engine.idle();
    const later = await engine.score({ prefix: plan.prefix, branches: plan.branches });
    expect(later.cachedPrefixTokens).toBe(again.cachedPrefixTokens);
    expect(later.branches).toEqual(first.branches);
    // The same state and teams asked another way: the teams' lines are taken over, and the
    // answer is a cold engine's.
    const reworded = await decider.plan(routing("kilo", 20, "Which team should take it?"));
    const warm = await engine.score({ prefix: reworded.prefix, branches: reworded.branches });
    expect(warm.cachedPrefixTokens).toBeGreaterThan(plan.prefix.length + 64);
    const cold = await openLlamaEngine({
      modelPath: inject("modelPath"),
      contextSize: 1024,
      prefixCacheBytes: 0,
    });
    try {
      const fresh = await cold.score({ prefix: reworded.prefix, branches: reworded.branches });
      expect(fresh.cachedPrefixTokens).toBe(0);
      expect(warm.branches).toEqual(fresh.branches);
    } finally {
      await cold.close();
    }
    // Two questions over the same teams share their lines as the lead of a request of both,
    // which may end in a one-row part: a later request takes over only its tiled part.
    const both = await decider.plan({
      state: state("kilo"),
      questions: [
        ...routing("kilo", 20).questions,
        ...routing("kilo", 20, "Which team should take it?").questions,
      ].map(([id, q], i) => [`${id}${i}`, q] as const),
    });
    await engine.score({ prefix: both.prefix, branches: both.branches });
    const after = await engine.score({ prefix: plan.prefix, branches: plan.branches });
    expect(after.cachedPrefixTokens).toBeGreaterThan(plan.prefix.length + 64);
    expect(after.branches).toEqual(first.branches);
    // The same state with another question takes over the state, not the other lead.
    const asked = await decider.plan({ state: state("kilo"), questions: TOPIC_QUESTIONS });
    const topic = await engine.score({ prefix: asked.prefix, branches: asked.branches });
    expect(topic.cachedPrefixTokens).toBe(asked.prefix.length);
  });

  it("lets a request sent again after it was cancelled take over the part of its lead evaluated", async () => {
    // Sixty teams, a lead of about 1,100 tokens, in calls of about 256 (a 1 ms call budget).
    const paced = await openLlamaEngine({
      modelPath: inject("modelPath"),
      contextSize: 2048,
      callBudgetMs: 1,
    });
    try {
      const plan = await new Decider(paced).plan(routing("mike", 60));
      const request = { prefix: plan.prefix, branches: plan.branches };
      const controller = new AbortController();
      const cancelled = paced.score(request, controller.signal);
      // Cancelled once the first of its lead's calls is done, as a client that gives up.
      await vi.waitFor(() => expect(paced.counters.branchTokensEvaluated).toBeGreaterThan(0), {
        timeout: 60_000,
        interval: 5,
      });
      controller.abort(new Error("the client left"));
      await expect(cancelled).rejects.toThrow("the client left");
      const retry = await paced.score(request);
      const lead = plan.branches[0]!.tokens.length;
      expect(retry.cachedPrefixTokens).toBeGreaterThan(plan.prefix.length);
      expect(retry.cachedPrefixTokens).toBeLessThan(plan.prefix.length + lead - 64);
      const whole = await paced.score(request);
      // Asked a third time, the whole lead the retry finished.
      expect(whole.cachedPrefixTokens).toBeGreaterThan(retry.cachedPrefixTokens);
      expect(retry.branches).toEqual(whole.branches);
      const cold = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 2048 });
      try {
        expect((await cold.score(request)).branches).toEqual(retry.branches);
      } finally {
        await cold.close();
      }
    } finally {
      await paced.close();
    }
  });

  it("keeps one snapshot file per cached prefix in its own folder", async () => {
    const dir = engine.prefixCache!.directory;
    expect(readdirSync(dir).length).toBe(engine.prefixCache!.size);
    expect(engine.prefixCache!.size).toBeGreaterThanOrEqual(2);
  });
});

describe("prefix cache bounds", () => {
  it("keeps no more bytes than its budget, dropping the least recently used", async () => {
    // One SmolLM2 snapshot of a ~200-token prefix is ~5 MB; 8 MB holds one at a time.
    const engine = await openLlamaEngine({
      modelPath: inject("modelPath"),
      contextSize: 1024,
      prefixCacheBytes: 8 * 1024 * 1024,
    });
    try {
      const decider = new Decider(engine);
      const prefixLength = (await decider.plan(request("alpha"))).prefix.length;
      for (const seed of ["alpha", "bravo", "charlie"]) await decider.decide(request(seed));
      const cache = engine.prefixCache!;
      expect(cache.bytes).toBeLessThanOrEqual(8 * 1024 * 1024);
      expect(cache.size).toBe(1);
      // alpha was dropped for bravo: it is evaluated again (only the shared head is reused).
      const again = await decider.decide(request("alpha"));
      expect(again.stats.cachedPrefixTokens).toBeLessThan(prefixLength);
    } finally {
      const dir = engine.prefixCache!.directory;
      await engine.close();
      expect(() => readdirSync(dir)).toThrow();
    }
  });

  it("is off with a budget of 0: only the last prefix is reused", async () => {
    const engine = await openLlamaEngine({
      modelPath: inject("modelPath"),
      contextSize: 1024,
      prefixCacheBytes: 0,
    });
    try {
      const decider = new Decider(engine);
      const prefixLength = (await decider.plan(request("alpha"))).prefix.length;
      await decider.decide(request("alpha"));
      const same = await decider.decide(request("alpha"));
      expect(same.stats.cachedPrefixTokens).toBe(prefixLength);
      await decider.decide(request("bravo"));
      const again = await decider.decide(request("alpha"));
      expect(engine.prefixCache).toBeUndefined();
      expect(again.stats.cachedPrefixTokens).toBeLessThan(prefixLength);
    } finally {
      await engine.close();
    }
  });
});

describe("PrefixSnapshotCache", () => {
  it("rejects a budget that is not positive", () => {
    expect(() => new PrefixSnapshotCache({ maxBytes: 0 })).toThrow(RangeError);
  });

  it("removes the snapshot folders of processes that are gone, and keeps the others", () => {
    const parent = mkdtempSync(join(tmpdir(), "decisiond-test-"));
    try {
      // A pid that surely ended: a child process that has exited.
      const gone = spawnSync(process.execPath, ["-e", ""]).pid!;
      mkdirSync(join(parent, `decisiond-prefixes-${gone}-abc`));
      mkdirSync(join(parent, `decisiond-prefixes-${process.ppid}-def`)); // a running process
      mkdirSync(join(parent, "unrelated"));
      const cache = new PrefixSnapshotCache({ maxBytes: 1024, parentDirectory: parent });
      const names = readdirSync(parent);
      expect(names).not.toContain(`decisiond-prefixes-${gone}-abc`);
      expect(names).toContain(`decisiond-prefixes-${process.ppid}-def`);
      expect(names).toContain("unrelated");
      expect(cache.directory.startsWith(join(parent, `decisiond-prefixes-${process.pid}-`))).toBe(
        true,
      );
      cache.close();
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it("finds nothing when empty", () => {
    const cache = new PrefixSnapshotCache({ maxBytes: 1024 });
    try {
      expect(cache.find([1, 2, 3])).toBeUndefined();
    } finally {
      cache.close();
    }
  });
});

describe("commonPrefixLength", () => {
  it("counts the tokens two arrays share from the start", () => {
    expect(commonPrefixLength([1, 2, 3], [1, 2, 4])).toBe(2);
    expect(commonPrefixLength([1, 2], [1, 2, 3])).toBe(2);
    expect(commonPrefixLength([], [1])).toBe(0);
    expect(commonPrefixLength([5], [6])).toBe(0);
  });
});
