import { Command } from "commander";
import { afterEach, describe, expect, it } from "vitest";
import { serveOptions, toServeConfig, type ServeFlags } from "../src/cli/serve-config.js";
import { Decider } from "../src/decision/decide.js";
import { SystemOnePassThrough, toWireRequest } from "../src/decision/backends/systemone.js";
import { EngineCallError, EngineRequestError } from "../src/engine/remote/http.js";
import {
  EnginePool,
  openEnginePool,
  parseEngineList,
  parseEngineSpec,
  VllmEngine,
} from "../src/engine/remote/index.js";
import { createServer, type Server } from "node:http";
import {
  LlamaServerEngine,
  SlotPool,
  SlotTurn,
  topLogprobs,
  type CompletionAnswer,
} from "../src/engine/remote/llama-server.js";
import {
  EngineUnavailableError,
  type Engine,
  type ScoreRequest,
  type ScoreResult,
  type BranchScore,
  type ScoreBranch,
} from "../src/engine/types.js";
import { SlotPrompts } from "../src/engine/remote/llama-server-slots.js";
import { PromptTextError } from "../src/protocol/prompt-text.js";
import { startService } from "../src/service/build.js";
import { postJson } from "./support/service.js";
import { loadExchanges, replay, type Replay } from "./support/replay.js";

/** Unit tests of the remote engines: no model, no llama-server (see remote-llama-server.test.ts). */

describe("--engine KIND=URL", () => {
  it("parses a kind and an http(s) URL", () => {
    expect(parseEngineSpec("llama-server=http://127.0.0.1:8081/")).toEqual({
      kind: "llama-server",
      url: "http://127.0.0.1:8081",
    });
    expect(parseEngineList(" vllm=https://gpu:8000 ,, vllm=http://gpu2:8000")).toEqual([
      { kind: "vllm", url: "https://gpu:8000" },
      { kind: "vllm", url: "http://gpu2:8000" },
    ]);
  });

  it("gives each kind the API key its variable holds, read by the configuration", () => {
    const command = new Command();
    for (const option of serveOptions()) command.addOption(option);
    command.parse(["--engine", "vllm=http://gpu:8000", "--engine", "vllm=http://gpu2:8000"], {
      from: "user",
    });
    const flags = command.opts<ServeFlags>();
    expect(toServeConfig(flags, { VLLM_API_KEY: "sk-vllm" }).engines).toEqual([
      { kind: "vllm", url: "http://gpu:8000", apiKey: "sk-vllm" },
      { kind: "vllm", url: "http://gpu2:8000", apiKey: "sk-vllm" },
    ]);
    expect(toServeConfig(flags, { VLLM_API_KEY: "" }).engines[0]).toEqual({
      kind: "vllm",
      url: "http://gpu:8000",
    });
    expect(parseEngineSpec("llama-server=http://a:1")).not.toHaveProperty("apiKey");
  });

  it("says what is wrong with a bad one", () => {
    expect(() => parseEngineSpec("http://x")).toThrow(/expected KIND=URL/);
    expect(() => parseEngineSpec("sglang=http://x")).toThrow(/unknown engine kind "sglang"/);
    expect(() => parseEngineSpec("vllm=ftp://x")).toThrow(/http:\/\/ or https:\/\//);
    expect(() => parseEngineSpec("vllm=not a url")).toThrow(/http:\/\/ or https:\/\//);
    // What /readyz would show: no secret in an engine's name.
    const secret = () => parseEngineSpec("vllm=http://me:s3cret@gpu:8000");
    expect(secret).toThrow(/engine URL gpu:8000: remove the user:password@ part/);
    expect(secret).not.toThrow(/s3cret/);
    expect(() => parseEngineSpec("vllm=http://gpu:8000/?key=s3cret")).toThrow(/query or fragment/);
  });
});

/**
 * A character-code engine whose calls can be slowed down, made to fail, or hang (until their
 * `callTimeoutMs`, as an HTTP call would, or for ever); a frozen one does not answer its health
 * check either.
 */
function memoryEngine(name: string) {
  const state = {
    fail: false,
    hang: false,
    frozen: false,
    delayMs: 0,
    callTimeoutMs: 0,
    calls: 0,
    renders: 0,
  };
  const wait = (signal?: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      if (state.fail) return reject(new EngineCallError(name, "ECONNREFUSED"));
      const timedOut = () =>
        reject(new EngineCallError(name, `no answer within ${state.callTimeoutMs} ms`, true));
      const hangs = state.hang || state.frozen;
      if (hangs && state.callTimeoutMs > 0) setTimeout(timedOut, state.callTimeoutMs);
      const done = () => (hangs ? undefined : resolve());
      const timer = setTimeout(done, state.delayMs);
      signal?.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(signal.reason);
      });
    });
  const engine: Engine = {
    model: { id: "m", path: name, contextSize: 100_000, trainContextSize: 100_000, vision: false },
    counters: {
      requests: 0,
      prefixTokensEvaluated: 0,
      prefixTokensCached: 0,
      branchTokensEvaluated: 0,
    },
    chatTemplate: {
      name: "memory",
      async render(messages, signal) {
        state.renders++;
        await wait(signal);
        return messages.map((m) => `<${m.role}>${m.content}`).join("") + "<assistant>";
      },
    },
    async tokenize(text, options = {}) {
      await wait(options.signal);
      return [...text].map((c) => c.codePointAt(0)!);
    },
    async detokenize(tokens) {
      return String.fromCodePoint(...tokens);
    },
    async score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
      state.calls++;
      await wait(signal);
      const read = (b: ScoreBranch): BranchScore => ({
        logprobs: b.candidates.map((c) => -1 - (c % 3)),
        ...(b.children ? { children: b.children.map(read) } : {}),
      });
      return {
        branches: request.branches.map(read),
        evaluatedTokens: request.prefix.length,
        cachedPrefixTokens: 0,
      };
    },
    async ready(signal?: AbortSignal) {
      if (state.frozen)
        await new Promise((_, reject) =>
          signal?.addEventListener("abort", () => reject(signal.reason)),
        );
      return !state.fail; // a hanging call's engine still answers its health check
    },
    async close() {},
  };
  return { engine, state };
}

