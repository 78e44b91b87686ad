import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Decider } from "../src/decision/decide.js";
import { scoreRequestOf } from "../src/decision/plan.js";
import type { DecisionRequest } from "../src/decision/types.js";
import type { ScoreRequest, ScoreResult } from "../src/engine/types.js";
import { planDecode } from "../src/engine/decode/index.js";
import { openLlamaEngine, type LlamaEngine } from "../src/engine/llama/index.js";
import type { Service } from "../src/service/build.js";
import { postJson, startTestService } from "./support/service.js";
import { TOPIC_QUESTIONS } from "./support/questions.js";

/**
 * A long request does not hold the model for the requests behind it (docs/decisions/103): between
 * the decode calls of its prefix, and between its branches, it gives the model up to a request
 * waiting, parks what it has evaluated in the prefix cache, and answers afterwards as it would
 * have alone, to the bit.
 */

const LONG: DecisionRequest = {
  state: "The striker scored twice as United beat City in the league final. ".repeat(150),
  questions: TOPIC_QUESTIONS,
};
const SHORT: DecisionRequest = {
  state: "Shares of the chip maker fell after its quarterly results.",
  questions: TOPIC_QUESTIONS,
};
/** One question with many described options, on a short state. */
const ROUTED: DecisionRequest = {
  state: SHORT.state,
  questions: [
    [
      "queue",
      {
        type: "choice",
        instructions: "Which queue owns it?",
        options: Array.from({ length: 48 }, (_, i) => [
          `queue_${i + 1}`,
          `Tickets about product area number ${i + 1}: its invoices, outages, upgrades and refunds`,
        ]),
      },
    ],
  ],
};

/**
 * Runs `use` on an engine of the real model (decode calls of at most 512 tokens, so a state of a
 * few thousand tokens takes several), closed after.
 * @param prefixCacheBytes - 0 for none; the default cache otherwise
 * @param callBudgetMs - the engine's call budget (call-pace.ts); the default otherwise
 */
async function withEngine<T>(
  use: (engine: LlamaEngine) => Promise<T>,
  prefixCacheBytes?: number,
  callBudgetMs?: number,
): Promise<T> {
  const engine = await openLlamaEngine({
    modelPath: inject("modelPath"),
    contextSize: 4096,
    batchSize: 512,
    ...(prefixCacheBytes === undefined ? {} : { prefixCacheBytes }),
    ...(callBudgetMs === undefined ? {} : { callBudgetMs }),
  });
  try {
    return await use(engine);
  } finally {
    await engine.close();
  }
}

/** Scores `requests` sent at once; the order in which they were answered, by index. */
async function answeredOrder(
  engine: LlamaEngine,
  requests: readonly ScoreRequest[],
): Promise<{ order: number[]; results: ScoreResult[] }> {
  const order: number[] = [];
  const results = await Promise.all(
    requests.map((request, index) =>
      engine.score(request).then((result) => {
        order.push(index);
        return result;
      }),
    ),
  );
  return { order, results };
}

/**
 * `long` and a short request planned on a cold engine, and the answer `long` gets there alone
 * with nothing waiting, to compare with.
 */
async function besideShort(
  long: DecisionRequest,
): Promise<{ request: ScoreRequest; short: ScoreRequest; alone: ScoreResult }> {
  return withEngine(async (cold) => {
    const decider = new Decider(cold, { contentFree: false });
    const request = scoreRequestOf(await decider.plan(long));
    const short = scoreRequestOf(await decider.plan({ ...SHORT, state: "Another short one." }));
    return { request, short, alone: await cold.score(request) };
  }, 0);
}

