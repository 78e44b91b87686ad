import { describe, expect, it } from "vitest";
import {
  answersInCallerOrder,
  levelNumbers,
  MAX_SCALES_ASKED,
  neutralScale,
  ORIENTATION_MARGIN,
  reverseScales,
  ScaleOrientations,
  type ScaleProbe,
} from "../src/decision/orientation.js";
import { assemble } from "../src/decision/answer.js";
import type { DecisionRequest, Json, ScoreAnswer, ScoreQuestion } from "../src/decision/types.js";

/**
 * Which way a score scale runs (docs/decisions/115): asked of the model with its first and last
 * level texts as states on a neutral scale of the same question, once per question; a falling
 * scale is asked reversed and answered in the caller's order.
 */

const falling: ScoreQuestion = {
  type: "score",
  instructions: "How angry is the customer?",
  levels: ["very angry", "frustrated", "calm"],
};
const rising: ScoreQuestion = { ...falling, levels: ["calm", "frustrated", "very angry"] };

/**
 * A model that reads a level's number by its position on a rising scale: it places "very angry"
 * at the top position and "calm" at the bottom, whatever the scale's order; and, as the tuned
 * model often does, a state whose very text is one of the levels shown at that level's number.
 * Records its calls.
 */
function angerModel(): { probe: ScaleProbe; calls: string[] } {
  const calls: string[] = [];
  const placed: Record<string, number[]> = {
    "very angry": [0.1, 0.2, 0.7],
    calm: [0.8, 0.15, 0.05],
  };
  const probe: ScaleProbe = async (state: Json, question: ScoreQuestion) => {
    calls.push(`${String(state)} | ${question.levels.join(", ")}`);
    const shown = question.levels.indexOf(String(state));
    if (shown >= 0) return question.levels.map((_, i) => (i === shown ? 0.9 : 0.1 / 2));
    return placed[String(state)] ?? [1 / 3, 1 / 3, 1 / 3];
  };
  return { probe, calls };
}

const request = (question: ScoreQuestion): DecisionRequest => ({
  state: "I AM FURIOUS",
  questions: [
    ["anger", question],
    ["refund", { type: "noul", instructions: "Is this a refund request?" }],
  ],
});

