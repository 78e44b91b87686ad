import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mulberry32 } from "../src/evaluation/format.js";
import { afterAll, describe, expect, it } from "vitest";
import { softmax } from "../src/decision/math.js";
import { temperatureFor } from "../src/decision/calibration.js";
import { fitKeys, temperaturesOf } from "../src/evaluation/fit.js";
import { outcomesOfReports } from "../src/evaluation/saved-run.js";
import type { QuestionOutcome } from "../src/evaluation/runner.js";
import {
  applyTemperature,
  fitTemperature,
  MIN_TEMPERATURE,
  nllAtTemperature,
  type TemperatureSample,
} from "../src/evaluation/temperature.js";

const rng = mulberry32;

/** Standard normal by Box–Muller. */
function normal(random: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

/**
 * Synthetic data with a known temperature: logits z ~ N(0, scale²) per class, labels drawn from
 * softmax(z / T*). The model's "log-probabilities" are log softmax(z) (T = 1), so the best
 * temperature to apply to them is T*.
 */
function synthetic(
  n: number,
  classes: number,
  trueT: number,
  seed: number,
  scale = 2.5,
): TemperatureSample[] {
  const random = rng(seed);
  return Array.from({ length: n }, () => {
    const z = Array.from({ length: classes }, () => scale * normal(random));
    const p = softmax(z, trueT);
    let u = random();
    let label = 0;
    while (label < classes - 1 && u >= p[label]!) u -= p[label++]!;
    return { logprobs: softmax(z).map(Math.log), label };
  });
}

describe("temperature fit on synthetic data with a known temperature", () => {
  for (const [trueT, classes, seed] of [
    [2, 4, 1],
    [0.5, 2, 2],
    [1.4, 10, 3],
  ] as const) {
    it(`recovers T* = ${trueT} (${classes} classes)`, () => {
      const samples = synthetic(5000, classes, trueT, seed);
      const fit = fitTemperature(samples);
      expect(Math.abs(fit.temperature - trueT)).toBeLessThan(0.1 * trueT);
      expect(fit.nllAfter).toBeLessThanOrEqual(fit.nllBefore + 1e-12);
      expect(fit.atBound).toBe(false);
      // The fit is a minimum: nearby temperatures are not better.
      expect(nllAtTemperature(samples, fit.temperature * 1.02)).toBeGreaterThanOrEqual(
        fit.nllAfter - 1e-12,
      );
      expect(nllAtTemperature(samples, fit.temperature / 1.02)).toBeGreaterThanOrEqual(
        fit.nllAfter - 1e-12,
      );
    });
  }

  it("leaves a calibrated model at T ≈ 1", () => {
    const fit = fitTemperature(synthetic(5000, 3, 1, 4));
    expect(fit.temperature).toBeGreaterThan(0.9);
    expect(fit.temperature).toBeLessThan(1.1);
  });

  it("returns the bound when the data want an ever sharper distribution", () => {
    // Every label is the top class: NLL keeps falling as T → 0.
    const samples: TemperatureSample[] = [
      { logprobs: [Math.log(0.6), Math.log(0.4)], label: 0 },
      { logprobs: [Math.log(0.3), Math.log(0.7)], label: 1 },
    ];
    const fit = fitTemperature(samples);
    expect(fit.temperature).toBeCloseTo(MIN_TEMPERATURE, 6);
    expect(fit.atBound).toBe(true);
  });

  it("computes NLL(T) by hand", () => {
    // p = [.8, .2], label 1, T = 2: p' ∝ [√.8, √.2] = [2/√5, 1/√5] → p'(1) = 1/3, NLL = ln 3
    const samples = [{ logprobs: [Math.log(0.8), Math.log(0.2)], label: 1 }];
    expect(nllAtTemperature(samples, 2)).toBeCloseTo(Math.log(3), 12);
    expect(applyTemperature([0.8, 0.2], 2)[1]).toBeCloseTo(1 / 3, 12);
  });
});

describe("fitting a profile per calibration key", () => {
  it("groups outcomes by (type, option-count bucket) and skips keys with too few questions", () => {
    const samples = synthetic(400, 4, 2, 5);
    const outcome = (
      s: TemperatureSample,
      i: number,
      type: "choice" | "noul",
      n: number,
    ): QuestionOutcome => ({
      item: `x:${i}`,
      question: "q",
      dataset: "x",
      type,
      classes: Array.from({ length: n }, (_, k) => String(k)),
      gold: Math.min(s.label, n - 1),
      probabilities: n === 4 ? s.logprobs.map(Math.exp) : [0.5, 0.5],
    });
    const outcomes = [
      ...samples.map((s, i) => outcome(s, i, "choice", 4)),
      ...samples.slice(0, 5).map((s, i) => outcome(s, i, "noul", 2)),
    ];
    const keys = fitKeys(outcomes, 30);
    expect(keys.map((k) => k.key)).toEqual(["choice", "choice:3-4", "noul", "noul:2"]);
    const [type, choice, noulType, noul] = keys;
    expect(choice!.n).toBe(400);
    expect(choice!.temperature).toBeGreaterThan(1.6);
    expect(choice!.temperature).toBeLessThan(2.5);
    expect(choice!.eceAfter).toBeLessThan(choice!.eceBefore);
    // The type's fallback saw the same 400 questions.
    expect(type!.temperature).toBe(choice!.temperature);
    expect(noul!.temperature).toBeUndefined();
    expect(noulType!.temperature).toBeUndefined();
    const temperatures = temperaturesOf(keys);
    expect(Object.keys(temperatures)).toEqual(["choice", "choice:3-4"]);
    // A 6-option choice has no bucket key here: it takes its type's temperature; noul none.
    const profile = { model: "m", temperatures };
    expect(temperatureFor(profile, "choice", 6)).toBe(type!.temperature);
    expect(temperatureFor(profile, "noul", 2)).toBe(1);
    expect(
      temperatureFor({ model: "m", temperatures: { choice: 3, "choice:5-8": 1.5 } }, "choice", 6),
    ).toBe(1.5);
  });
});

describe("fitting on saved eval reports (calibrate --outcomes)", () => {
  const outcome = (item: string, gold: number): QuestionOutcome => ({
    item,
    question: "q",
    dataset: "x",
    type: "noul",
    classes: ["true", "false"],
    gold,
    probabilities: [0.9, 0.1],
  });
  const dir = mkdtempSync(join(tmpdir(), "decisiond-fit-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let files = 0;
  const report = (
    profileId: string,
    outcomes: Record<string, QuestionOutcome[]>,
    extra: Record<string, unknown> = {},
  ) => {
    const file = join(dir, `run-${files++}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        model: { profileId },
        split: "fit",
        options: { debias: ["off"] },
        outcomes,
        ...extra,
      }),
    );
    return file;
  };

  it("takes the uncalibrated system of each report and counts an item's question once", () => {
    const first = report("m.decision", {
      ours: [outcome("x:1", 0), outcome("x:2", 1)],
      "ours+cal": [outcome("x:1", 0), outcome("x:2", 1)],
      "node-llama-cpp": [outcome("x:1", 0)],
    });
    const second = report("m.decision", { ours: [outcome("x:2", 0), outcome("x:3", 1)] });
    const run = outcomesOfReports([first, second]);
    expect(run.profileId).toBe("m.decision");
    expect(run.split).toBe("fit");
    expect(run.readout).toEqual({
      debias: "off",
      labels: "default",
      scoreLabels: "default",
      contentFree: "default",
      examples: "default",
      questionContrast: "default",
    });
    expect(run.answeredItems).toBe(3);
    expect(run.outcomes.map((o) => [o.item, o.gold])).toEqual([
      ["x:1", 0],
      ["x:2", 1],
      ["x:3", 1],
    ]);
  });

  it("refuses reports of another model, with no or several systems, or not reports at all", () => {
    const a = report("a", { ours: [outcome("x:1", 0)] });
    expect(() => outcomesOfReports([a, report("b", { ours: [] })])).toThrow(/answered by b/);
    expect(() => outcomesOfReports([report("a", { "ours+cal": [] })])).toThrow(/holds no/);
    expect(() => outcomesOfReports([report("a", { ours: [], "ours/reverse": [] })])).toThrow(
      /holds several/,
    );
    writeFileSync(join(dir, "x.json"), "{}");
    expect(() => outcomesOfReports([join(dir, "x.json")])).toThrow(/is not a `decisiond eval/);
    writeFileSync(join(dir, "bad.json"), "{");
    expect(() => outcomesOfReports([join(dir, "bad.json")])).toThrow(/bad\.json: /);
    const reverse = report("a", { ours: [] }, { options: { debias: ["reverse"] } });
    expect(() => outcomesOfReports([a, reverse])).toThrow(/fit one readout at a time/);
  });
});