const REQUEST: ScoreRequest = {
  prefix: [1, 2, 3],
  branches: [{ tokens: [4], candidates: [5, 6] }],
};

describe("engine pool", () => {
  const pools: EnginePool[] = [];
  afterEach(async () => {
    for (const pool of pools.splice(0)) await pool.close();
  });
  async function poolOf(engines: Engine[], options = {}) {
    const pool = await EnginePool.open(
      engines.map((engine, i) => ({ name: `e${i}`, open: async () => engine })),
      { probeIntervalMs: 50, deadlineMs: 2000, ...options },
    );
    pools.push(pool);
    return pool;
  }

  it("sends each call to the engine with the fewest in flight", async () => {
    const a = memoryEngine("a");
    const b = memoryEngine("b");
    a.state.delayMs = 100;
    b.state.delayMs = 100;
    const pool = await poolOf([a.engine, b.engine]);
    await Promise.all(Array.from({ length: 6 }, () => pool.score(REQUEST)));
    expect(a.state.calls).toBe(3);
    expect(b.state.calls).toBe(3);
  });

  it("takes a failing engine out, serves from the other, and probes it back", async () => {
    const a = memoryEngine("a");
    const b = memoryEngine("b");
    const pool = await poolOf([a.engine, b.engine]);
    a.state.fail = true;
    for (let i = 0; i < 4; i++) await expect(pool.score(REQUEST)).resolves.toBeDefined();
    expect(pool.members.map((m) => m.healthy)).toEqual([false, true]);
    expect(a.state.calls).toBe(1); // once, then out
    a.state.fail = false;
    await new Promise((r) => setTimeout(r, 200));
    expect(pool.members.map((m) => m.healthy)).toEqual([true, true]);
  });

  it("fails with EngineUnavailableError and a retry delay when no engine answers", async () => {
    const a = memoryEngine("a");
    const pool = await poolOf([a.engine], { probeIntervalMs: 1500 });
    a.state.fail = true;
    const error = await pool.score(REQUEST).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineUnavailableError);
    expect((error as EngineUnavailableError).retryAfterSeconds).toBe(2);
    expect((error as Error).message).toMatch(/no engine is reachable.*ECONNREFUSED/);
    // Still out: the next call fails at once, without calling it.
    await expect(pool.tokenize("x")).rejects.toBeInstanceOf(EngineUnavailableError);
    expect(a.state.calls).toBe(1);
    // /readyz says why: taken out, and what its call answered.
    expect(await pool.ready()).toBe(false);
    expect(pool.notReadyReason()).toMatch(
      /^no engine answers: e0 is taken out \(engine a: ECONNREFUSED\), probed every 1500 ms$/,
    );
  });

  it("moves a call whose engine stops answering: a call timeout, or a frozen engine", async () => {
    const a = memoryEngine("a");
    const b = memoryEngine("b");
    const pool = await poolOf([a.engine, b.engine]);
    a.state.hang = true;
    a.state.callTimeoutMs = 300; // an HTTP call past its timeout
    let started = performance.now();
    await expect(pool.score(REQUEST)).resolves.toBeDefined();
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(pool.members.map((m) => m.healthy)).toEqual([false, true]);
    expect(b.state.calls).toBe(1);

    // Frozen, with calls that would wait 10 s: two health checks unanswered move the call.
    const c = memoryEngine("c");
    const d = memoryEngine("d");
    const frozen = await poolOf([c.engine, d.engine], { probeIntervalMs: 100 });
    c.state.frozen = true;
    c.state.callTimeoutMs = 10_000;
    started = performance.now();
    await expect(frozen.score(REQUEST)).resolves.toBeDefined();
    expect(performance.now() - started).toBeLessThan(8000); // two checks of 2 s
    expect(frozen.members.map((m) => m.healthy)).toEqual([false, true]);
    // Ready while one engine answers, whichever is frozen.
    await expect(frozen.ready(AbortSignal.timeout(3000))).resolves.toBe(true);
  });

  it("alone, a call past its timeout is a 503; a slow engine's calls are not cut", async () => {
    const a = memoryEngine("a");
    const pool = await poolOf([a.engine], { deadlineMs: 200 });
    a.state.hang = true;
    a.state.callTimeoutMs = 300;
    const error = await pool.score(REQUEST).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineUnavailableError);
    expect((error as Error).message).toMatch(/no answer within 300 ms/);
    // Alone, a timeout does not take it out: the next call goes to it.
    expect(pool.members[0]!.healthy).toBe(true);
    a.state.hang = false;
    a.state.delayMs = 400; // longer than the pool's deadline: a call is bounded by its caller
    await expect(pool.score(REQUEST)).resolves.toBeDefined();
  });

  it("is ready while some engine answers its health check, asked at once", async () => {
    const a = memoryEngine("a");
    const b = memoryEngine("b");
    const pool = await poolOf([a.engine, b.engine]);
    a.state.frozen = true;
    const started = performance.now();
    await expect(pool.ready(AbortSignal.timeout(2000))).resolves.toBe(true);
    expect(performance.now() - started).toBeLessThan(1000);
    b.state.frozen = true;
    await expect(pool.ready(AbortSignal.timeout(300))).resolves.toBe(false);
  });

  it("passes the caller's abort through as it is", async () => {
    const a = memoryEngine("a");
    a.state.delayMs = 1000;
    const pool = await poolOf([a.engine]);
    const controller = new AbortController();
    const call = pool.score(REQUEST, controller.signal);
    controller.abort(new DOMException("gone", "AbortError"));
    await expect(call).rejects.toMatchObject({ name: "AbortError" });
    expect(pool.members[0]!.healthy).toBe(true);
  });

  it("puts an engine back only when it opens again as it was: same model", async () => {
    const a = memoryEngine("a");
    const b = memoryEngine("b");
    let restarted: Engine | undefined;
    const pool = await EnginePool.open(
      [
        { name: "a", open: async () => restarted ?? a.engine },
        { name: "b", open: async () => b.engine },
      ],
      { probeIntervalMs: 50 },
    );
    pools.push(pool);
    a.state.fail = true;
    await pool.score(REQUEST);
    expect(pool.members.map((m) => m.healthy)).toEqual([false, true]);
    // Back up, but serving another model: it stays out and says why.
    a.state.fail = false;
    restarted = { ...a.engine, model: { ...a.engine.model, id: "other" } };
    await new Promise((r) => setTimeout(r, 200));
    expect(pool.members.map((m) => m.healthy)).toEqual([false, true]);
    await expect(pool.score({ ...REQUEST, prefix: [] })).resolves.toBeDefined();
    restarted = undefined;
    await new Promise((r) => setTimeout(r, 200));
    expect(pool.members.map((m) => m.healthy)).toEqual([true, true]);
  });

  it("opens with an engine down and adds it when it comes up", async () => {
    const b = memoryEngine("b");
    let up = false;
    const pool = await EnginePool.open(
      [
        {
          name: "late",
          open: async () => {
            if (!up) throw new EngineCallError("late", "ECONNREFUSED");
            return b.engine;
          },
        },
        { name: "first", open: async () => memoryEngine("first").engine },
      ],
      { probeIntervalMs: 50 },
    );
    pools.push(pool);
    expect(pool.members.map((m) => m.healthy)).toEqual([false, true]);
    up = true;
    await new Promise((r) => setTimeout(r, 200));
    expect(pool.members.map((m) => m.healthy)).toEqual([true, true]);
  });

  it("refuses engines that serve different models", async () => {
    const a = memoryEngine("a").engine;
    const other = { ...memoryEngine("b").engine, model: { ...a.model, id: "other" } };
    await expect(poolOf([a, other])).rejects.toThrow(/different models: m and other/);
  });
});

