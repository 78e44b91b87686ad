import type { LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { Decider } from "../src/decision/decide.js";
import { scoreRequestOf } from "../src/decision/plan.js";
import { LIST_WINDOWS_FROM_TOKENS } from "../src/decision/list-windows.js";
import { TUNED_READOUT } from "../src/decision/options.js";
import type { DecisionRequest } from "../src/decision/types.js";
import { planDecode } from "../src/engine/decode/index.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";
import { parseSequenceState, type SequenceState } from "../src/engine/llama/sequence-state.js";
import { ropeShiftOf, WINDOWS_RETRY_MS } from "../src/engine/llama/windowed-lead.js";
import { halfToFloat } from "../src/models/dequantize.js";
import type { ScoreRequest, ScoreResult } from "../src/engine/types.js";
import { cellsOf } from "./support/state-cells.js";

/**
 * Option lines in windows on the real model (docs/decisions/113): each window of a request's lead
 * is evaluated seeing the prefix and itself only, then put in place; the request answers the same
 * to the bit alone, asked again, from a snapshot, and after giving the model up between two
 * windows, and a request without those windows takes over only what is the same for it.
 */

/** One choice of `count` described queues: a lead of about 20 tokens a queue. */
function routing(state: string, count: number): DecisionRequest {
  return {
    state,
    questions: [
      [
        "queue",
        {
          type: "choice",
          instructions: "Which queue owns this ticket?",
          options: Array.from({ length: count }, (_, i) => [
            `queue_${i + 1}`,
            `Tickets about product area number ${i + 1}: its invoices, outages and refunds`,
          ]),
        },
      ],
    ],
  };
}

/** `request` with its lead cut into windows of `size` tokens, up to the lead's last 64 or more. */
function windowed(request: ScoreRequest, size: number): ScoreRequest {
  const { lead } = planDecode(request, { shared: 0, length: 0 }, { lanes: 1, batchSize: 512 });
  const count = Math.floor((lead.length - 64) / size);
  return { ...request, windows: Array.from({ length: count }, (_, i) => (i + 1) * size) };
}

/** An engine of the real model with a prefix cache (windows need it), decode calls of 512 at most. */
function engineOf(callBudgetMs?: number): Promise<LlamaEngine> {
  return openLlamaEngine({
    modelPath: inject("modelPath"),
    contextSize: 2048,
    batchSize: 512,
    ...(callBudgetMs === undefined ? {} : { callBudgetMs }),
  });
}

/**
 * Puts `save` in place of how the engine's sequence 0 saves its state to a file; `save` gets the
 * sequence's own saving as `real`.
 */
function onStateSave(
  engine: LlamaEngine,
  save: (path: string, real: (path: string) => Promise<void>) => Promise<void>,
): void {
  const sequence = (engine as any).prefixSequence as {
    saveStateToFile: (path: string) => Promise<void>;
  };
  const real = sequence.saveStateToFile.bind(sequence);
  sequence.saveStateToFile = (path) => save(path, real);
}

describe("a lead evaluated in windows", () => {
  let engine: LlamaEngine;
  let plain: ScoreRequest;
  let request: ScoreRequest;
  let alone: ScoreResult;
  /** `plain` on a cold engine: the list evaluated whole. */
  let whole: ScoreResult;
  beforeAll(async () => {
    engine = await engineOf();
    const decider = new Decider(engine, { contentFree: false });
    plain = scoreRequestOf(await decider.plan(routing("My refund has not arrived.", 40)));
    request = windowed(plain, 128);
    alone = await engine.score(request);
    const cold = await engineOf();
    try {
      whole = await cold.score(plain);
    } finally {
      await cold.close();
    }
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("is evaluated in windows, and answers again from the lead it kept, to the bit", async () => {
    expect(request.windows!.length).toBeGreaterThanOrEqual(4);
    expect(alone.cachedPrefixTokens).toBe(0);
    expect(alone.leadWindows).toBe(request.windows!.length);
    expect(whole.leadWindows).toBeUndefined();
    // Without windows the later option lines see the earlier ones, and the logits differ.
    expect(whole.branches).not.toEqual(alone.branches);
    const again = await engine.score(request);
    expect(again.cachedPrefixTokens).toBeGreaterThanOrEqual(
      request.prefix.length + request.windows!.at(-1)!,
    );
    expect(again.branches).toEqual(alone.branches);
    expect(again.leadWindows).toBe(request.windows!.length);
    // Another state in between: the windowed lead comes back from its snapshot.
    const decider = new Decider(engine, { contentFree: false });
    const other = windowed(
      scoreRequestOf(await decider.plan(routing("The app crashed.", 40))),
      128,
    );
    await engine.score(other);
    await engine.idle();
    const later = await engine.score(request);
    expect(later.cachedPrefixTokens).toBe(again.cachedPrefixTokens);
    expect(later.branches).toEqual(alone.branches);
  });

  it("lets a request without windows take over its first window only, as a cold engine answers", async () => {
    await engine.score(request);
    const warm = await engine.score(plain);
    expect(warm.cachedPrefixTokens).toBe(plain.prefix.length + request.windows![0]!);
    const cold = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 2048 });
    try {
      expect((await cold.score(plain)).branches).toEqual(warm.branches);
      // And the other way: the windowed request after the whole lead evaluates its windows.
      await engine.idle();
      const after = await engine.score(request);
      expect(after.cachedPrefixTokens).toBe(request.prefix.length);
      expect(after.branches).toEqual(alone.branches);
    } finally {
      await cold.close();
    }
  });

  it("gives the model up between two windows to a request waiting, and answers as alone", async () => {
    const busy = await engineOf();
    try {
      const decider = new Decider(busy, { contentFree: false });
      const short = scoreRequestOf(await decider.plan(routing("Short.", 2)));
      const order: string[] = [];
      const [long] = await Promise.all([
        busy.score(request).then((result) => (order.push("long"), result)),
        busy.score(short).then((result) => (order.push("short"), result)),
      ]);
      expect(order).toEqual(["short", "long"]);
      expect(long.branches).toEqual(alone.branches);
      expect(long.evaluatedTokens).toBe(alone.evaluatedTokens);
      // The state its windows went into while it waited was loaded and removed.
      const folder = (busy as any).prefixCache.directory as string;
      expect(readdirSync(folder).filter((f) => f.startsWith("windows.kv"))).toEqual([]);
    } finally {
      await busy.close();
    }
  });

  it("evaluates the list whole for a minute when a window's state cannot be written", async () => {
    const fresh = await engineOf();
    try {
      let failed = 0;
      // What node-llama-cpp reports for a full /dev/shm: a plain error, no code.
      onStateSave(fresh, (path, save) => {
        if (path.endsWith("windows.kv") && failed++ === 0)
          return Promise.reject(new Error("Failed to save state to file"));
        return save(path);
      });
      const fellBack = await fresh.score(request);
      expect(fellBack.branches).toEqual(whole.branches);
      expect(fellBack.leadWindows).toBeUndefined();
      expect(fellBack.windowsOff).toBeGreaterThan(WINDOWS_RETRY_MS - 10_000);
      expect(fellBack.windowsOff).toBeLessThanOrEqual(WINDOWS_RETRY_MS);
      expect(fresh.evaluatesWindows).toBe(false);
      expect(failed).toBe(1);
      const decider = new Decider(fresh, { contentFree: false });
      const other = windowed(scoreRequestOf(await decider.plan(routing("Where is it?", 40))), 128);
      // Read whole, and not the request that turned windows off.
      const next = await fresh.score(other);
      expect(next.leadWindows).toBeUndefined();
      expect(next.windowsOff).toBeUndefined();
      expect(failed).toBe(1);
      // A minute later (a full /dev/shm is often freed) windows are tried again.
      const start = Date.now();
      const clock = vi.spyOn(Date, "now").mockImplementation(() => start + WINDOWS_RETRY_MS);
      try {
        expect(fresh.evaluatesWindows).toBe(true);
        const again = await fresh.score(other);
        expect(again.leadWindows).toBeGreaterThan(1);
        expect(again.windowsOff).toBeUndefined();
      } finally {
        clock.mockRestore();
      }
    } finally {
      await fresh.close();
    }
  });

  it("waits twice as long after each failure in a row, as for a state of another layout", async () => {
    const fresh = await engineOf();
    try {
      // A state file that is not llama.cpp's layout, as another build could write: every time.
      onStateSave(fresh, async (path, save) => {
        await save(path);
        if (path.endsWith("windows.kv")) writeFileSync(path, "GGSQ and nothing else");
      });
      const start = Date.now();
      let at = start;
      const clock = vi.spyOn(Date, "now").mockImplementation(() => at);
      try {
        const decider = new Decider(fresh, { contentFree: false });
        const offs: (number | undefined)[] = [];
        for (let k = 0; k < 3; k++) {
          // A new state each time: no lead kept from the request before.
          const plan = await decider.plan(routing(`Where is parcel ${k}?`, 40));
          const fellBack = await fresh.score(windowed(scoreRequestOf(plan), 128));
          expect(fellBack.leadWindows).toBeUndefined();
          offs.push(fellBack.windowsOff);
          at += fellBack.windowsOff ?? 0;
        }
        expect(offs).toEqual([WINDOWS_RETRY_MS, 2 * WINDOWS_RETRY_MS, 4 * WINDOWS_RETRY_MS]);
      } finally {
        clock.mockRestore();
      }
    } finally {
      await fresh.close();
    }
  });

  it("stops between windows when cancelled, and the next request answers as alone", async () => {
    const fresh = await engineOf();
    try {
      // Cancelled as its first window is saved: it stops before the second.
      const controller = new AbortController();
      let saves = 0;
      onStateSave(fresh, (path, save) => {
        if (saves++ === 0) controller.abort(new Error("cancelled"));
        return save(path);
      });
      await expect(fresh.score(request, controller.signal)).rejects.toThrow("cancelled");
      expect(saves).toBe(1);
      // Nothing of its windows is left on disk (in /dev/shm: memory), nor of the next request's.
      const folder = (fresh as any).prefixCache.directory as string;
      const windowFiles = () => readdirSync(folder).filter((f) => f.startsWith("windows.kv"));
      expect(windowFiles()).toEqual([]);
      const next = await fresh.score(request);
      expect(next.branches).toEqual(alone.branches);
      expect(next.leadWindows).toBeGreaterThan(1);
      expect(windowFiles()).toEqual([]);
    } finally {
      await fresh.close();
    }
  });
});

describe("windows planned by the Decider", () => {
  it("cuts a lone question's list of thousands of tokens into windows, and no other", async () => {
    const engine = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 8192 });
    try {
      const decider = new Decider(engine, TUNED_READOUT);
      const many = routing("My refund has not arrived.", 160);
      const plan = await decider.plan(many);
      const ends = plan.windows!;
      expect(ends.at(-1)).toBeGreaterThanOrEqual(LIST_WINDOWS_FROM_TOKENS);
      expect(ends.at(-1)).toBeLessThan(plan.branches[0]!.tokens.length);
      expect(
        (await decider.plan(routing("My refund has not arrived.", 40))).windows,
      ).toBeUndefined();
      const off = new Decider(engine, { ...TUNED_READOUT, listWindows: false });
      expect((await off.plan(many)).windows).toBeUndefined();
      const two = await decider.plan({
        ...many,
        questions: [...many.questions, ["again", many.questions[0]![1]]],
      });
      expect(two.windows).toBeUndefined();
      // An engine that does not evaluate windows (a remote one) is not given any.
      const remote = Object.create(engine, { evaluatesWindows: { value: false } }) as LlamaEngine;
      expect((await new Decider(remote, TUNED_READOUT).plan(many)).windows).toBeUndefined();
    } finally {
      await engine.close();
    }
  });

  it(
    "reads a question's content-free priors in its windows too",
    { timeout: 600_000 },
    async () => {
      const engine = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 8192 });
      try {
        const seen: ScoreRequest[] = [];
        const score = engine.score.bind(engine);
        engine.score = (request, signal) => (seen.push(request), score(request, signal));
        const decider = new Decider(engine, { ...TUNED_READOUT, contentFree: true });
        const result = await decider.decide(routing("My refund has not arrived.", 120));
        // Three content-free states, then the request itself.
        expect(seen.length).toBe(4);
        expect(seen.at(-1)!.windows!.length).toBeGreaterThanOrEqual(4);
        // What its log line and Server-Timing say: the windows planned, and those read.
        const { planned, read, off } = result.stats.listWindows!;
        expect(planned).toBe(seen.at(-1)!.windows!.length);
        expect(read).toBeGreaterThan(1);
        expect(read).toBeLessThanOrEqual(planned);
        expect(off).toBeUndefined();
        for (const request of seen) expect(request.windows).toEqual(seen.at(-1)!.windows);
      } finally {
        await engine.close();
      }
    },
  );
});

