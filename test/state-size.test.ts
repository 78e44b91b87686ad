import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Decider, StateTooLongError } from "../src/decision/decide.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";

/**
 * Issue 31, item 2: a 15 MiB state is refused after tokenizing a slice of it, not all of it, and
 * the event loop runs between slices. The real default model's tokenizer.
 */

let engine: LlamaEngine;
let tokenized: number[];
let decider: Decider;

beforeAll(async () => {
  engine = await openLlamaEngine({ modelPath: inject("modelPath"), contextSize: 2048 });
  tokenized = [];
  const counting = new Proxy(engine, {
    get(target, property, receiver) {
      if (property === "tokenize")
        return (text: string, options?: { special?: boolean }) => {
          tokenized.push(text.length);
          return target.tokenize(text, options);
        };
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  decider = new Decider(counting);
});

afterAll(async () => {
  await engine?.close();
});

const QUESTION = { type: "noul", instructions: "Is it long?" } as const;

describe("item 2: a long state is refused on a slice of it", () => {
  it("a 15 MiB state gets StateTooLongError after tokenizing less than 1% of it, and timers run meanwhile", async () => {
    const state = "lorem ipsum dolor sit amet ".repeat(Math.ceil((15 * 1024 * 1024) / 27));
    tokenized.length = 0;
    const error = await decider
      .decide({ state, questions: [["q", QUESTION]] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateTooLongError);
    expect((error as Error).message).toMatch(/at least \d+ tokens \(counted in its first \d+ of/);
    const characters = tokenized.reduce((a, b) => a + b, 0);
    expect(characters).toBeLessThan(state.length / 100);
    expect(Math.max(...tokenized)).toBeLessThanOrEqual(4 * 1024);
  });

  it("a state of 100 KiB of spaces (slow for the tokenizer whole) is tokenized in slices, timers running between them", async () => {
    const state = " ".repeat(100 * 1024);
    tokenized.length = 0;
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    const error = await decider
      .decide({ state, questions: [["q", QUESTION]] })
      .catch((e: unknown) => e)
      .finally(() => clearInterval(timer));
    expect(Math.max(...tokenized)).toBeLessThanOrEqual(4 * 1024);
    expect(ticks).toBeGreaterThan(0);
    // Either it fits (then it is answered) or it is refused; nothing else.
    if (!(error instanceof StateTooLongError)) expect(error).toHaveProperty("answers");
  });

  it("a long state that fits gets the same tokens in slices as whole (cuts fall before words)", async () => {
    const words = "The quick brown fox jumps over the lazy dog, again and again. ";
    const state = words.repeat(100); // 6.2 KB: longer than the context in bytes, fits in tokens
    const whole = await engine.tokenize(`<state>\n${state}\n</state>\n`);
    const sliced = await decider.stateTokens(state, 0);
    expect(sliced).toEqual(whole);
  });

  it("a short state is answered as before", async () => {
    const result = await decider.decide({ state: "short", questions: [["q", QUESTION]] });
    expect(result.answers.q!.type).toBe("noul");
  });
});