describe("a long prefix gives the model up between its decode calls", () => {
  let long: ScoreRequest;
  let short: ScoreRequest;
  let alone: ScoreResult;
  beforeAll(async () => {
    // The long request's answer on a cold engine with nothing waiting, for comparison.
    await withEngine(async (engine) => {
      const decider = new Decider(engine, { contentFree: false });
      long = scoreRequestOf(await decider.plan(LONG));
      short = scoreRequestOf(await decider.plan(SHORT));
      alone = await engine.score(long);
    }, 0);
    expect(long.prefix.length).toBeGreaterThan(3 * 512);
  });

  it("answers a short request sent behind it first, and itself as alone, to the bit", async () => {
    await withEngine(async (engine) => {
      const { order, results } = await answeredOrder(engine, [long, short]);
      expect(order).toEqual([1, 0]);
      const [turned] = results;
      expect(engine.prefixCache!.stats.loaded).toBeGreaterThanOrEqual(1);
      expect(turned!.branches).toEqual(alone.branches);
      // Its own parked part is not a cache hit: usage is that of the cold request.
      expect(turned!.cachedPrefixTokens).toBe(0);
      expect(turned!.evaluatedTokens).toBe(alone.evaluatedTokens);
      expect(engine.counters.prefixTokensCached).toBe(results[1]!.cachedPrefixTokens);
      // The cache keeps the two prefixes; the parked part went once taken over.
      await engine.idle();
      expect(engine.prefixCache!.size).toBe(2);
      expect(engine.prefixCache!.find(long.prefix)!.shared).toBe(long.prefix.length);
    });
  });

  it("holds the model to its end without a prefix cache to park in", async () => {
    await withEngine(async (engine) => {
      const { order, results } = await answeredOrder(engine, [long, short]);
      expect(order).toEqual([0, 1]);
      expect(results[0]!.branches).toEqual(alone.branches);
    }, 0);
  });

  it("goes on to its end when its part does not fit in the cache, written once", async () => {
    // 4 MB: about 170 tokens of SmolLM2's KV cache, less than one decode call of the prefix.
    await withEngine(async (engine) => {
      const { order, results } = await answeredOrder(engine, [long, short]);
      expect(order).toEqual([0, 1]);
      expect(results[0]!.branches).toEqual(alone.branches);
      expect(results[0]!.evaluatedTokens).toBe(alone.evaluatedTokens);
      // The part it tried to park; nothing else of that size was written.
      expect(engine.prefixCache!.stats.saved).toBe(1);
    }, 4_000_000);
  });

  it("lets a request cancelled while it waits for its next turn go at once", async () => {
    const longer = scoreRequestOf(
      await withEngine((engine) =>
        new Decider(engine, { contentFree: false }).plan({
          ...LONG,
          state: "The chip maker's shares fell after its quarterly results. ".repeat(260),
        }),
      ),
    );
    await withEngine(async (engine) => {
      const settled: string[] = [];
      const controller = new AbortController();
      const first = engine.score(long).then(() => settled.push("first"));
      const second = engine.score(longer, controller.signal).then(
        () => settled.push("second"),
        (error: Error) => settled.push(`second: ${error.message}`),
      );
      // The first gives way to the short one; the second, with more work, waits for both.
      expect(longer.prefix.length).toBeGreaterThan(long.prefix.length + 512);
      await engine.score(short);
      controller.abort(new Error("client gone"));
      await Promise.all([first, second]);
      expect(settled).toEqual(["second: client gone", "first"]);
      // Nothing of the cancelled request stays: the prefixes of the other two are all the cache
      // holds (a parked part is not written again when another request takes the sequence).
      await engine.idle();
      expect(engine.prefixCache!.find(longer.prefix)?.shared ?? 0).toBeLessThan(512);
      expect(engine.prefixCache!.size).toBe(2);
    });
  });
});

