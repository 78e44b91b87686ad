import { describe, expect, it } from "vitest";
import { LabelTokenizer, labelStyleOf } from "../src/decision/label-style.js";
import { NOUL_LABELS } from "../src/decision/labels.js";
import type { DeciderOptions } from "../src/decision/options.js";
import { ordersOf, planRequest, scoreRequestOf, usageOf, type Plan } from "../src/decision/plan.js";
import { preparePrompt } from "../src/decision/prepare.js";
import { QUESTION_TYPES } from "../src/decision/questions/index.js";
import { renderStateBlock, SYSTEM_MESSAGE } from "../src/decision/prompt.js";
import {
  RequestTooLargeError,
  STATE_SLICE_CHARS,
  stateTokens,
  StateTooLongError,
} from "../src/decision/state.js";
import type { DecisionRequest, Question } from "../src/decision/types.js";
import { branchTotalTokens } from "../src/engine/types.js";
import { labelSequences } from "../src/evaluation/render.js";
import { FakeEngine } from "./support/fake-engine.js";

const TOPIC: Question = {
  type: "choice",
  instructions: "What is the topic?",
  options: [
    ["sports", null],
    ["business", "money and firms"],
    ["technology", null],
  ],
};
const GOOD: Question = { type: "noul", instructions: "Is this good news?" };
const URGENCY: Question = { type: "score", levels: ["not", "somewhat", "very"] };
const { choice, score } = QUESTION_TYPES;

async function plannerOf(engine: FakeEngine, options: DeciderOptions = {}) {
  const labels = new LabelTokenizer(engine);
  const prepared = await preparePrompt(engine, labels, options);
  return { model: engine, prepared, labels, options };
}

const request = (questions: DecisionRequest["questions"], state = "The cup final ended 3-0.") => ({
  state,
  questions,
});