/**
 * A fake engine on a free local port: each request is answered with the JSON `answer(path, body)`
 * gives (`body` parsed, `undefined` when there is none), 404 where it gives `undefined`, or the
 * status it gives as a number.
 */
async function fakeEngine(
  answer: (path: string, body: Record<string, unknown> | undefined) => unknown | Promise<unknown>,
): Promise<{ url: string; close: () => void }> {
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      void Promise.resolve(answer(request.url ?? "", text ? JSON.parse(text) : undefined)).then(
        (value) => {
          if (typeof value === "number") {
            response.statusCode = value;
            return response.end("{}");
          }
          if (value === undefined) response.statusCode = 404;
          response.end(JSON.stringify(value ?? {}));
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
}

/**
 * What a llama-server of a 100-token model with `slots` slots answers to `open`'s `/props` and
 * `/v1/models`, to its probe of the slots (`/completion`, nothing said of the cache) and to
 * `/health`.
 */
function llamaServerModel(path: string, slots = 1): unknown {
  if (path === "/props")
    return {
      default_generation_settings: { n_ctx: 4096 },
      model_path: "/m/x.gguf",
      total_slots: slots,
    };
  if (path === "/v1/models") return { data: [{ id: "x", meta: { n_vocab: 100 } }] };
  if (path === "/completion") return {};
  if (path === "/health") return { status: "ok" };
  return undefined;
}

describe("a remote engine's answers that cannot be right", () => {
  const answer = (entries: { id: number; logprob: unknown }[]) =>
    ({ completion_probabilities: [{ top_logprobs: entries }] }) as CompletionAnswer;

  it("reads log-probabilities of a distribution, and refuses what cannot be one", () => {
    const fine = topLogprobs(
      answer([
        { id: 5, logprob: -0.2 },
        { id: 9, logprob: -2 },
      ]),
      100,
    );
    expect([...fine!]).toEqual([
      [5, -0.2],
      [9, -2],
    ]);
    expect(topLogprobs(answer([]), 100)?.size).toBe(0);
    for (const bad of [
      [{ id: 5, logprob: "abc" }], // not a number
      [{ id: 5, logprob: null }],
      [{ id: 5, logprob: 5 }], // p > 1
      [
        { id: 5, logprob: -0.1 },
        { id: 6, logprob: -0.1 },
      ], // sums to 1.8
      [{ id: 5, logprob: -1e308 }], // the most likely token below 1 in 100
      [{ id: 100, logprob: -0.1 }], // outside the vocabulary
      [{ id: -1, logprob: -0.1 }],
    ])
      expect(topLogprobs(answer(bad), 100)).toBeUndefined();
  });

  it("refuses a vLLM whose /v1/models names no model", async () => {
    let models: unknown = { data: "nope" };
    const { url, close } = await fakeEngine(() => models);
    try {
      for (models of [{ data: "nope" }, { data: [{}] }, { data: [{ id: "" }] }, {}])
        await expect(VllmEngine.open({ url })).rejects.toThrow(/lists no model/);
      models = { data: [{ id: "qwen", max_model_len: 8192 }] };
      const engine = await VllmEngine.open({ url });
      expect(engine.model).toMatchObject({ id: "qwen", contextSize: 8192 });
      await engine.close();
    } finally {
      close();
    }
  });

  it("opens a llama-server only when it has loaded the adapter decisiond reads for", async () => {
    let adapters: unknown = [{ id: 0, path: "/srv/adapters/a.decision.gguf", scale: 1 }];
    const { url, close } = await fakeEngine((path) =>
      path === "/lora-adapters" && adapters !== 404 ? adapters : llamaServerModel(path),
    );
    const open = (adapter: string) => LlamaServerEngine.open({ url, adapter });
    try {
      await expect(open("adapters/a.decision.gguf")).resolves.toBeDefined();
      await expect(open("none")).resolves.toBeDefined(); // named at scale 0
      await expect(open("b.gguf")).rejects.toThrow(
        /loads a\.decision\.gguf, but decisiond reads its answers for --adapter b\.gguf/,
      );
      adapters = [{ id: 0, path: "/srv/a.decision.gguf", scale: 0 }]; // loaded, turned off
      await expect(open("a.decision.gguf")).resolves.toBeDefined();
      adapters = [];
      await expect(open("a.decision.gguf")).rejects.toThrow(/loads none/);
      await expect(open("none")).resolves.toBeDefined();
      adapters = 404; // a server without the route is not checked
      await expect(open("a.decision.gguf")).resolves.toBeDefined();
    } finally {
      close();
    }
  });

  it("names the adapter at scale 1 and every other at 0 in every call", async () => {
    let adapters: unknown = [{ id: 0, path: "/srv/a.decision.gguf", scale: 1 }];
    const loras: unknown[] = [];
    const { url, close } = await fakeEngine((path, body) => {
      if (path === "/lora-adapters") return adapters;
      if (path === "/completion") {
        loras.push(body!.lora);
        return { completion_probabilities: [{ top_logprobs: [{ id: 7, logprob: -0.1 }] }] };
      }
      return llamaServerModel(path);
    });
    const request: ScoreRequest = {
      prefix: [10, 11, 12],
      branches: [{ tokens: [5], candidates: [7] }],
    };
    // Every call, the slot probe's at open included.
    const callsOf = async (adapter: string | undefined) => {
      loras.length = 0;
      const engine = await LlamaServerEngine.open({ url, ...(adapter ? { adapter } : {}) });
      await engine.score(request);
      await engine.close();
      return [...new Set(loras.map((l) => JSON.stringify(l)))];
    };
    try {
      expect(await callsOf("a.decision.gguf")).toEqual([JSON.stringify([{ id: 0, scale: 1 }])]);
      expect(await callsOf("none")).toEqual([JSON.stringify([{ id: 0, scale: 0 }])]);
      // Started at another scale, or turned off: the scale decisiond reads for, 1.
      adapters = [
        { id: 0, path: "/srv/other.gguf", scale: 1 },
        { id: 1, path: "/srv/a.decision.gguf", scale: 0.3 },
      ];
      expect(await callsOf("a.decision.gguf")).toEqual([
        JSON.stringify([
          { id: 0, scale: 0 },
          { id: 1, scale: 1 },
        ]),
      ]);
      expect(await callsOf(undefined)).toEqual([undefined]); // not checked: the server's own
      adapters = [];
      expect(await callsOf("none")).toEqual([undefined]); // nothing loaded: nothing to name
    } finally {
      close();
    }
  });

  it("refuses /tokenize answers that are not this model's tokens", async () => {
    let tokens: unknown = [1, 2];
    const { url, close } = await fakeEngine((path) =>
      path === "/tokenize" ? { tokens } : llamaServerModel(path),
    );
    try {
      const engine = await LlamaServerEngine.open({ url });
      await expect(engine.tokenize("hi")).resolves.toEqual([1, 2]);
      for (tokens of ["abc", [], [-5], [999_999_999], [1.5], null])
        await expect(engine.tokenize("hi")).rejects.toBeInstanceOf(EngineCallError);
      tokens = [];
      await expect(engine.tokenize("")).resolves.toEqual([]);
      await engine.close();
    } finally {
      close();
    }
  });
});

/**
 * A llama-server of `slots` slots whose `/completion` calls keep their slot busy for `ms`, whether
 * or not the client is still there, as the server's own loop does; `GET /slots` says which are
 * busy. `overlaps` lists every call that named a slot still busy (what corrupts a real one).
 */
async function busyLlamaServer(ms: number, slots = 1) {
  const busyUntil = new Map<number, number>();
  const overlaps: string[] = [];
  const fails = { tokenize: false };
  const server = await fakeEngine(async (path, body) => {
    if (path === "/slots")
      return Array.from({ length: slots }, (_, id) => ({
        id,
        is_processing: (busyUntil.get(id) ?? 0) > Date.now(),
      }));
    if (path === "/tokenize")
      return fails.tokenize ? ((fails.tokenize = false), 500) : { tokens: [1] };
    if (path !== "/completion") return llamaServerModel(path, slots);
    const slot = body!.id_slot as number;
    const prompt = body!.prompt as number[];
    const left = (busyUntil.get(slot) ?? 0) - Date.now();
    if (left > 0) overlaps.push(`slot ${slot}: ${prompt.length} tokens while busy ${left} ms more`);
    busyUntil.set(slot, Date.now() + ms);
    await new Promise((resolve) => setTimeout(resolve, ms));
    return {
      completion_probabilities: [{ top_logprobs: [{ id: 7, logprob: -0.1 }] }],
      timings: { prompt_n: prompt.length, cache_n: 0 },
    };
  });
  return { ...server, overlaps, fails };
}

/** A request of an `n`-token prefix and one branch. */
const requestOf = (n: number): ScoreRequest => ({
  prefix: Array.from({ length: n }, (_, i) => 10 + (i % 50)),
  branches: [{ tokens: [5], candidates: [7] }],
});

describe("slots of a llama-server", () => {
  it("holds every slot for a task; a retired pool refuses those that wait and come", async () => {
    const pool = new SlotPool(2);
    const running = await pool.acquire({ rank: 500 });
    const order: string[] = [];
    const all = pool.holdAll(async () => {
      order.push("all");
      expect(pool.queued).toBe(1);
    });
    const waiting = pool.acquire({ rank: 10 }).then((slot) => (order.push("waiting"), slot));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(order).toEqual([]); // a slot is still held
    pool.release(running);
    await all;
    await waiting;
    expect(order).toEqual(["all", "waiting"]);
    const late = pool.acquire();
    const retiring = pool.holdAll(async () => pool.retire(new Error("restarted")));
    pool.release(await waiting);
    await late.then((slot) => pool.release(slot));
    await retiring;
    await expect(pool.acquire()).rejects.toThrow("restarted");
  });

  it("gives an aborted call's slot to no one until the server is done with it", async () => {
    const server = await busyLlamaServer(300);
    try {
      const engine = await LlamaServerEngine.open({ url: server.url, batchSize: 128 });
      await new Promise((resolve) => setTimeout(resolve, 300)); // the probe's last call
      const controller = new AbortController();
      const aborted = engine.score(requestOf(300), controller.signal);
      const next = engine.score(requestOf(10));
      setTimeout(() => controller.abort(new Error("hung up")), 100);
      await expect(aborted).rejects.toThrow("hung up");
      await expect(next).resolves.toMatchObject({ branches: [{ logprobs: [-0.1] }] });
      expect(server.overlaps).toEqual([]);
      await engine.close();
    } finally {
      server.close();
    }
  });

  it("opened again after an outage, takes its slots over from the engine it replaces", async () => {
    const server = await busyLlamaServer(100);
    try {
      const spec = { kind: "llama-server", url: server.url } as const;
      const pool = await openEnginePool([spec], { probeIntervalMs: 20 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      let longDone = false;
      const long = pool.score(requestOf(1_500)).finally(() => (longDone = true)); // 12 calls
      await new Promise((resolve) => setTimeout(resolve, 150));
      server.fails.tokenize = true; // one 500: the engine is taken out, then opened again
      await expect(pool.tokenize("x")).rejects.toBeInstanceOf(EngineUnavailableError);
      for (let i = 0; i < 200 && !pool.members[0]!.healthy; i++)
        await new Promise((resolve) => setTimeout(resolve, 20));
      expect(pool.members[0]!.healthy).toBe(true);
      // This server restores no prompt: the long request keeps its slot to its end, and the
      // engine came back without waiting for it.
      expect(longDone).toBe(false);
      await Promise.all([long, pool.score(requestOf(10))]);
      expect(server.overlaps).toEqual([]);
      await pool.close();
    } finally {
      server.close();
    }
  });

  it("hands out each slot once and serves waiters in order", async () => {
    const slots = new SlotPool(2);
    const first = await slots.acquire();
    const second = await slots.acquire();
    const order: number[] = [];
    const third = slots.acquire().then((s) => order.push(s));
    const controller = new AbortController();
    const fourth = slots.acquire({ signal: controller.signal });
    controller.abort(new Error("left"));
    await expect(fourth).rejects.toThrow("left");
    expect(slots.queued).toBe(1);
    slots.release(second);
    await third;
    expect(order).toEqual([second]);
    expect(first).not.toBe(second);
  });

  it("gives a slot up between calls to a shorter request, and takes one again after it", async () => {
    const pool = new SlotPool(1);
    const long = await SlotTurn.take(pool, 1_000);
    const order: string[] = [];
    const short = SlotTurn.take(pool, 50).then((turn) => (order.push("short"), turn));
    await long.beforeCall(true); // no call made in this turn yet: keeps the slot
    expect(long.slot).toBe(0);
    long.afterCall(100);
    await long.beforeCall(false); // not taking turns: keeps the slot
    expect(long.slot).toBe(0);
    const longer = SlotTurn.take(pool, 5_000);
    const resumed = long.beforeCall(true).then(() => order.push("long"));
    const shortTurn = await short;
    expect(shortTurn.slot).toBe(0);
    shortTurn.afterCall(50);
    shortTurn.release();
    await resumed; // 900 tokens left: before the longer request
    expect(order).toEqual(["short", "long"]);
    expect(pool.queued).toBe(1);
    long.afterCall(900);
    long.release();
    (await longer).release();
    expect(pool.queued).toBe(0);
  });

  it("knows what a slot holds after a call answered, and nothing before, or while one is out", () => {
    const held = new SlotPrompts(2);
    const prefix = [1, 2, 3, 4];
    const unknown = { shared: 0, length: undefined };
    expect(held.heldPrefix(0, prefix)).toEqual(unknown); // not called yet: anything
    expect(held.mustCut(0, prefix, 0)).toBe(true);
    held.forget(0);
    held.called(0, [1, 2, 3, 9], 3);
    expect(held.heldPrefix(0, prefix)).toEqual({ shared: 3, length: 3 });
    expect(held.mustCut(0, prefix, 3)).toBe(false);
    expect(held.mustCut(0, prefix, 2)).toBe(true); // holds 3 of them: cut back to 2
    held.called(0, [1, 2], null); // a request whose prefix was broken off
    expect(held.heldPrefix(0, prefix)).toEqual(unknown);
    expect(held.mustCut(0, prefix, 2)).toBe(false);
    held.called(1, [1, 2, 3], 3);
    held.forget(0); // a call out that never answers
    expect(held.heldPrefix(0, prefix)).toEqual(unknown);
    expect(held.mustCut(0, prefix, 0)).toBe(true);
    expect(held.heldPrefix(1, prefix)).toEqual({ shared: 3, length: 3 }); // not touched
  });

  it("after a failed call, evaluates the next prefix whole, then cuts a slot back", async () => {
    const calls: { prompt: number[]; cache: unknown }[] = [];
    let failAt = 0;
    const { url, close } = await fakeEngine((path, body) => {
      if (path !== "/completion") return llamaServerModel(path);
      const prompt = body!.prompt as number[];
      calls.push({ prompt, cache: body!.cache_prompt });
      if (calls.length === failAt) return undefined; // 404: the call failed
      return {
        completion_probabilities: [{ top_logprobs: [{ id: 7, logprob: -0.1 }] }],
        timings: { prompt_n: prompt.length, cache_n: 0 },
      };
    });
    try {
      const engine = await LlamaServerEngine.open({ url });
      calls.length = 0;
      failAt = 2; // the request's second /completion call fails
      const request: ScoreRequest = {
        prefix: Array.from({ length: 70 }, (_, i) => 10 + (i % 50)),
        branches: [{ tokens: [5], candidates: [7] }],
      };
      await expect(engine.score(request)).rejects.toThrow();
      calls.length = 0;
      failAt = 0;
      await engine.score(request);
      // From the start: no cut, and nothing taken from what the server holds or would restore.
      expect(calls[0]).toEqual({ prompt: request.prefix, cache: false });
      expect(calls[1]).toEqual({ prompt: [...request.prefix, 5], cache: true });
      // Answered: the next request keeps the prefix and cuts only its branch off (5 → 6).
      calls.length = 0;
      await engine.score(request);
      expect(calls[0]).toEqual({ prompt: [...request.prefix, 6], cache: true });
      await engine.close();
    } finally {
      close();
    }
  });

  it("uses one slot of a server that clears idle slots; says what a server does not keep", async () => {
    let keeps = false;
    let restores = true;
    let down = false;
    const { url, close } = await fakeEngine((path, body) => {
      if (down) return 503;
      if (path !== "/completion") return llamaServerModel(path, 4);
      const prompt = body!.prompt as number[];
      // The probe's first call again, one token longer after another slot's call (kept), two
      // tokens longer after another prompt on its slot (restored).
      const hit = prompt.length === 17 ? keeps : prompt.length === 18 ? restores : false;
      const cached = hit ? 16 : 0;
      return { timings: { prompt_n: prompt.length - cached, cache_n: cached } };
    });
    try {
      let notices: string[] = [];
      const onNotice = (m: string) => notices.push(m);
      const clears = await LlamaServerEngine.open({ url, onNotice });
      expect(clears.slotCount).toBe(1);
      expect(notices).toEqual([expect.stringMatching(/uses 1 of its 4 slots/)]);
      keeps = true;
      notices = [];
      const keeping = await LlamaServerEngine.open({ url, onNotice });
      expect(keeping.slotCount).toBe(4);
      expect(notices).toEqual([]);
      restores = false;
      const noTurns = await LlamaServerEngine.open({ url, onNotice });
      expect(noTurns.slotCount).toBe(4);
      expect(notices).toEqual([expect.stringMatching(/--cache-ram 0.*keeps its slot to its end/)]);
      // A pool opens an engine again after an outage: each notice is said once.
      notices = [];
      const spec = { kind: "llama-server", url } as const;
      await expect(openEnginePool([spec, spec])).rejects.toThrow(/names http:\S+ twice/);
      const pool = await openEnginePool([spec], { onNotice, probeIntervalMs: 20 });
      expect(notices).toHaveLength(1);
      down = true;
      await expect(pool.tokenize("x")).rejects.toBeInstanceOf(EngineUnavailableError);
      expect(pool.members[0]!.healthy).toBe(false);
      down = false;
      for (let i = 0; i < 100 && !pool.members[0]!.healthy; i++)
        await new Promise((r) => setTimeout(r, 20));
      expect(pool.members[0]!.healthy).toBe(true); // opened again, its slots probed again
      expect(notices).toHaveLength(1);
      await pool.close();
    } finally {
      close();
    }
  });
});

describe("a Decider over an engine that may be remote", () => {
  const QUESTIONS = [["q", { type: "noul" as const, instructions: "Is it?" }]] as const;

  it("prepares its prompt once; a first caller that hangs up does not cancel it", async () => {
    const { engine, state } = memoryEngine("a");
    state.delayMs = 50;
    const decider = new Decider(engine, { examples: false, contentFree: false });
    const controller = new AbortController();
    const first = decider.decide({ state: "x", questions: QUESTIONS }, controller.signal);
    const second = decider.decide({ state: "y", questions: QUESTIONS });
    setTimeout(() => controller.abort(new DOMException("client left", "AbortError")), 10);
    await expect(first).rejects.toMatchObject({ name: "AbortError" });
    const result = await second;
    expect(result.answers.q?.type).toBe("noul");
    // Two renders (the tail, then the head), shared by both requests.
    expect(state.renders).toBe(2);
  });

  it("prepares again after a preparation failed", async () => {
    const { engine, state } = memoryEngine("a");
    const decider = new Decider(engine, { examples: false, contentFree: false });
    state.fail = true;
    await expect(decider.decide({ state: "x", questions: QUESTIONS })).rejects.toBeInstanceOf(
      EngineCallError,
    );
    state.fail = false;
    await expect(decider.decide({ state: "x", questions: QUESTIONS })).resolves.toBeDefined();
  });
});

describe("vLLM backend on recorded exchanges", () => {
  let server: Replay;
  afterEach(async () => {
    expect(server.unmatched).toEqual([]);
    await server.close();
  });

  it("reads the model, tokenizes, renders the chat template and scores", async () => {
    server = await replay(loadExchanges("vllm/exchanges"));
    const engine = await VllmEngine.open({ url: `${server.url}/v1` });
    expect(engine.model).toMatchObject({ id: "Qwen/Qwen2.5-0.5B-Instruct", contextSize: 32768 });
    expect(await engine.ready()).toBe(true);
    const prefix = await engine.tokenize("The parcel arrived.");
    expect(prefix).toEqual([785, 29309, 11052, 13]);
    expect(
      await engine.chatTemplate.render([
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hi" },
      ]),
    ).toBe(
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    );
    const tail = await engine.tokenize("<|im_end|>\n<|im_start|>assistant\n", { special: true });
    const result = await engine.score({
      prefix,
      branches: [
        { tokens: [3872, 432, 4124, 30, ...tail], candidates: [9454, 2753] },
        {
          tokens: [23085, 2083, 30, ...tail],
          candidates: [6032, 11451],
          children: [{ tokens: [11451], candidates: [287] }],
        },
      ],
    });
    // Top logprobs for all but candidate 11451, which came from prompt_logprobs.
    expect(result.branches).toEqual([
      { logprobs: [-0.2231, -1.7148] },
      { logprobs: [-0.9163, -2.9957], children: [{ logprobs: [-0.0513] }] },
    ]);
    expect(result.cachedPrefixTokens).toBe(0);
    expect(result.evaluatedTokens).toBe(4 + 13 + 12 + 13);
  });

  it("refuses state text that vLLM would read as a control token", async () => {
    server = await replay(loadExchanges("vllm/exchanges"));
    const engine = await VllmEngine.open({ url: server.url });
    await expect(engine.tokenize("ok <|im_end|>")).rejects.toBeInstanceOf(PromptTextError);
  });

  it("passes a 4xx on as a refusal, not as an engine failure", async () => {
    server = await replay(loadExchanges("vllm/exchanges"));
    const engine = await VllmEngine.open({ url: server.url });
    const error = await engine.tokenize("refused").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineRequestError);
    expect((error as EngineRequestError).status).toBe(400);
  });

  it("counts a server that is gone as an engine failure", async () => {
    server = await replay(loadExchanges("vllm/exchanges"));
    const engine = await VllmEngine.open({ url: server.url });
    await server.close();
    await expect(engine.tokenize("The parcel arrived.")).rejects.toBeInstanceOf(EngineCallError);
    server = await replay([]);
  });
});

describe("pass-through to a native /v1/systemone", () => {
  let server: Replay;
  afterEach(async () => {
    expect(server.unmatched).toEqual([]);
    await server.close();
  });
  const exchanges = loadExchanges("systemone/exchanges");
  const recorded = exchanges[1]!.body as { model: string; state: string; questions: object };

  it("detects the endpoint: a validation answer, not a 404", async () => {
    server = await replay(exchanges);
    expect(await SystemOnePassThrough.detect(server.url)).toBe(true);
    const none = await replay([]);
    expect(await SystemOnePassThrough.detect(none.url)).toBe(false);
    none.unmatched.length = 0;
    await none.close();
  });

  it("forwards the validated request and returns the engine's answers through the API", async () => {
    server = await replay(exchanges);
    const service = await startService({
      passThrough: new SystemOnePassThrough({ urls: [server.url] }),
      modelId: "smollm2-135m-instruct",
      host: "127.0.0.1",
      port: 0,
      logger: false,
    });
    try {
      const ok = await postJson(`${service.url}/v1/systemone`, recorded);
      expect(ok.status).toBe(200);
      expect(ok.body).toEqual(exchanges[1]!.response);
      const refused = await postJson(`${service.url}/v1/systemone`, exchanges[2]!.body);
      expect(refused.status).toBe(422);
      expect(refused.body.detail[0].type).toBe("state_too_long");
      // decisiond's own validation answers before the engine is asked.
      const bad = await postJson(`${service.url}/v1/systemone`, { model: recorded.model });
      expect(bad.status).toBe(422);
      await server.close();
      const down = await postJson(`${service.url}/v1/systemone`, recorded);
      expect(down.status).toBe(503);
      expect(down.headers.get("retry-after")).toBe("1");
      expect(down.body.detail.error_type).toBe("engine_unreachable");
      server = await replay([]);
    } finally {
      await service.close();
    }
  });

  it("writes the wire body back in request order", () => {
    const body = toWireRequest("m", {
      state: { a: 1 },
      questions: [
        [
          "c",
          {
            type: "choice",
            options: [
              ["x", null],
              ["y", "why"],
            ],
          },
        ],
        ["s", { type: "score", instructions: "How?", levels: ["lo", "hi"] }],
      ],
    });
    expect(body).toEqual({
      model: "m",
      state: { a: 1 },
      questions: {
        c: { type: "choice", criteria: { x: null, y: "why" } },
        s: { type: "score", instructions: "How?", criteria: ["lo", "hi"] },
      },
    });
    expect(Object.keys(body.questions as object)).toEqual(["c", "s"]);
  });
});
