import { describe, expect, it } from "vitest";
import { answer } from "../src/decision/answer.js";
import { toDecisionRequest } from "../src/decision/from-wire.js";
import { LabelTokenizer } from "../src/decision/label-style.js";
import type { DeciderOptions } from "../src/decision/options.js";
import { TUNED_READOUT } from "../src/decision/options.js";
import { planRequest, type Plan } from "../src/decision/plan.js";
import { preparePrompt } from "../src/decision/prepare.js";
import { PriorCache } from "../src/decision/priors.js";
import { QUESTION_TYPES, type QuestionTypes } from "../src/decision/questions/index.js";
import { readout } from "../src/decision/readout.js";
import type { DecisionRequest, Question, QuestionShape } from "../src/decision/types.js";
import { toWireRequest } from "../src/decision/backends/systemone.js";
import type { Token } from "../src/engine/types.js";
import { FakeEngine, fakeLogprob } from "./support/fake-engine.js";
import {
  likert,
  LIKERT_POINTS,
  type LikertAnswer,
  type LikertQuestion,
} from "./support/likert-type.js";

// The registration line: a fourth type beside the three built-in ones.
const TYPES = { ...QUESTION_TYPES, likert } satisfies QuestionTypes;

const REMOTE: LikertQuestion = {
  type: "likert",
  instructions: "Does the writer agree?",
  statement: "Remote work suits the team.",
};
const GOOD: Question = { type: "noul", instructions: "Is this good news?" };
const TOPIC: Question = {
  type: "choice",
  options: [
    ["work", null],
    ["sport", null],
  ],
};
const STATE = "We shipped twice as fast since everyone works from home.";

async function plannerOf(engine: FakeEngine, options: DeciderOptions = {}, types?: QuestionTypes) {
  const labels = new LabelTokenizer(engine);
  const prepared = await preparePrompt(engine, labels, options);
  return { model: engine, prepared, labels, options, ...(types ? { types } : {}) };
}

/**
 * Each label's probability computed by hand from the fake engine's scores: the chain of
 * {@link fakeLogprob} along the label's tokens after the prefix and the branch, normalised over
 * the labels, tempered by `temperature`.
 */
function byHand(
  prefix: readonly Token[],
  branch: readonly Token[],
  labels: readonly Token[][],
  temperature = 1,
): number[] {
  const logp = labels.map((tokens) => {
    let context = [...prefix, ...branch];
    let sum = 0;
    for (const token of tokens) {
      sum += fakeLogprob(context, token);
      context = [...context, token];
    }
    return sum;
  });
  const weights = logp.map((lp) => Math.exp(lp / temperature));
  const total = weights.reduce((a, b) => a + b, 0);
  return weights.map((w) => w / total);
}

