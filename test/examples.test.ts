import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Decider } from "../src/decision/decide.js";
import { choiceLabels, NOUL_LABELS, scoreLabels } from "../src/decision/labels.js";
import { PROMPT_EXAMPLES, renderStateBlock } from "../src/decision/prompt.js";
import type { DecisionRequest, Question } from "../src/decision/types.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";

/** The request that asks an example's question about the example's state. */
function requestOf(state: DecisionRequest["state"], question: Question): DecisionRequest {
  return { state, questions: [["q", question]] };
}

/**
 * In-context examples on the real model: shown before every request exactly as that request
 * would be shown, each followed by the reply the readout reads; absent with `examples: false`.
 */
describe("in-context examples", () => {
  let engine: LlamaEngine;
  beforeAll(async () => {
    engine = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 2048 });
  });
  afterAll(async () => {
    await engine?.close();
  });

  /** The text of a Decider's head: the prefix of any request, less its state block. */
  async function headText(decider: Decider): Promise<string> {
    const plan = await decider.plan(requestOf("x", PROMPT_EXAMPLES[0]!.question));
    const state = await engine.tokenize(renderStateBlock("x"));
    return engine.detokenize(plan.prefix.slice(0, plan.prefix.length - state.length));
  }

  it("there are examples of all three question types", () => {
    expect(new Set(PROMPT_EXAMPLES.map((e) => e.question.type))).toEqual(
      new Set(["choice", "noul", "score"]),
    );
  });

  for (const labels of ["words", "fixed"] as const) {
    it(`shows each example as its request, then the ${labels} reply the readout reads`, async () => {
      const decider = new Decider(engine, { labels, contentFree: false });
      const head = await headText(decider);
      for (const example of PROMPT_EXAMPLES) {
        const plan = await decider.plan(requestOf(example.state, example.question));
        const state = await engine.tokenize(renderStateBlock(example.state));
        const branch = plan.branches[0]!;
        // The request's user turn through the reply cue: state block, question, turn change.
        const asked = await engine.detokenize([...state, ...branch.tokens]);
        expect(head).toContain(asked);
        const at = head.indexOf(asked) + asked.length;
        const reply = head.slice(at, head.indexOf("\n", at));
        const expected =
          example.question.type === "choice"
            ? labels === "words"
              ? ` ${example.question.options[example.answer]![0]}`
              : // Letters go by shown position: the answer's place in the plan's (id) order.
                choiceLabels(example.question.options.length)[
                  plan.questions[0]!.views[0]!.order.indexOf(example.answer)
                ]!
            : example.question.type === "noul"
              ? NOUL_LABELS[example.answer]!
              : scoreLabels(example.question.levels.length)[example.answer]!;
        // The reply ends the assistant turn (ChatML: `<|im_end|>` after it).
        expect(reply).toBe(`${expected}<|im_end|>`);
      }
    });
  }

  it("leaves them out with examples: false", async () => {
    const head = await headText(new Decider(engine, { examples: false, contentFree: false }));
    for (const example of PROMPT_EXAMPLES)
      expect(head).not.toContain(renderStateBlock(example.state).trim());
    expect(head.match(/<\|im_start\|>/g)).toHaveLength(2);
  });
});