describe("a request of many questions gives the model up between its branches", () => {
  it("answers a short request sent behind it first, and itself as alone, to the bit", async () => {
    const options: [string, string][] = Array.from({ length: 24 }, (_, i) => [
      `team_${i + 1}`,
      `Tickets about product area number ${i + 1}, its invoices, outages and upgrades`,
    ]);
    // Questions long enough that the two left after the first are more work than the short
    // request: a turn gives the model up only to a request with less work left.
    const ask = (what: string) =>
      `Reading the ticket above and the product areas listed, which team ${what}, given who ` +
      `wrote it, what broke, since when, and what the customer asks for in the end?`;
    const wide: DecisionRequest = {
      state: SHORT.state,
      questions: [ask("owns this"), ask("should answer"), ask("fixes it")].map(
        (instructions, i) => [`q${i}`, { type: "choice", instructions, options }],
      ),
    };
    const { request, short, alone } = await besideShort(wide);
    expect(request.branches.length).toBe(3);
    await withEngine(async (engine) => {
      const { order, results } = await answeredOrder(engine, [request, short]);
      expect(order).toEqual([1, 0]);
      expect(results[0]!.branches).toEqual(alone.branches);
      expect(results[0]!.cachedPrefixTokens).toBe(0);
      // The options every question lists come first: a lead the next turn took back, not
      // evaluated again (a branch after the turn starts from the lead, a few tokens more).
      const { lead } = planDecode(request, { shared: 0, length: 0 }, { lanes: 1, batchSize: 512 });
      expect(lead.length).toBeGreaterThan(64);
      const extra = results[0]!.evaluatedTokens - alone.evaluatedTokens;
      expect(extra).toBeGreaterThanOrEqual(0);
      expect(extra).toBeLessThan(lead.length);
    });
  });
});

describe("a question with many options gives the model up between the decode calls of its branch", () => {
  /** Where `tokens` starts in `within`, or -1. */
  function sliceAt(within: readonly number[], tokens: readonly number[]): number {
    for (let at = 0; at + tokens.length <= within.length; at++)
      if (tokens.every((token, k) => within[at + k] === token)) return at;
    return -1;
  }

  it("answers a short request sent behind it first, and itself as alone, to the bit", async () => {
    // Two questions, each with its own 48 described options: branches of about 1,000 tokens
    // each after a short lead, two decode calls of at most 512 tokens and a short last call.
    const options = (what: string): [string, string][] =>
      Array.from({ length: 48 }, (_, i) => [
        `${what}_${i + 1}`,
        `${what} for product area number ${i + 1}: its invoices, outages, upgrades and refunds`,
      ]);
    const wide: DecisionRequest = {
      state: SHORT.state,
      questions: [
        [
          "queue",
          { type: "choice", instructions: "Which queue owns it?", options: options("queue") },
        ],
        [
          "team",
          { type: "choice", instructions: "Which team answers it?", options: options("team") },
        ],
      ],
    };
    const { request, short, alone } = await besideShort(wide);
    const plan = planDecode(request, { shared: 0, length: 0 }, { lanes: 1, batchSize: 512 });
    expect(plan.lanes[0]![0]!.calls.length).toBeGreaterThanOrEqual(3);
    const first = request.branches[plan.lanes[0]![0]!.index]!.tokens;
    await withEngine(async (engine) => {
      // Which request each decode call of sequence 0 belongs to: "branch" for a slice of the
      // first branch past the lead, "short" for the short request's prefix.
      const calls: string[] = [];
      const sequence = (engine as any).prefixSequence as {
        evaluateWithoutGeneratingNewTokens: (tokens: number[], ...rest: unknown[]) => Promise<void>;
      };
      const evaluate = sequence.evaluateWithoutGeneratingNewTokens.bind(sequence);
      sequence.evaluateWithoutGeneratingNewTokens = (tokens, ...rest) => {
        if (sliceAt(first, tokens) >= plan.lead.length) calls.push("branch");
        else if (sliceAt(short.prefix, tokens) >= 0) calls.push("short");
        return evaluate(tokens, ...rest);
      };
      const { order, results } = await answeredOrder(engine, [request, short]);
      expect(order).toEqual([1, 0]);
      // The short request ran between two decode calls of the first branch.
      expect(calls.indexOf("short")).toBeGreaterThan(calls.indexOf("branch"));
      expect(calls.lastIndexOf("branch")).toBeGreaterThan(calls.indexOf("short"));
      // It took back the part of the branch it had parked and evaluated no token twice.
      expect(engine.prefixCache!.stats.loaded).toBeGreaterThanOrEqual(1);
      expect(results[0]!.branches).toEqual(alone.branches);
      expect(results[0]!.evaluatedTokens).toBe(alone.evaluatedTokens);
      expect(results[0]!.cachedPrefixTokens).toBe(0);
    });
  });
});