describe("the plan (no model: a fake tokenizer)", () => {
  it("puts the head and the state block in the prefix, and asks the engine nothing", async () => {
    const engine = new FakeEngine();
    const planner = await plannerOf(engine, { examples: false });
    const plan = await planRequest(request([["topic", TOPIC]]), planner);
    const head = await engine.tokenize(`<system>${SYSTEM_MESSAGE}</system><user>`);
    const state = await engine.tokenize(renderStateBlock("The cup final ended 3-0."));
    expect(plan.prefix).toEqual([...head, ...state]);
    expect(plan.media).toEqual([]);
    expect(engine.requests).toEqual([]);
    expect(scoreRequestOf(plan)).toEqual({ prefix: plan.prefix, branches: plan.branches });
  });

  it("answers a choice with its option ids after the answer cue", async () => {
    const engine = new FakeEngine();
    const plan = await planRequest(request([["topic", TOPIC]]), await plannerOf(engine));
    const [branch] = plan.branches;
    const tail = await engine.tokenize("</user><assistant>");
    const cue = await engine.tokenize("Answer:");
    expect(branch!.tokens.slice(-tail.length - cue.length)).toEqual([...tail, ...cue]);
    const ids = await Promise.all(
      [" business", " sports", " technology"].map((w) => engine.tokenize(w)),
    );
    expect(branch!.candidates).toEqual(ids.map((t) => t[0]));
    expect(await engine.detokenize(branch!.tokens)).toContain("business, sports or technology?");
  });

  it("writes the ids of a choice of more than 64 described options once (decision 102)", async () => {
    const engine = new FakeEngine();
    const planner = await plannerOf(engine, { examples: false });
    /** A choice of `n` options `q1`…, described unless `bare` names one, and its branch's text. */
    const asked = async (n: number, bare?: string) => {
      const options = Array.from({ length: n }, (_, i) => {
        const id = `q${i + 1}`;
        return [id, id === bare ? null : `Queue number ${i + 1}`] as const;
      });
      const question: Question = { type: "choice", instructions: "Which queue?", options };
      const plan = await planRequest(request([["queue", question]]), planner);
      return engine.detokenize(plan.branches[0]!.tokens);
    };
    const many = await asked(65);
    // Shown in id order (q1, q10, …, q9): the last line before the instructions is q9's.
    expect(many).toContain("q9: Queue number 9\nWhich queue?");
    expect(many).not.toContain("Which queue? q1");
    expect(many.match(/\bq17\b/g)).toHaveLength(1);
    // 64 options, or one of 65 without its line: the ids are asked inline, as below the bound.
    expect(await asked(64)).toContain("q9: Queue number 9\nWhich queue? q1, q10,");
    expect(await asked(65, "q3")).toMatch(/Which queue\? q1, q10, .* or q9\?/);
  });

  it("falls back to letters for ids longer than maxWordLabelTokens, and for labels: fixed", async () => {
    const engine = new FakeEngine();
    const long: Question = {
      type: "choice",
      options: [
        ["one two three", null],
        ["four", null],
      ],
    };
    const planner = await plannerOf(engine, { maxWordLabelTokens: 2 });
    const style = await labelStyleOf(
      choice,
      long,
      planner.prepared,
      planner.labels,
      planner.options,
    );
    expect(style.words).toBe(false);
    expect(style.labelsAt([1, 0])).toEqual(["A", "B"]);
    const fixed = await plannerOf(engine, { labels: "fixed" });
    const plan = await planRequest(request([["topic", TOPIC]]), fixed);
    const letters = await Promise.all(["A", "B", "C"].map((l) => engine.tokenize(l)));
    expect(plan.branches[0]!.candidates).toEqual(letters.map((t) => t[0]));
  });

  it("answers a score with its level texts when scoreLabels is levels, else with numbers", async () => {
    const engine = new FakeEngine();
    const anger: Question = {
      type: "score",
      instructions: "How frustrated is the customer?",
      levels: ["calm", "frustrated", "very angry"],
    };
    const levels = await plannerOf(engine, { scoreLabels: "levels" });
    const plan = await planRequest(request([["anger", anger]]), levels);
    const [branch] = plan.branches;
    const cue = await engine.tokenize("Answer:");
    expect(branch!.tokens.slice(-cue.length)).toEqual(cue);
    expect(await engine.detokenize(branch!.tokens)).toContain(
      "How frustrated is the customer? calm, frustrated or very angry?",
    );
    const words = await Promise.all(
      [" calm", " frustrated", " very"].map((w) => engine.tokenize(w)),
    );
    expect(branch!.candidates).toEqual(words.map((t) => t[0]));
    // A level that is not a string, or the default, keeps the numbers.
    const undescribed: Question = { ...anger, levels: ["calm", null, "very angry"] };
    const style = await labelStyleOf(
      score,
      undescribed,
      levels.prepared,
      levels.labels,
      levels.options,
    );
    expect(style.words).toBe(false);
    expect(style.labelsAt([0, 1, 2])).toEqual(["0", "1", "2"]);
    const numbers = await planRequest(request([["anger", anger]]), await plannerOf(engine));
    const digits = await Promise.all(["0", "1", "2"].map((l) => engine.tokenize(l)));
    expect(numbers.branches[0]!.candidates).toEqual(digits.map((t) => t[0]));
    expect(await engine.detokenize(numbers.branches[0]!.tokens)).toContain("2 = very angry");
  });

  it("adds one contrast branch for the noul questions, after every question's branches", async () => {
    const engine = new FakeEngine();
    const questions: DecisionRequest["questions"] = [
      ["good", GOOD],
      ["topic", TOPIC],
      ["bad", { type: "noul", instructions: "Is this bad news?" }],
    ];
    const plan = await planRequest(request(questions), await plannerOf(engine));
    expect(plan.branches).toHaveLength(4);
    expect(plan.contrast?.branch).toBe(3);
    expect(plan.branches[3]!.tokens).toEqual(await engine.tokenize("</user><assistant>"));
    const yesNo = await Promise.all(NOUL_LABELS.map((l) => engine.tokenize(l)));
    expect(plan.branches[3]!.candidates).toEqual(yesNo.map((t) => t[0]));
    const off = await planRequest(
      request(questions),
      await plannerOf(engine, { questionContrast: false }),
    );
    expect(off.contrast).toBeUndefined();
    expect(off.branches).toHaveLength(3);
  });

  it("shows debiasing orders as views of one question", async () => {
    // TOPIC's ids sorted: business (1), sports (0), technology (2).
    expect(ordersOf(choice, TOPIC, "off")).toEqual([[1, 0, 2]]);
    expect(ordersOf(choice, TOPIC, "reverse")).toEqual([
      [1, 0, 2],
      [2, 0, 1],
    ]);
    expect(ordersOf(choice, TOPIC, "cyclic")).toEqual([
      [1, 0, 2],
      [0, 2, 1],
      [2, 1, 0],
    ]);
    expect(ordersOf(score, URGENCY, "cyclic")).toEqual([[0, 1, 2]]);
    const engine = new FakeEngine();
    const plan = await planRequest(
      request([
        ["topic", TOPIC],
        ["urgency", URGENCY],
      ]),
      await plannerOf(engine, { debias: "cyclic" }),
    );
    expect(plan.questions.map((q) => [q.firstBranch, q.views.length])).toEqual([
      [0, 3],
      [3, 1],
    ]);
    expect(await engine.detokenize(plan.branches[1]!.tokens)).toContain(
      "sports, technology or business?",
    );
  });

  it("shows a choice's options in one order whatever order the caller lists them in", async () => {
    const engine = new FakeEngine();
    const planner = await plannerOf(engine);
    const listed = await planRequest(request([["topic", TOPIC]]), planner);
    const permuted = await planRequest(
      request([["topic", { ...TOPIC, options: [...TOPIC.options].reverse() }]]),
      planner,
    );
    expect(permuted.branches[0]!.tokens).toEqual(listed.branches[0]!.tokens);
    expect(await engine.detokenize(listed.branches[0]!.tokens)).toContain(
      "business, sports or technology?",
    );
    // The views map positions back to the caller's indices.
    expect(listed.questions[0]!.views[0]!.order).toEqual([1, 0, 2]);
    expect(permuted.questions[0]!.views[0]!.order).toEqual([1, 2, 0]);
  });

  it("reports usage from the plan: every token in, one position per label-trie node out", async () => {
    const engine = new FakeEngine();
    const plan = await planRequest(
      request([
        ["topic", TOPIC],
        ["good", GOOD],
      ]),
      await plannerOf(engine),
    );
    const branchTokens = plan.branches.reduce((sum, b) => sum + b.tokens.length, 0);
    expect(usageOf(plan)).toEqual({
      input_tokens: plan.prefix.length + branchTokens,
      output_tokens: 2,
    });
  });

  it("refuses a request that does not fit, naming its longest question", async () => {
    const fits = await planRequest(request([["topic", TOPIC]]), await plannerOf(new FakeEngine()));
    const engine = new FakeEngine(fits.neededTokens - 1);
    const planner = await plannerOf(engine);
    const error = await planRequest(request([["topic", TOPIC]]), planner).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateTooLongError);
    expect((error as StateTooLongError).longestQuestionId).toBe("topic");
    expect((error as StateTooLongError).blamesQuestion).toBe(true);
    expect((error as StateTooLongError).message).toMatch(/^question "topic" is too long/);
    const long = request([["topic", TOPIC]], "word ".repeat(fits.neededTokens));
    const refused = await planRequest(long, planner).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StateTooLongError);
    expect((refused as StateTooLongError).longestQuestionId).toBeUndefined();
    expect((refused as StateTooLongError).message).toMatch(/^the state is /);
  });

  it("refuses a request whose questions together exceed maxRequestTokens, naming the heaviest", async () => {
    const questions: DecisionRequest["questions"] = [
      ["good", GOOD],
      ["topic", TOPIC],
      ["urgency", URGENCY],
    ];
    const plan = await planRequest(request(questions), await plannerOf(new FakeEngine()));
    const { input_tokens } = usageOf(plan);
    const at = await planRequest(
      request(questions),
      await plannerOf(new FakeEngine(), { maxRequestTokens: input_tokens }),
    );
    expect(usageOf(at).input_tokens).toBe(input_tokens);
    const planner = await plannerOf(new FakeEngine(), { maxRequestTokens: input_tokens - 1 });
    const error = await planRequest(request(questions), planner).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestTooLargeError);
    const refused = error as RequestTooLargeError;
    expect(refused.requestTokens).toBe(input_tokens);
    expect(refused.maxRequestTokens).toBe(input_tokens - 1);
    expect(refused.heaviestQuestionId).toBe("topic");
    expect(refused.message).toMatch(/"topic" alone takes \d+/);
  });

  it("by default allows twice the context: every branch may fit while the sum does not", async () => {
    const intents: Question = {
      type: "choice",
      instructions: "Which intent?",
      options: Array.from({ length: 60 }, (_, i) => [`intent number ${i}`, null]),
    };
    const one = await planRequest(request([["q0", intents]]), await plannerOf(new FakeEngine()));
    const contextSize = one.neededTokens + 5;
    const many: DecisionRequest["questions"] = Array.from({ length: 16 }, (_, i) => [
      `q${i}`,
      intents,
    ]);
    const planner = await plannerOf(new FakeEngine(contextSize));
    const error = await planRequest(request(many), planner).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestTooLargeError);
    expect((error as RequestTooLargeError).maxRequestTokens).toBe(2 * contextSize);
    expect((error as RequestTooLargeError).requestTokens).toBeGreaterThan(2 * contextSize);
    const two = await planRequest(request(many.slice(0, 2)), planner);
    expect(usageOf(two).input_tokens).toBeLessThanOrEqual(2 * contextSize);
  });

  it("tokenizes a long state in slices cut before spaces: the tokens of the whole", async () => {
    const engine = new FakeEngine(100_000);
    const state = Array.from({ length: 3000 }, (_, i) => `word${i % 50}`).join(" ");
    expect(state.length).toBeGreaterThan(4 * STATE_SLICE_CHARS);
    const whole = await engine.tokenize(renderStateBlock(state));
    // A head that leaves less room than the block's bytes: sliced.
    expect(await stateTokens(engine, state, 100_000 - state.length + 10)).toEqual(whole);
    const error = await stateTokens(engine, state, 100_000 - 1000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateTooLongError);
    expect((error as Error).message).toMatch(
      /^the state is at least \d+ tokens \(counted in its first \d+ of \d+ characters\); the model's context holds 100000, 1000 of them for the state after the prompt's 99000$/,
    );
    // Another wire's words for its questions (the Decisions wire's): the same bound, not a size.
    const named = (error as StateTooLongError).messageNaming((id) => `questions[${id}]`);
    expect(named).toBe((error as Error).message);
    // Counted whole: its size, not a bound.
    const counted = await stateTokens(engine, state, 100_000 - whole.length + 1).catch(
      (e: unknown) => e,
    );
    expect((counted as Error).message).toBe(
      `the state is ${whole.length} tokens; the model's context holds 100000, ${whole.length - 1} of them for the state after the prompt's ${100_000 - whole.length + 1}`,
    );
  });
});