describe("keys turned to another position", () => {
  it("are what llama.cpp's own shift of the KV cache makes of them", async () => {
    // The engine's own llama.cpp binding, model and sequence 0: no other build is loaded.
    const engine = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 1024 });
    const model = (engine as any).llamaModel as LlamaModel;
    const sequence = (engine as any).prefixSequence as LlamaContextSequence;
    const folder = mkdtempSync(join(tmpdir(), "decisiond-rope-"));
    try {
      const rotate = ropeShiftOf(model)!;
      expect(rotate).toBeDefined();
      const a = model.tokenize("Alpha beta gamma delta. ".repeat(12));
      const b = model.tokenize(" The quick brown fox jumps over the lazy dog.".repeat(4));
      const saved = async (name: string): Promise<SequenceState> => {
        await sequence.saveStateToFile(join(folder, name));
        return parseSequenceState(readFileSync(join(folder, name)));
      };
      await sequence.evaluateWithoutGeneratingNewTokens([...a, ...b]);
      // b's cells moved 40 positions back by the engine's own writer, its keys turned.
      const moved = await cellsOf(
        await saved("before"),
        a.length,
        a.length + b.length,
        -40,
        rotate,
      );
      // Erasing 40 tokens before b moves b 40 positions back: llama.cpp turns its keys itself.
      await sequence.eraseContextTokenRanges([{ start: a.length - 40, end: a.length }]);
      await sequence.evaluateWithoutGeneratingNewTokens(model.tokenize(" end"));
      const start = a.length - 40;
      const after = await cellsOf(await saved("after"), start, start + b.length);
      expect(moved.positions).toEqual(after.positions);
      let worst = 0;
      for (let layer = 0; layer < moved.keys.length; layer++) {
        const turned = new Uint16Array(Uint8Array.from(moved.keys[layer]!.data).buffer);
        const native = new Uint16Array(Uint8Array.from(after.keys[layer]!.data).buffer);
        turned.forEach((h, i) => {
          worst = Math.max(worst, Math.abs(halfToFloat(h) - halfToFloat(native[i]!)));
        });
      }
      // The values are not turned: llama.cpp's are the ones evaluated.
      expect(moved.values[3]!.data.equals(after.values[3]!.data)).toBe(true);
      // f16 rounding of keys of size 10 or so.
      expect(worst).toBeLessThan(0.02);
    } finally {
      rmSync(folder, { recursive: true, force: true });
      await engine.close();
    }
  });
});