describe("a one-question request gives the model up between the decode calls of its lead", () => {
  it("answers a short request sent behind it first, and itself as alone, to the bit", async () => {
    // ROUTED's question is almost all lead (its question and option lines), here decode calls
    // of 512 tokens at most.
    const { request, short, alone } = await besideShort(ROUTED);
    const { lead } = planDecode(request, { shared: 0, length: 0 }, { lanes: 1, batchSize: 512 });
    expect(request.branches.length).toBe(1);
    expect(lead.calls.length).toBeGreaterThanOrEqual(2);
    await withEngine(async (engine) => {
      const { order, results } = await answeredOrder(engine, [request, short]);
      expect(order).toEqual([1, 0]);
      // It took back the prefix and the part of the lead it had parked, and evaluated no token
      // twice.
      expect(engine.prefixCache!.stats.loaded).toBeGreaterThanOrEqual(1);
      expect(results[0]!.branches).toEqual(alone.branches);
      expect(results[0]!.evaluatedTokens).toBe(alone.evaluatedTokens);
      expect(results[0]!.cachedPrefixTokens).toBe(0);
    });
  });
});

describe("decode calls paced to a time budget (call-pace.ts)", () => {
  /** The sizes of the decode calls `engine` makes into sequence 0 while `run` runs. */
  async function callSizes(engine: LlamaEngine, run: () => Promise<unknown>): Promise<number[]> {
    const sequence = (engine as any).prefixSequence as {
      evaluateWithoutGeneratingNewTokens: (tokens: unknown[], ...rest: unknown[]) => Promise<void>;
    };
    const evaluate = sequence.evaluateWithoutGeneratingNewTokens.bind(sequence);
    const sizes: number[] = [];
    sequence.evaluateWithoutGeneratingNewTokens = (tokens, ...rest) => {
      sizes.push(tokens.length);
      return evaluate(tokens, ...rest);
    };
    await run();
    return sizes;
  }

  it("cuts a long prefix and a one-question lead smaller after the first call, with the same answers", async () => {
    const planned = await withEngine(async (engine) => {
      const decider = new Decider(engine, { contentFree: false });
      return [scoreRequestOf(await decider.plan(LONG)), scoreRequestOf(await decider.plan(ROUTED))];
    }, 0);
    /** `planned` scored one after the other under `callBudgetMs`, and the calls made. */
    const scoreAll = (callBudgetMs: number) =>
      withEngine(
        async (engine) => {
          const results: ScoreResult[] = [];
          const sizes = await callSizes(engine, async () => {
            for (const request of planned) results.push(await engine.score(request));
          });
          return { results, sizes };
        },
        0,
        callBudgetMs,
      );
    // No call is ever over budget: each takes the batch size, as the plan cuts them.
    const whole = await scoreAll(Infinity);
    // Every call is over a 1 ms budget: after the first of a stretch, calls of 256 tokens.
    const paced = await scoreAll(1);
    expect(Math.max(...whole.sizes)).toBeGreaterThan(256);
    // Only the first call of all: a lead starts where its prefix's calls ended.
    expect(paced.sizes.filter((size) => size > 256).length).toBe(1);
    expect(paced.sizes.length).toBeGreaterThan(whole.sizes.length);
    expect(paced.sizes.reduce((a, b) => a + b, 0)).toBe(whole.sizes.reduce((a, b) => a + b, 0));
    for (const [k, result] of paced.results.entries()) {
      expect(result.branches).toEqual(whole.results[k]!.branches);
      expect(result.evaluatedTokens).toBe(whole.results[k]!.evaluatedTokens);
    }
  });

  it("cuts the first call of a question asked deep in a cached state, with the same answers", async () => {
    const [long, deep] = await withEngine(async (engine) => {
      const decider = new Decider(engine, { contentFree: false });
      const again: DecisionRequest = { state: LONG.state, questions: ROUTED.questions };
      return [scoreRequestOf(await decider.plan(LONG)), scoreRequestOf(await decider.plan(again))];
    }, 0);
    expect(deep!.prefix).toEqual(long!.prefix);
    /** The calls `deep` makes right after `long` put its state in the KV cache. */
    const askAgain = (callBudgetMs: number) =>
      withEngine(
        async (engine) => {
          await engine.score(long!);
          let result: ScoreResult | undefined;
          const sizes = await callSizes(engine, async () => {
            result = await engine.score(deep!);
          });
          return { result: result!, sizes };
        },
        0,
        callBudgetMs,
      );
    const whole = await askAgain(Infinity);
    const paced = await askAgain(1);
    // The state is cached: the calls are the question's, 1,500+ tokens deep.
    expect(long!.prefix.length).toBeGreaterThan(1024);
    expect(whole.sizes[0]).toBeGreaterThan(256);
    // Its first call is sized by the last timed call (the state's last, over the 1 ms budget).
    expect(Math.max(...paced.sizes)).toBeLessThanOrEqual(256);
    expect(paced.result.branches).toEqual(whole.result.branches);
    expect(paced.result.evaluatedTokens).toBe(whole.result.evaluatedTokens);
  });
});

