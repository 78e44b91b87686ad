import { getLlama, LlamaLogLevel, type Token as LlamaToken } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";

/**
 * The engine's log-probabilities are full-vocabulary values: equal to ln of node-llama-cpp's own
 * next-token probabilities (a softmax over every token of the vocabulary) for the same tokens,
 * whether or not a candidate is the most likely token, at every position of a chained label.
 */
describe("engine log-probabilities against the full next-token distribution", () => {
  let engine: LlamaEngine;
  beforeAll(async () => {
    engine = await openLlamaEngine({
      modelPath: inject("modelPath"),
      contextSize: 512,
      prefixCacheBytes: 0,
    });
  });
  afterAll(async () => {
    await engine?.close();
  });

  /** ln p(candidate | tokens) for every candidate, from node-llama-cpp's `probabilities`. */
  async function reference(tokens: number[], candidates: number[]): Promise<number[]> {
    const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath: inject("modelPath") });
    const context = await model.createContext({ contextSize: 512 });
    try {
      const out = await context
        .getSequence()
        .controlledEvaluate(
          tokens.map((t, i) =>
            i === tokens.length - 1
              ? [t as LlamaToken, { generateNext: { probabilities: true } }]
              : (t as LlamaToken),
          ),
        );
      const probabilities = out.at(-1)!.next!.probabilities!;
      return candidates.map((c) => Math.log(probabilities.get(c as LlamaToken) ?? 0));
    } finally {
      await context.dispose();
      await model.dispose();
    }
  }

  it("matches ln p for unlikely candidates and for a child position", async () => {
    const prefix = await engine.tokenize("The capital of France is Paris. The capital of Italy is");
    const branchTokens = await engine.tokenize(" the city of");
    // Unlikely candidates: none of them is the most likely next token.
    const candidates = await engine.tokenize(" banana elephant 42");
    const child = await engine.tokenize(" Rome");
    const childCandidates = await engine.tokenize(" is was");
    const result = await engine.score({
      prefix,
      branches: [
        {
          tokens: branchTokens,
          candidates,
          children: [{ tokens: child, candidates: childCandidates }],
        },
      ],
    });
    const ours = result.branches[0]!;
    const expected = await reference([...prefix, ...branchTokens], candidates);
    ours.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(expected[i]!, 2));
    const expectedChild = await reference([...prefix, ...branchTokens, ...child], childCandidates);
    ours.children![0]!.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(expectedChild[i]!, 2));
    // They are real probabilities of a full distribution: each well below 1.
    for (const lp of ours.logprobs) expect(lp).toBeLessThan(-1);
  });

  it("reads every node of a chain of single children, and the children it ends in", async () => {
    // A label trie as labels.ts builds one: " Rome" has one child (" is"), which has one child
    // (" the"), which has two (" capital", " largest"); " Milan" beside " Rome" has none. The
    // chain " Rome is the" is evaluated in one decode call (lanes.ts evaluateChain): each node's
    // candidates must still be read after its own last token, and the nesting kept.
    const t = (text: string) => engine.tokenize(text);
    const [prefix, branch, rome, is, the, capital, largest, milan] = await Promise.all(
      [
        "The capital of France is Paris. The capital of Italy is",
        " the city of",
        " Rome",
        " is",
        " the",
        " capital",
        " largest",
        " Milan",
      ].map(t),
    );
    const cands = await t(" is was the a");
    const result = await engine.score({
      prefix: prefix!,
      branches: [
        {
          tokens: branch!,
          candidates: cands,
          children: [
            {
              tokens: rome!,
              candidates: cands,
              children: [
                {
                  tokens: is!,
                  candidates: cands,
                  children: [
                    {
                      tokens: the!,
                      candidates: cands,
                      children: [
                        { tokens: capital!, candidates: cands },
                        { tokens: largest!, candidates: cands },
                      ],
                    },
                  ],
                },
              ],
            },
            { tokens: milan!, candidates: cands },
          ],
        },
      ],
    });
    const root = result.branches[0]!;
    const base = [...prefix!, ...branch!];
    const paths: [readonly number[], number[]][] = [
      [root.children![0]!.logprobs, [...base, ...rome!]],
      [root.children![0]!.children![0]!.logprobs, [...base, ...rome!, ...is!]],
      [
        root.children![0]!.children![0]!.children![0]!.logprobs,
        [...base, ...rome!, ...is!, ...the!],
      ],
      [
        root.children![0]!.children![0]!.children![0]!.children![0]!.logprobs,
        [...base, ...rome!, ...is!, ...the!, ...capital!],
      ],
      [
        root.children![0]!.children![0]!.children![0]!.children![1]!.logprobs,
        [...base, ...rome!, ...is!, ...the!, ...largest!],
      ],
      [root.children![1]!.logprobs, [...base, ...milan!]],
    ];
    for (const [ours, context] of paths) {
      const expected = await reference(context, cands);
      ours.forEach((lp, i) => expect(lp).toBeCloseTo(expected[i]!, 2));
    }
    expect(root.children![1]!.children).toBeUndefined();
  });
  it("leaves children unread within trieTolerance, and reads the others as before", async () => {
    // A trie of letters after " the letter": " A" … " M" end a label there; " N" … " Z" each have
    // a child read at its own position (a label of two tokens).
    const prefix = await engine.tokenize("The first letter of the alphabet is");
    const branch = await engine.tokenize(" the letter");
    const letters = await engine.tokenize(" A B C D E F G H I J K L M N O P Q R S T U V W X Y Z");
    const ends = await engine.tokenize(" is was");
    const inner = letters.slice(13);
    const tree = {
      tokens: branch,
      candidates: letters,
      children: inner.map((letter) => ({ tokens: [letter], candidates: ends })),
    };
    const all = await engine.score({ prefix, branches: [tree] });
    const tolerance = 0.05;
    const some = await engine.score({ prefix, branches: [tree], trieTolerance: tolerance });
    const [full, pruned] = [all.branches[0]!, some.branches[0]!];
    expect(pruned.logprobs).toEqual(full.logprobs);
    const unread = pruned.children!.flatMap((child, i) => (child ? [] : [i]));
    expect(unread.length).toBeGreaterThan(0);
    // Every child read gives the same numbers as when all are read, to the bit.
    pruned.children!.forEach((child, i) => {
      if (child) expect(child.logprobs).toEqual(full.children![i]!.logprobs);
    });
    // What is left unread is within the bound: the probability of reaching the children left
    // unread is at most `tolerance` times that of the label ends read.
    const p = (i: number) => Math.exp(full.logprobs[13 + i]!);
    let read = full.logprobs.slice(0, 13).reduce((sum, lp) => sum + Math.exp(lp), 0);
    pruned.children!.forEach((child, i) => {
      if (child) for (const lp of child.logprobs) read += p(i) * Math.exp(lp);
    });
    expect(unread.reduce((sum, i) => sum + p(i), 0)).toBeLessThanOrEqual(tolerance * read);
    // Children are weighed most probable first: no child left unread is more probable than one
    // read.
    const readChildren = inner.map((_, i) => i).filter((i) => !unread.includes(i));
    for (const i of unread) for (const j of readChildren) expect(p(i)).toBeLessThanOrEqual(p(j));
  });
});