describe("which way a score scale runs", () => {
  it("finds a falling scale by its end levels' places on a neutral scale, once per question", async () => {
    const scales = new ScaleOrientations();
    const model = angerModel();
    expect([...(await scales.falling(request(falling), model.probe))]).toEqual(["anger"]);
    expect([...(await scales.falling(request(rising), model.probe))]).toEqual([]);
    // The caller's level texts are never shown: a state found among them would be placed at its
    // own position, and every scale would read as given.
    expect(model.calls).toEqual([
      "very angry | lowest, , highest",
      "calm | lowest, , highest",
      "calm | lowest, , highest",
      "very angry | lowest, , highest",
    ]);
    // Asked again: from the cache.
    await scales.falling(request(falling), model.probe);
    await scales.falling(request(rising), model.probe);
    expect(model.calls).toHaveLength(4);
  });

  it("asks on the caller's instructions over as many levels, only the ends named", () => {
    const five: ScoreQuestion = { ...falling, levels: ["a", "b", null, "d", { text: "e" }] };
    expect(neutralScale(five)).toEqual({
      type: "score",
      instructions: "How angry is the customer?",
      levels: ["lowest", null, null, null, "highest"],
    });
  });

  it("reads a scale of numbers by its numbers, without asking", async () => {
    const nps = (levels: string[]): ScoreQuestion => ({
      type: "score",
      instructions: "How likely is the customer to recommend us?",
      levels,
    });
    const tenDown = nps(["10", "9", "8", "7", "6", "5", "4", "3", "2", "1"]);
    expect(levelNumbers(tenDown)).toEqual([10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
    expect(levelNumbers(nps(["-1", "0", " 2.5 "]))).toEqual([-1, 0, 2.5]);
    // Only the ends described, or a typographic minus sign: the same numbers.
    expect(levelNumbers({ ...tenDown, levels: ["10", null, null, "1"] })).toEqual([10, 1]);
    expect(levelNumbers(nps(["\u22122", "0", "2"]))).toEqual([-2, 0, 2]);
    expect(levelNumbers({ ...tenDown, levels: [null, "5", "1"] })).toBeUndefined();
    // Not numbers alone, or not strictly one way: asked of the model.
    expect(levelNumbers(nps(["1 star", "2 stars"]))).toBeUndefined();
    expect(levelNumbers(nps(["1", "3", "2"]))).toBeUndefined();
    expect(levelNumbers(nps(["1", "1"]))).toBeUndefined();
    const model = angerModel();
    const scales = new ScaleOrientations();
    const ask = (question: ScoreQuestion): DecisionRequest => ({
      state: "x",
      questions: [["nps", question]],
    });
    expect([...(await scales.falling(ask(tenDown), model.probe))]).toEqual(["nps"]);
    expect((await scales.falling(ask(nps(["0", "5", "10"])), model.probe)).size).toBe(0);
    expect(model.calls).toEqual([]);
  });

  it("takes a scale as given within the margin, without end texts, or when a level cannot be asked", async () => {
    const span = 2;
    // The first level placed above the last by just under the margin: not enough.
    const near: ScaleProbe = async (state) =>
      state === "very angry"
        ? [0, 1 - 0.99 * ORIENTATION_MARGIN * span, 0.99 * ORIENTATION_MARGIN * span]
        : [0, 1, 0];
    expect((await new ScaleOrientations().falling(request(falling), near)).size).toBe(0);
    const undescribed: ScoreQuestion = { ...falling, levels: ["very angry", "frustrated", null] };
    const model = angerModel();
    expect((await new ScaleOrientations().falling(request(undescribed), model.probe)).size).toBe(0);
    expect(model.calls).toEqual([]);
    const unaskable: ScaleProbe = async () => undefined;
    expect((await new ScaleOrientations().falling(request(falling), unaskable)).size).toBe(0);
  });

  it("asks at most a few new scales a request, once each, and keeps no failed asking", async () => {
    const scales = new ScaleOrientations();
    const model = angerModel();
    const many: DecisionRequest = {
      state: "x",
      questions: Array.from({ length: MAX_SCALES_ASKED + 2 }, (_, i) => [
        `q${i}`,
        { ...falling, instructions: `How angry is customer ${i}?` },
      ]),
    };
    // The first few are asked (two asks each); the rest are taken as given, this time.
    expect((await scales.falling(many, model.probe)).size).toBe(MAX_SCALES_ASKED);
    expect(model.calls).toHaveLength(2 * MAX_SCALES_ASKED);
    expect((await scales.falling(many, model.probe)).size).toBe(MAX_SCALES_ASKED + 2);
    expect(model.calls).toHaveLength(2 * MAX_SCALES_ASKED + 4);
    // Two requests at once share one asking.
    const fresh = new ScaleOrientations();
    const shared = angerModel();
    await Promise.all([
      fresh.falling(request(falling), shared.probe),
      fresh.falling(request(falling), shared.probe),
    ]);
    expect(shared.calls).toHaveLength(2);
    // An engine that fails: taken as given, and asked again next time.
    const failing = new ScaleOrientations();
    let fail = true;
    const flaky: ScaleProbe = async (state, question) => {
      if (fail) throw new Error("engine unreachable");
      return model.probe(state, question);
    };
    expect((await failing.falling(request(falling), flaky)).size).toBe(0);
    fail = false;
    expect([...(await failing.falling(request(falling), flaky))]).toEqual(["anger"]);
    // A request cancelled meanwhile: its reason.
    const controller = new AbortController();
    const cancelled = failing.falling(
      request({ ...falling, instructions: "Anger?" }),
      async () => {
        controller.abort(new Error("client left"));
        throw new Error("aborted");
      },
      controller.signal,
    );
    await expect(cancelled).rejects.toThrow("client left");
  });

  it("asks a falling scale reversed and answers on the caller's levels", () => {
    const ids = new Set(["anger"]);
    const asked = reverseScales(request(falling), ids);
    expect(asked.questions[0]![1]).toEqual(rising);
    expect(asked.questions[1]).toEqual(request(falling).questions[1]);
    // The model, asked the rising scale, says "very angry" (its level 2) with 0.7.
    const answers = {
      anger: assemble(rising, [0.1, 0.2, 0.7]),
      refund: assemble({ type: "noul" }, [0.6, 0.4]),
    };
    const given = answersInCallerOrder(request(falling), ids, answers);
    const anger = given.anger as ScoreAnswer;
    expect(anger.probabilities).toEqual({ "0": 0.7, "1": 0.2, "2": 0.1 });
    expect(anger.legend).toEqual({ "0": "very angry", "1": "frustrated", "2": "calm" });
    expect(anger.score).toBeCloseTo(0.4, 12);
    expect(anger).toEqual(assemble(falling, [0.7, 0.2, 0.1]));
    expect(given.refund).toBe(answers.refund);
    // Nothing falling: the request and its answers as they are.
    expect(reverseScales(request(falling), new Set())).toEqual(request(falling));
    expect(answersInCallerOrder(request(falling), new Set(), answers)).toEqual(answers);
  });
});
