import { describe, expect, it } from "vitest";
import { answer, assemble } from "../src/decision/answer.js";
import type { CalibrationProfile } from "../src/decision/calibration.js";
import { DEFAULT_TRIE_TOLERANCE, Decider, TUNED_READOUT } from "../src/decision/decide.js";
import { buildLabelTrie, trieBranch } from "../src/decision/labels.js";
import { softmax } from "../src/decision/math.js";
import type { Plan } from "../src/decision/plan.js";
import { averagePriors, labelsOfBranch, PriorCache } from "../src/decision/priors.js";
import { QUESTION_TYPES } from "../src/decision/questions/index.js";
import { normalised, readout } from "../src/decision/readout.js";
import type { Question } from "../src/decision/types.js";
import type { ScoreResult } from "../src/engine/types.js";
import { FakeEngine } from "./support/fake-engine.js";

const CHOICE: Question = {
  type: "choice",
  options: [
    ["a", null],
    ["b", null],
    ["c", null],
  ],
};
const NOUL: Question = { type: "noul" };
const ln = Math.log;

/**
 * A hand-made plan: a 3-option choice shown in two orders (identity, reversed), a noul question,
 * and the contrast branch; single-token labels 11, 12, 13 and Yes/No 21, 22.
 */
function handPlan(): Plan {
  const abc = buildLabelTrie([[11], [12], [13]]);
  const yesNo = buildLabelTrie([[21], [22]]);
  return {
    prefix: [1, 2],
    media: [],
    mediaTokens: 0,
    layout: "state-first",
    branches: [
      trieBranch([3], abc),
      trieBranch([4], abc),
      trieBranch([5], yesNo),
      trieBranch([6], yesNo),
    ],
    questions: [
      {
        id: "c",
        question: CHOICE,
        kind: QUESTION_TYPES.choice,
        labelCount: 3,
        views: [
          { order: [0, 1, 2], trie: abc },
          { order: [2, 1, 0], trie: abc },
        ],
        firstBranch: 0,
      },
      {
        id: "n",
        question: NOUL,
        kind: QUESTION_TYPES.noul,
        labelCount: 2,
        views: [{ order: [0, 1], trie: yesNo }],
        firstBranch: 2,
      },
    ],
    contrast: { branch: 3, trie: yesNo },
    neededTokens: 3,
    inputTokens: 6, // the prefix's 2 tokens and four 1-token branches
  };
}

const result = (branches: number[][]): ScoreResult => ({
  branches: branches.map((logprobs) => ({ logprobs })),
  evaluatedTokens: 0,
  cachedPrefixTokens: 0,
});

describe("the readout (pure)", () => {
  it("normalises over exactly the labels", () => {
    const lp = normalised([ln(0.2), ln(0.6)]);
    expect(Math.exp(lp[0]!)).toBeCloseTo(0.25, 12);
    expect(Math.exp(lp[1]!)).toBeCloseTo(0.75, 12);
  });

  it("maps option orders back to options and averages them", () => {
    const scores = readout(
      handPlan(),
      result([
        [ln(0.5), ln(0.3), ln(0.2)],
        // Reversed: position 0 shows option c.
        [ln(0.1), ln(0.3), ln(0.6)],
        [ln(0.7), ln(0.3)],
        [ln(0.5), ln(0.5)],
      ]),
    );
    expect(scores[0]![0]).toBeCloseTo((ln(0.5) + ln(0.6)) / 2, 12);
    expect(scores[0]![2]).toBeCloseTo((ln(0.2) + ln(0.1)) / 2, 12);
    // A contrast branch at 50/50 moves nothing.
    expect(softmax(scores[1]!)[0]).toBeCloseTo(0.7, 12);
  });

  it("takes off the content-free prior, and the state's push on noul questions only", () => {
    const priors = [
      [ln(0.5), ln(0.25), ln(0.25)],
      [ln(0.25), ln(0.25), ln(0.5)],
      [ln(0.5), ln(0.5)],
      [ln(0.5), ln(0.5)],
    ];
    const scores = readout(
      handPlan(),
      result([
        [ln(0.5), ln(0.25), ln(0.25)],
        [ln(0.25), ln(0.25), ln(0.5)],
        [ln(0.6), ln(0.4)],
        // The state alone says Yes 4:1; the question says 3:2, so it pushes towards No.
        [ln(0.8), ln(0.2)],
      ]),
      priors,
    );
    // Each order's answer equals its prior: a uniform readout.
    expect(softmax(scores[0]!).map((p) => p.toFixed(12))).toEqual(
      Array(3).fill((1 / 3).toFixed(12)),
    );
    const p = softmax(scores[1]!);
    expect(p[0]! / p[1]!).toBeCloseTo(0.6 / 0.4 / (0.8 / 0.2), 12);
  });
});

