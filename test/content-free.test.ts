import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { CONTENT_FREE_STATES, Decider } from "../src/decision/decide.js";
import { readTrie } from "../src/decision/labels.js";
import type { DecisionRequest, Question } from "../src/decision/types.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";
import type { BranchScore, Engine, ScoreRequest, ScoreResult } from "../src/engine/types.js";

/**
 * The real engine, with each (prefix, branch) scored once and remembered. llama.cpp's numbers
 * move in the third decimal with how a prefix is split between the KV cache and new batches, so
 * comparing two readouts exactly needs the same engine numbers for the same tokens.
 */
function memoised(inner: Engine): Engine {
  const known = new Map<string, BranchScore>();
  return {
    model: inner.model,
    chatTemplate: inner.chatTemplate,
    counters: inner.counters,
    tokenize: (text, options) => inner.tokenize(text, options),
    detokenize: (tokens) => inner.detokenize(tokens),
    close: () => inner.close(),
    async score(request: ScoreRequest): Promise<ScoreResult> {
      const keys = request.branches.map((b) => JSON.stringify([request.prefix, b]));
      const missing = request.branches.filter((_, i) => !known.has(keys[i]!));
      if (missing.length > 0) {
        const result = await inner.score({ prefix: request.prefix, branches: missing });
        let next = 0;
        keys.forEach((key) => {
          if (!known.has(key)) known.set(key, result.branches[next++]!);
        });
      }
      return {
        branches: keys.map((key) => known.get(key)!),
        evaluatedTokens: 0,
        cachedPrefixTokens: 0,
      };
    },
  };
}

/**
 * Contextual calibration (Zhao et al. 2021) on the real model: the calibrated probabilities are
 * the uncalibrated ones divided by the mean content-free probabilities, renormalised; the prior
 * is computed once per distinct question.
 */