describe("the prompt layout (docs/decisions/087)", () => {
  const STATE = "The cup final ended 3-0.";

  it("writes a lone question before the state; its branch is the turn's end and the cue", async () => {
    const engine = new FakeEngine();
    const planner = await plannerOf(engine, { examples: false, layout: "question-first" });
    const plan = await planRequest(request([["topic", TOPIC]]), planner);
    expect(plan.layout).toBe("question-first");
    const head = await engine.tokenize(`<system>${SYSTEM_MESSAGE}</system><user>`);
    const asked = await engine.tokenize(
      "business: money and firms\nWhat is the topic? business, sports or technology?\n",
    );
    const state = await engine.tokenize(renderStateBlock(STATE));
    expect(plan.prefix).toEqual([...head, ...asked, ...state]);
    const tail = await engine.tokenize("</user><assistant>");
    const cue = await engine.tokenize("Answer:");
    expect(plan.branches).toHaveLength(1);
    expect(plan.branches[0]!.tokens).toEqual([...tail, ...cue]);
    // The same labels, read at the same place, as the state-first plan reads them.
    const stateFirst = await planRequest(request([["topic", TOPIC]]), await plannerOf(engine));
    expect(plan.branches[0]!.candidates).toEqual(stateFirst.branches[0]!.candidates);
    expect(usageOf(plan).input_tokens).toBe(plan.prefix.length + tail.length + cue.length);
  });

  it("shares the question with the next state: only the state differs", async () => {
    const engine = new FakeEngine();
    const planner = await plannerOf(engine, { examples: false, layout: "question-first" });
    const a = await planRequest(request([["topic", TOPIC]], "Shares fell."), planner);
    const b = await planRequest(request([["topic", TOPIC]], "A new phone."), planner);
    const shared = a.prefix.findIndex((t, i) => t !== b.prefix[i]);
    const head = await engine.tokenize(`<system>${SYSTEM_MESSAGE}</system><user>`);
    expect(shared).toBeGreaterThan(head.length + 10);
  });

  it("blames a lone question too long for the context, not the state it comes before", async () => {
    const long: Question = {
      type: "choice",
      instructions: "Which intent?",
      options: Array.from({ length: 300 }, (_, i) => [`intent number ${i}`, null]),
    };
    const layout = "question-first" as const;
    const planner = await plannerOf(new FakeEngine(256), { layout, examples: false });
    const error = await planRequest(request([["intent", long]]), planner).catch((e) => e);
    expect(error).toBeInstanceOf(StateTooLongError);
    expect((error as StateTooLongError).blamesQuestion).toBe(true);
    expect((error as Error).message).toMatch(
      /^question "intent" is too long for the model's context: with the prompt and the state \(\d+ tokens\) it needs \d+ tokens, but the context holds 256; shorten/,
    );
    // The Decisions wire's `unfit: "refuse"`: the question is refused, as it is state first.
    const refused = await planRequest({ ...request([["intent", long]]), unfit: "refuse" }, planner);
    expect(refused.refused).toEqual(["intent"]);
    expect(refused.questions).toEqual([]);
    expect(refused.layout).toBe("state-first");
    expect(refused.prefix.length).toBeLessThan(256); // the lead is not kept
    // A state too long for the context is still the state's, with a short lead before it.
    const state = Array.from({ length: 400 }, (_, i) => `word${i}`).join(" ");
    const stateError = await planRequest(request([["topic", TOPIC]], state), planner).catch(
      (e) => e,
    );
    expect((stateError as StateTooLongError).blamesQuestion).toBe(false);
    expect((stateError as Error).message).toMatch(/^the state is /);
  });

  it("keeps several questions, debiasing and the question contrast state-first", async () => {
    const engine = new FakeEngine();
    const layout = "question-first" as const;
    const two = await planRequest(
      request([
        ["topic", TOPIC],
        ["good", GOOD],
      ]),
      await plannerOf(engine, { layout, questionContrast: false }),
    );
    expect(two.layout).toBe("state-first");
    const debiased = await planRequest(
      request([["topic", TOPIC]]),
      await plannerOf(engine, { layout, debias: "reverse" }),
    );
    expect(debiased.layout).toBe("state-first");
    const contrasted = await planRequest(
      request([["good", GOOD]]),
      await plannerOf(engine, { layout }),
    );
    expect(contrasted.layout).toBe("state-first");
    const noul = await planRequest(
      request([["good", GOOD]]),
      await plannerOf(engine, { layout, questionContrast: false }),
    );
    expect(noul.layout).toBe("question-first");
    const score = await planRequest(
      request([["urgency", URGENCY]]),
      await plannerOf(engine, { layout }),
    );
    expect(score.layout).toBe("question-first");
  });
});