describe("the request with the least work left goes first", () => {
  it("does not give the model up to a longer request that comes while it runs", async () => {
    const requests: ScoreRequest[] = [];
    const alone: ScoreResult[] = [];
    const longer = {
      ...LONG,
      state: "The chip maker's shares fell after its quarterly results. ".repeat(200),
    };
    await withEngine(async (cold) => {
      const decider = new Decider(cold, { contentFree: false });
      for (const request of [LONG, SHORT, longer]) {
        requests.push(scoreRequestOf(await decider.plan(request)));
        alone.push(await cold.score(requests.at(-1)!));
      }
    }, 0);
    expect(requests[2]!.prefix.length).toBeGreaterThan(requests[0]!.prefix.length);
    await withEngine(async (engine) => {
      // The first long request gives way to the short one, which then runs to its end although
      // a longer request waits; the first goes on before the longer one, having less left.
      const { order, results } = await answeredOrder(engine, requests);
      expect(order).toEqual([1, 0, 2]);
      results.forEach((result, i) => expect(result.branches).toEqual(alone[i]!.branches));
    });
    // Six evaluations of up to 2,600 tokens on two engines: past the default bound on a busy box.
  }, 360_000);
});

describe("two clients of the real server", () => {
  let service: Service;
  beforeAll(async () => {
    service = await startTestService({ contextSize: 4096 });
  });
  afterAll(async () => {
    await service?.close();
  });

  const TOPIC = {
    type: "choice",
    instructions: "What is the topic of the text?",
    criteria: { sports: null, business: null, technology: null },
  };

  it("answers a short request sent while a long one runs before the long one", async () => {
    const finished: string[] = [];
    const send = (name: string, state: string) =>
      postJson(`${service.url}/v1/systemone`, {
        model: "jev-latest",
        state,
        questions: { topic: TOPIC },
      }).then((reply) => {
        finished.push(name);
        return reply;
      });
    const long = send("long", LONG.state as string);
    // The short one arrives while the long one's prefix is being evaluated.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const short = send("short", SHORT.state as string);
    const [longReply, shortReply] = await Promise.all([long, short]);
    expect(longReply.status).toBe(200);
    expect(shortReply.status).toBe(200);
    expect(finished).toEqual(["short", "long"]);
    expect(longReply.body.usage.input_tokens).toBeGreaterThan(2 * 1024);
    // Asked again alone (its prefix from the cache), the long request answers the same.
    const again = await send("again", LONG.state as string);
    expect(again.body.answers).toEqual(longReply.body.answers);
  });
});