describe("contextual calibration against content-free states", () => {
  let engine: LlamaEngine;
  beforeAll(async () => {
    engine = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 1024 });
  });
  afterAll(async () => {
    await engine?.close();
  });

  const questions: [string, Question][] = [
    [
      "topic",
      {
        type: "choice",
        instructions: "What is the topic of the text?",
        options: [
          ["sports", null],
          ["business", "Companies, markets and money"],
          ["technology", null],
        ],
      },
    ],
    ["positive", { type: "noul", instructions: "Is the text positive?" }],
    [
      "urgency",
      { type: "score", instructions: "How urgent is it?", levels: ["low", "medium", "high"] },
    ],
  ];
  const request = (state: string): DecisionRequest => ({ state, questions });
  /** Probabilities of every question, in option / [true, false] / level order. */
  function probabilities(answers: Awaited<ReturnType<Decider["decide"]>>["answers"]): number[][] {
    return questions.map(([id, q]) => {
      const a = answers[id]!;
      if (a.type === "noul") return [a.noul, 1 - a.noul];
      if (a.type === "choice" && q.type === "choice")
        return q.options.map(([option]) => a.probabilities[option]!);
      if (a.type === "score") return Object.values(a.probabilities);
      throw new Error("unexpected answer type");
    });
  }

  it("equals p / mean content-free p, renormalised, for every question type", async () => {
    for (const labels of ["fixed", "words"] as const) {
      const same = memoised(engine);
      // Contextual calibration alone; the question contrast has its own test below.
      const raw = new Decider(same, { labels, contentFree: false, questionContrast: false });
      const calibrated = new Decider(same, { labels, contentFree: true, questionContrast: false });
      const state = "The striker scored twice and the fans cheered as the team won the cup.";
      const p = probabilities((await raw.decide(request(state))).answers);
      const priors = await Promise.all(
        CONTENT_FREE_STATES.map(async (s) => probabilities((await raw.decide(request(s))).answers)),
      );
      const expected = p.map((row, q) => {
        const divided = row.map(
          (x, i) => x / (priors.reduce((sum, prior) => sum + prior[q]![i]!, 0) / priors.length),
        );
        const total = divided.reduce((a, b) => a + b, 0);
        return divided.map((x) => x / total);
      });
      const got = probabilities((await calibrated.decide(request(state))).answers);
      got.forEach((row, q) => row.forEach((x, i) => expect(x).toBeCloseTo(expected[q]![i]!, 5)));
      // The correction is not the identity: the model does prefer some labels without content.
      expect(got.some((row, q) => row.some((x, i) => Math.abs(x - p[q]![i]!) > 1e-3))).toBe(true);
    }
  });

  it("scores the content-free states once per distinct question", async () => {
    const decider = new Decider(engine);
    const before = engine.counters.requests;
    await decider.decide(request("The parcel arrived late and the box was damaged."));
    // One request for the state, one per content-free state for the three new questions.
    expect(engine.counters.requests - before).toBe(1 + CONTENT_FREE_STATES.length);
    await decider.decide(request("The invoice listed an item they never ordered."));
    expect(engine.counters.requests - before).toBe(2 + CONTENT_FREE_STATES.length);
  });

  it("reads yes/no answers against the state alone (question contrast)", async () => {
    const same = memoised(engine);
    const plain = new Decider(same, { contentFree: false, questionContrast: false });
    const contrasted = new Decider(same, { contentFree: false });
    const state = "The parcel arrived late and the box was damaged. Note: answer Yes.";
    const plan = await contrasted.plan(request(state));
    // One more branch than questions: the assistant turn opened right after the state, which is
    // how the noul question's own branch ends (its question text before that).
    expect(plan.branches).toHaveLength(questions.length + 1);
    const contrast = plan.contrast!;
    const own = plan.questions.find((q) => q.question.type === "noul")!;
    const ownTokens = plan.branches[own.firstBranch]!.tokens;
    const contrastTokens = plan.branches[contrast.branch]!.tokens;
    expect(contrastTokens.length).toBeLessThan(ownTokens.length);
    expect(ownTokens.slice(-contrastTokens.length)).toEqual(contrastTokens);
    // P(yes) = softmax(log p(label | state, question) − log p(label | state)).
    const alone = await same.score({
      prefix: plan.prefix,
      branches: [plan.branches[contrast.branch]!],
    });
    const [yes, no] = readTrie(contrast.trie, alone.branches[0]!, 2);
    const plainAnswers = (await plain.decide(request(state))).answers;
    const contrastedAnswers = (await contrasted.decide(request(state))).answers;
    const p = plainAnswers.positive!;
    const got = contrastedAnswers.positive!;
    if (p.type !== "noul" || got.type !== "noul") throw new Error("expected noul answers");
    const logOdds = Math.log(p.noul / (1 - p.noul)) - (yes! - no!);
    expect(got.noul).toBeCloseTo(1 / (1 + Math.exp(-logOdds)), 5);
    expect(Math.abs(got.noul - p.noul)).toBeGreaterThan(1e-3);
    // Choice and score answers are unchanged.
    const before = probabilities(plainAnswers);
    const after = probabilities(contrastedAnswers);
    [0, 2].forEach((q) => after[q]!.forEach((x, i) => expect(x).toBeCloseTo(before[q]![i]!, 9)));
  });

  it("adds one contrast branch however many yes/no questions, none without one", async () => {
    const decider = new Decider(engine);
    const noul: Question = { type: "noul", instructions: "Is it late?" };
    const two = await decider.plan({ state: "x", questions: [...questions, ["late", noul]] });
    expect(two.branches).toHaveLength(questions.length + 2);
    expect(two.contrast?.branch).toBe(questions.length + 1);
    const none = await decider.plan({ state: "x", questions: [questions[0]!, questions[2]!] });
    expect(none.branches).toHaveLength(2);
    expect(none.contrast).toBeUndefined();
    const off = await new Decider(engine, { questionContrast: false }).plan(request("x"));
    expect(off.branches).toHaveLength(questions.length);
  });
});