describe("the answer (pure)", () => {
  it("assembles each type's fields", () => {
    expect(assemble(NOUL, [0.8, 0.2])).toEqual({ type: "noul", noul: 0.8 });
    expect(assemble(CHOICE, [0.2, 0.5, 0.3])).toMatchObject({ choice: "b", confidence: 0.25 });
    const score = assemble({ type: "score", levels: ["low", null] }, [0.25, 0.75]);
    expect(score).toMatchObject({ score: 0.75, legend: { "0": "low", "1": "" } });
  });

  it("divides by the profile's temperature for the question's type and option count", () => {
    const plan = handPlan();
    const profile: CalibrationProfile = { model: "m", temperatures: { "choice:3-4": 2 } };
    const scores = [
      [ln(0.6), ln(0.3), ln(0.1)],
      [ln(0.9), ln(0.1)],
    ];
    const answers = answer(plan, scores, profile);
    const c = answers.c as { probabilities: Record<string, number> };
    expect(c.probabilities.a).toBeCloseTo(softmax(scores[0]!, 2)[0]!, 12);
    expect(answers.n).toEqual({ type: "noul", noul: softmax(scores[1]!)[0] });
  });
});

describe("content-free priors", () => {
  it("finds the question that owns a branch", () => {
    const plan = handPlan();
    expect(labelsOfBranch(plan, 1).count).toBe(3);
    expect(labelsOfBranch(plan, 3)).toEqual({ trie: plan.contrast!.trie, count: 2 });
    expect(() => labelsOfBranch(plan, 4)).toThrow(/no question owns branch 4/);
  });

  it("averages probabilities, not log-probabilities, over the content-free states", () => {
    const labels = [labelsOfBranch(handPlan(), 2)];
    const priors = averagePriors(labels, [
      result([[ln(0.9), ln(0.1)]]),
      result([[ln(0.5), ln(0.5)]]),
    ]);
    expect(Math.exp(priors[0]![0]!)).toBeCloseTo(0.7, 12);
  });

  it("scores a question's prior once, then keeps it", async () => {
    const engine = new FakeEngine();
    const cache = new PriorCache();
    const plan = handPlan();
    const prefixes = [[7], [8], [9]];
    const first = await cache.of(plan, engine, prefixes);
    expect(engine.requests.map((r) => r.prefix)).toEqual(prefixes);
    // Branches 0 and 1 are distinct views; 2 and 3 differ by their tokens.
    expect(engine.requests[0]!.branches).toHaveLength(4);
    expect(await cache.of(plan, engine, prefixes)).toEqual(first);
    expect(engine.requests).toHaveLength(3);
  });
});

describe("the Decider over a fake engine", () => {
  it("answers with plan → score → readout → answer, priors scored first", async () => {
    const engine = new FakeEngine();
    const decider = new Decider(engine);
    const request = {
      state: "It rained all day.",
      questions: [
        ["n", NOUL],
        ["c", CHOICE],
      ],
    } as const;
    const plan = await decider.plan(request);
    const result = await decider.decide(request);
    // Three content-free prefixes, then the request.
    expect(engine.requests).toHaveLength(4);
    expect(engine.requests[3]!.prefix).toEqual(plan.prefix);
    const scores = await engine.score(engine.requests[3]!);
    const priors = await new PriorCache().of(
      plan,
      engine,
      engine.requests.slice(0, 3).map((r) => [...r.prefix]),
    );
    expect(result.answers).toEqual(answer(plan, readout(plan, scores, priors)));
    expect(Object.keys(result.answers)).toEqual(["n", "c"]);
  });

  it("lets the engine leave unlikely labels unread only without content-free priors", async () => {
    const request = { state: "It rained all day.", questions: [["c", CHOICE]] } as const;
    const withPriors = new FakeEngine();
    await new Decider(withPriors).decide(request);
    expect(withPriors.requests.at(-1)!.trieTolerance).toBeUndefined();
    const tuned = new FakeEngine();
    await new Decider(tuned, { ...TUNED_READOUT }).decide(request);
    expect(tuned.requests.at(-1)!.trieTolerance).toBe(DEFAULT_TRIE_TOLERANCE);
    const exact = new FakeEngine();
    await new Decider(exact, { ...TUNED_READOUT, trieTolerance: 0 }).decide(request);
    expect(exact.requests.at(-1)!.trieTolerance).toBeUndefined();
  });
});
