import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { openLlamaEngine } from "../src/engine/llama/index.js";
import type { Engine } from "../src/engine/types.js";
import type { EvalItem } from "../src/evaluation/format.js";
import { computeMetrics, runEvaluation, summarize } from "../src/evaluation/runner.js";
import {
  openNodeLlamaCppBaseline,
  oursSystem,
  type DecisionSystem,
} from "../src/evaluation/systems.js";

/** Three items, one per question type: one evaluation through the real model and node-llama-cpp. */
const ITEMS: EvalItem[] = [
  {
    id: "toy:1",
    request: {
      model: "m",
      state: "A charming and often affecting journey.",
      questions: { s: { type: "noul", instructions: "Is the sentiment of the text positive?" } },
    },
    expected: { s: true },
  },
  {
    id: "toy:2",
    request: {
      model: "m",
      state: "The striker scored twice as the home team won the cup final.",
      questions: {
        t: {
          type: "choice",
          instructions: "What is the topic of this news article?",
          criteria: { World: null, Sports: null, Business: null },
        },
      },
    },
    expected: { t: "Sports" },
  },
  {
    id: "toy:3",
    request: {
      model: "m",
      state: "Dull, lifeless and far too long.",
      questions: {
        r: {
          type: "score",
          instructions: "How positive is this review?",
          criteria: ["Negative", "Mixed", "Positive"],
        },
      },
    },
    expected: { r: 0 },
  },
];

describe("evaluation on the real model", () => {
  let engine: Engine;
  let baseline: DecisionSystem;

  beforeAll(async () => {
    engine = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 2048 });
    baseline = await openNodeLlamaCppBaseline({
      modelPath: inject("modelPath"),
      contextSize: 2048,
    });
  });

  afterAll(async () => {
    await baseline?.close();
    await engine?.close();
  });

  it(
    "evaluates 3 items with ours and node-llama-cpp side by side",
    { timeout: 300_000 },
    async () => {
      const runs = await runEvaluation(ITEMS, [oursSystem(engine, "off"), baseline]);
      expect(runs.map((r) => r.name)).toEqual(["ours", "node-llama-cpp"]);
      for (const run of runs) {
        expect(run.errors).toEqual([]);
        expect(run.answeredItems).toBe(3);
        expect(run.outcomes).toHaveLength(3);
        for (const o of run.outcomes) {
          expect(o.probabilities.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
          expect(o.probabilities.every((p) => p >= 0 && p <= 1)).toBe(true);
        }
        const choice = run.outcomes.find((o) => o.type === "choice")!;
        expect(choice.classes).toContain(choice.reorderedTop);
        const m = computeMetrics(run.outcomes);
        expect(m.n).toBe(3);
        expect(m.nll).toBeGreaterThan(0);
        expect(Number.isFinite(m.ece)).toBe(true);
        expect(Number.isFinite(m.mae)).toBe(true);
        expect(m.flipN).toBe(1);
      }
      expect(summarize(runs)[0]!.group).toBe("all");
    },
  );
});
