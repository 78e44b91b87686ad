import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Decider } from "../src/decision/decide.js";
import { TUNED_READOUT } from "../src/decision/options.js";
import type { DecisionRequest, ScoreAnswer, ScoreQuestion } from "../src/decision/types.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";

/**
 * A scale written from its top down, on the real model with the shipped adapter (decision 115):
 * read by position, "How angry is the customer?" over very angry, frustrated, calm said calm of a
 * furious message; asked which way it runs, it is read by its texts, and a rising scale is asked
 * as it is.
 */

const falling: ScoreQuestion = {
  type: "score",
  instructions: "How angry is the customer?",
  levels: ["very angry", "frustrated", "calm"],
};
const rising: ScoreQuestion = { ...falling, levels: [...falling.levels].reverse() };
const FURIOUS = "THIS IS OUTRAGEOUS. I AM FURIOUS. I WILL SUE YOU ALL!!!";
const THANKFUL = "Thanks so much, everything works great now. You were very helpful!";

const ask = (state: string, question: ScoreQuestion): DecisionRequest => ({
  state,
  questions: [["anger", question]],
});

/** The answer's level with the most probability. */
function top(answer: ScoreAnswer): string {
  const [level] = Object.entries(answer.probabilities).sort(([, a], [, b]) => b - a)[0]!;
  return answer.legend[level] as string;
}

describe("a score scale written from its top down", () => {
  let engine: LlamaEngine;
  beforeAll(async () => {
    engine = await openLlamaEngine({
      modelPath: inject("modelPath"),
      adapterPath: "adapters/smollm2-135m-instruct.decision.gguf",
      contextSize: 2048,
    });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("is read by its level texts, where read by position it said the opposite", async () => {
    const oriented = new Decider(engine, { ...TUNED_READOUT });
    const byPosition = new Decider(engine, { ...TUNED_READOUT, scaleOrientation: false });
    const answer = async (decider: Decider, state: string, question: ScoreQuestion) =>
      (await decider.decide(ask(state, question))).answers.anger as ScoreAnswer;
    expect(top(await answer(byPosition, FURIOUS, falling))).toBe("calm");
    expect(top(await answer(byPosition, THANKFUL, falling))).toBe("very angry");
    const furious = await answer(oriented, FURIOUS, falling);
    const thankful = await answer(oriented, THANKFUL, falling);
    expect(top(furious)).toBe("very angry");
    expect(top(thankful)).toBe("calm");
    expect(furious.legend).toEqual({ "0": "very angry", "1": "frustrated", "2": "calm" });
    // The same answers as the rising scale's, on the caller's levels.
    const asRising = await answer(oriented, FURIOUS, rising);
    expect(furious.probabilities["0"]).toBeCloseTo(asRising.probabilities["2"]!, 6);
    expect(furious.score).toBeCloseTo(2 - asRising.score, 6);
  });

  it("is read by its texts where the model finds its end texts among the levels", async () => {
    // Ten levels from livid down: asked on its own levels, "livid" was found at its own position
    // and the scale read as rising; on the neutral scale it is found falling (decision 115).
    const calm = ["completely calm", "calm", "relaxed", "slightly annoyed", "annoyed"];
    const angry = ["irritated", "frustrated", "angry", "very angry", "livid"];
    const tenFalling: ScoreQuestion = { ...falling, levels: [...calm, ...angry].reverse() };
    const oriented = new Decider(engine, { ...TUNED_READOUT });
    const byPosition = new Decider(engine, { ...TUNED_READOUT, scaleOrientation: false });
    const score = async (decider: Decider, state: string) =>
      ((await decider.decide(ask(state, tenFalling))).answers.anger as ScoreAnswer).score;
    // Level 0 is livid: the furious message is placed nearer it than the thankful one.
    expect(await score(oriented, FURIOUS)).toBeLessThan((await score(oriented, THANKFUL)) - 2);
    expect(await score(byPosition, FURIOUS)).toBeGreaterThan(await score(byPosition, THANKFUL));
  });

  it("asks a rising scale as it is, and charges nothing for asking which way it runs", async () => {
    const oriented = new Decider(engine, { ...TUNED_READOUT });
    const byPosition = new Decider(engine, { ...TUNED_READOUT, scaleOrientation: false });
    const a = await oriented.decide(ask(FURIOUS, rising));
    const b = await byPosition.decide(ask(FURIOUS, rising));
    expect(a.answers).toEqual(b.answers);
    expect(a.usage).toEqual(b.usage);
    const c = await oriented.decide(ask(FURIOUS, falling));
    expect(c.usage).toEqual(b.usage);
  });
});