describe("word labels whose tokens begin one another", () => {
  const wash: Question = {
    type: "choice",
    instructions: "Which service?",
    options: [
      ["red car", null],
      ["red car wash", null],
      ["blue van", null],
    ],
  };
  /** Each label's token path in the plan's trie, by label index. */
  const pathsOf = (plan: Plan) =>
    labelSequences(plan.questions[0]!.views[0]!.trie, plan.questions[0]!.labelCount);

  it("are read to the end of the turn with labelChain full", async () => {
    const engine = new FakeEngine();
    const plan = await planRequest(
      request([["service", wash]]),
      await plannerOf(engine, { labelChain: "full" }),
    );
    const end = (await engine.tokenize("</user><assistant>"))[0]!;
    const paths = pathsOf(plan);
    expect(paths).toHaveLength(3);
    for (const path of paths) expect(path.at(-1)).toBe(end);
  });

  it("are read to their parting tokens by default, the end of the turn where it parts them", async () => {
    const engine = new FakeEngine();
    const fullPlan = await planRequest(
      request([["service", wash]]),
      await plannerOf(engine, { labelChain: "full" }),
    );
    const full = pathsOf(fullPlan);
    const plan = await planRequest(request([["service", wash]]), await plannerOf(engine));
    const paths = pathsOf(plan);
    const end = (await engine.tokenize("</user><assistant>"))[0]!;
    // Each label read to its shortest prefix that no other label begins with: "red car" and
    // "red car wash" part after "red car" (one ends the turn, the other goes on), "blue van" at
    // its first word.
    const parting = full.map((path, i) => {
      const others = full.filter((_, j) => j !== i);
      const k = path.findIndex((_, n) =>
        others.every((o) => o.slice(0, n + 1).join() !== path.slice(0, n + 1).join()),
      );
      return path.slice(0, k + 1);
    });
    expect(paths).toEqual(parting);
    expect(paths.map((p) => p.length).sort()).toEqual([1, 3, 3]);
    expect(paths.filter((p) => p.at(-1) === end)).toHaveLength(1);
    expect(branchTotalTokens(plan.branches[0]!)).toBeLessThan(
      branchTotalTokens(fullPlan.branches[0]!),
    );
  });
});