describe("question types as modules (a test-only fourth type)", () => {
  it("plans a registered type's branch from its module: inline words, chained labels", async () => {
    const engine = new FakeEngine();
    const planner = await plannerOf(engine, {}, TYPES);
    const plan = await planRequest({ state: STATE, questions: [["remote", REMOTE]] }, planner);
    const text = await engine.detokenize(plan.branches[0]!.tokens);
    expect(text).toBe(
      "Statement: Remote work suits the team.\n" +
        "Does the writer agree? strongly disagree, disagree, neutral, agree or strongly agree?" +
        "</user><assistant>Answer:",
    );
    // " strongly disagree" and " strongly agree" share their first token: a child branch reads on.
    expect(plan.branches[0]!.children).toHaveLength(1);
    expect(plan.questions[0]!.kind).toBe(likert);
    expect(plan.questions[0]!.labelCount).toBe(5);
  });

  it("asks it with fixed labels, and question first, as its module says", async () => {
    const engine = new FakeEngine();
    const fixed = await planRequest(
      { state: STATE, questions: [["remote", REMOTE]] },
      await plannerOf(engine, { labels: "fixed" }, TYPES),
    );
    expect(await engine.detokenize(fixed.branches[0]!.tokens)).toBe(
      "Question: Does the writer agree?\nStatement: Remote work suits the team.\n" +
        "1 = strongly disagree\n2 = disagree\n3 = neutral\n4 = agree\n5 = strongly agree" +
        "</user><assistant>",
    );
    const lead = await planRequest(
      { state: STATE, questions: [["remote", REMOTE]] },
      await plannerOf(engine, { ...TUNED_READOUT, layout: "question-first" }, TYPES),
    );
    expect(lead.layout).toBe("question-first");
    expect(await engine.detokenize(lead.prefix)).toContain(
      "Statement: Remote work suits the team.\nDoes the writer agree? strongly disagree,",
    );
    expect(await engine.detokenize(lead.branches[0]!.tokens)).toBe("</user><assistant>Answer:");
  });

  it("answers it through the real readout and answer, with its own calibration key", async () => {
    const engine = new FakeEngine();
    const planner = await plannerOf(engine, { examples: false }, TYPES);
    const plan = await planRequest({ state: STATE, questions: [["remote", REMOTE]] }, planner);
    const result = await engine.score({ prefix: plan.prefix, branches: plan.branches });
    const profile = { model: "fake", temperatures: { "likert:5": 2 } };
    const answers = answer(plan, readout(plan, result), profile);
    const labels = await Promise.all(LIKERT_POINTS.map((p) => engine.tokenize(` ${p}`)));
    const expected = byHand(plan.prefix, plan.branches[0]!.tokens, labels, 2);
    const got = answers.remote as LikertAnswer;
    expect(got.type).toBe("likert");
    LIKERT_POINTS.forEach((point, i) =>
      expect(got.probabilities[point]).toBeCloseTo(expected[i]!, 12),
    );
    const agreement = expected.reduce((sum, p, i) => sum + i * p, 0) / 4;
    expect(got.agreement).toBeCloseTo(agreement, 12);
  });

  it("plans it beside the built-in types, with priors, contrast and debiasing as before", async () => {
    const engine = new FakeEngine();
    const planner = await plannerOf(engine, { debias: "reverse" }, TYPES);
    const request: DecisionRequest<QuestionShape> = {
      state: STATE,
      questions: [
        ["remote", REMOTE],
        ["good", GOOD],
        ["topic", TOPIC],
      ],
    };
    const plan: Plan<QuestionShape> = await planRequest(request, planner);
    // likert: one order (not debiased); noul: one; choice: two (reverse); then the contrast.
    expect(plan.questions.map((q) => q.views.length)).toEqual([1, 1, 2]);
    expect(plan.contrast?.branch).toBe(4);
    const priors = await new PriorCache().of(plan, engine, planner.prepared.contentFreePrefixes);
    const result = await engine.score({ prefix: plan.prefix, branches: plan.branches });
    const answers = answer(plan, readout(plan, result, priors));
    expect(Object.keys(answers)).toEqual(["remote", "good", "topic"]);
    expect(answers.remote!.type).toBe("likert");
    expect(answers.good).toMatchObject({ type: "noul" });
    expect(answers.topic).toMatchObject({ type: "choice" });
  });

  it("refuses a type the registry does not hold", async () => {
    const engine = new FakeEngine();
    await expect(
      planRequest({ state: STATE, questions: [["remote", REMOTE]] }, await plannerOf(engine)),
    ).rejects.toThrow(/unknown question type "likert"/);
  });

  it("maps its wire form both ways, as the built-in types do", () => {
    const question = likert.fromWire({ type: "likert", instructions: null, statement: "x" });
    expect(question).toEqual({ type: "likert", statement: "x" });
    expect(likert.toWire(question)).toEqual({ type: "likert", statement: "x" });
    const body = {
      model: "m",
      state: "s",
      questions: {
        a: { type: "choice" as const, criteria: { x: null, y: "why" } },
        b: { type: "noul" as const, instructions: "i", criteria: { true: null, false: "f" } },
        c: { type: "score" as const, criteria: ["low", null] },
      },
    };
    expect(toWireRequest("m", toDecisionRequest(body))).toEqual({
      model: "m",
      state: "s",
      questions: {
        a: { type: "choice", criteria: { x: null, y: "why" } },
        b: { type: "noul", instructions: "i", criteria: { false: "f" } },
        c: { type: "score", criteria: ["low", null] },
      },
    });
  });
});
