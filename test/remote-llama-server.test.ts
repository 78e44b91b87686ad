import { resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SystemOneRequestSchema } from "../src/protocol/schemas.js";
import { toDecisionRequest } from "../src/decision/from-wire.js";
import { Decider } from "../src/decision/decide.js";
import type { DecisionRequest } from "../src/decision/types.js";
import { openRemoteEngines } from "../src/decision/backends/remote.js";
import { EnginePool, LlamaServerEngine } from "../src/engine/remote/index.js";
import type { ScoreResult } from "../src/engine/types.js";
import type { Service } from "../src/service/build.js";
import { startLlamaServer, type LlamaServerProcess } from "./support/llama-server.js";
import { postJson, startTestService } from "./support/service.js";

/**
 * The remote path against a real llama.cpp `llama-server` (built by
 * scripts/build-llama-server.sh) on the same GGUF the embedded engine loads.
 */

const MODEL = "smollm2-135m-instruct";

/** The clear-cut rows of bench/clear-cut.mjs: unmistakable sentiment or topic. */
const CLEAR_CUT: [string, "sentiment" | "topic"][] = [
  ["I love this movie, it is wonderful!", "sentiment"],
  ["This was the worst meal I have ever eaten. Disgusting.", "sentiment"],
  ["Absolutely fantastic service, the staff were kind and helpful.", "sentiment"],
  ["Terrible product. It broke after one day and support ignored me.", "sentiment"],
  ["What a beautiful day, I am so happy!", "sentiment"],
  ["I hate waiting in line for hours, this is awful.", "sentiment"],
  ["The concert was amazing, best night of my life.", "sentiment"],
  ["Horrible hotel: dirty rooms, rude staff, never again.", "sentiment"],
  ["Great book, I enjoyed every page.", "sentiment"],
  ["The film was boring and painfully bad.", "sentiment"],
  ["The striker scored twice as United beat City 3-1 in the league final.", "topic"],
  ["Shares of the bank fell 5% after quarterly profits missed forecasts.", "topic"],
  ["The new smartphone chip uses a 3-nanometre process and an AI accelerator.", "topic"],
  ["The tennis champion won her fifth Wimbledon title on Sunday.", "topic"],
  ["The central bank raised interest rates to fight inflation, hitting stock markets.", "topic"],
  ["Researchers released an open-source programming language for quantum computers.", "topic"],
  ["The basketball team signed a new point guard before the playoffs.", "topic"],
  ["The retailer's revenue grew 12% and it announced a merger with a rival company.", "topic"],
  ["Engineers shipped a software update that fixes a security bug in the browser.", "topic"],
  ["The marathon runner broke the world record in Berlin.", "topic"],
];
const QUESTIONS = {
  sentiment: {
    type: "choice",
    instructions: "What is the sentiment of the text?",
    criteria: { positive: null, negative: null },
  },
  topic: {
    type: "choice",
    instructions: "What is the topic of the text?",
    criteria: { sports: null, business: null, technology: null },
  },
} as const;

/** Rows with every question type, option descriptions and a state past 64 tokens. */
const MIXED: { state: unknown; questions: Record<string, unknown> }[] = [
  {
    state: {
      ticket:
        "My parcel arrived two weeks late, the box was crushed and the glass inside was broken. " +
        "I was also charged twice for the delivery. I have written three times and nobody " +
        "answered. I want my money back today or I will dispute the payment with my bank.",
      customer: { plan: "premium", since: 2019 },
    },
    questions: {
      team: {
        type: "choice",
        instructions: "Which team should handle this ticket first?",
        criteria: {
          billing: "Payments, double charges, refunds",
          shipping: "Deliveries and damaged parcels",
          technical: "Bugs and outages",
        },
      },
      angry: { type: "noul", instructions: "Is the customer angry?" },
      urgency: {
        type: "score",
        instructions: "How urgent is the ticket?",
        criteria: ["not urgent", "somewhat urgent", "very urgent"],
      },
    },
  },
  {
    state: "The meeting moved to Thursday at 3 pm; please bring the signed contract.",
    questions: {
      action: { type: "noul", instructions: "Does the reader need to do something?" },
      kind: {
        type: "choice",
        instructions: "What kind of message is this?",
        criteria: { scheduling: null, invoice: null, complaint: null, spam: null },
      },
    },
  },
  {
    state: "Five stars. Fast shipping, works exactly as described, would buy again.",
    questions: {
      stars: {
        type: "score",
        instructions: "How satisfied is the reviewer?",
        criteria: ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"],
      },
    },
  },
];

/** A wire row as the decision layer's request. */
function decisionRequest(row: (typeof MIXED)[number]): DecisionRequest {
  return toDecisionRequest(SystemOneRequestSchema.parse({ model: MODEL, ...row }));
}

/** Every probability of a response, keyed `question/option`. */
function probabilitiesOf(body: {
  answers: Record<string, { type: string; noul?: number; probabilities?: Record<string, number> }>;
}): Map<string, number> {
  const out = new Map<string, number>();
  for (const [id, answer] of Object.entries(body.answers)) {
    if (answer.type === "noul") out.set(`${id}/true`, answer.noul!);
    else for (const [k, p] of Object.entries(answer.probabilities!)) out.set(`${id}/${k}`, p);
  }
  return out;
}

describe("decisions through a real llama-server", () => {
  let server: LlamaServerProcess;
  let embedded: Service;
  let remote: Service;

  beforeAll(async () => {
    server = await startLlamaServer({ modelPath: inject("modelPath") });
    embedded = await startTestService();
    // A generous deadline: the 2-core machine is shared with other jobs.
    const serving = await openRemoteEngines([{ kind: "llama-server", url: server.url }], {
      deadlineMs: 300_000,
    });
    if (serving.kind !== "engine") throw new Error("expected an engine, not a pass-through");
    remote = await startTestService({ engine: serving.engine });
  }, 40 * 60_000);

  afterAll(async () => {
    await remote?.close();
    await embedded?.close();
    await server?.kill();
  });

  it("plans the same prompt tokens as the embedded engine", async () => {
    for (const row of MIXED) {
      const request = decisionRequest(row);
      const ours = await embedded.decider.plan(request);
      const theirs = await remote.decider.plan(request);
      expect(theirs.prefix).toEqual(ours.prefix);
      expect(theirs.branches).toEqual(ours.branches);
    }
  });

  it("answers the clear-cut and mixed rows within ±0.02 of the embedded engine", async () => {
    const rows = [
      ...CLEAR_CUT.map(([state, q]) => ({ state, questions: { [q]: QUESTIONS[q] } })),
      ...MIXED,
    ];
    let worst = 0;
    let count = 0;
    const diffs: { diff: number; where: string }[] = [];
    for (const row of rows) {
      const body = { model: MODEL, ...row };
      const a = await postJson(`${embedded.url}/v1/systemone`, body);
      const b = await postJson(`${remote.url}/v1/systemone`, body);
      expect(a.status, JSON.stringify(a.body)).toBe(200);
      expect(b.status, JSON.stringify(b.body)).toBe(200);
      const pa = probabilitiesOf(a.body);
      const pb = probabilitiesOf(b.body);
      expect([...pb.keys()]).toEqual([...pa.keys()]);
      for (const [key, p] of pa) {
        const diff = Math.abs(p - pb.get(key)!);
        worst = Math.max(worst, diff);
        count++;
        diffs.push({ diff, where: `${JSON.stringify(row.state).slice(0, 40)} ${key}` });
      }
    }
    console.log(`parity: ${count} probabilities, largest difference ${worst.toFixed(5)}`);
    console.log(diffs.map((d) => `${d.diff.toFixed(5)} ${d.where}`).join("\n"));
    for (const { diff, where } of diffs) expect(diff, where).toBeLessThanOrEqual(0.02);
  }, 1_200_000);

  it("refuses at start an engine that has not loaded the adapter decisiond reads for", async () => {
    // This server was started without --lora.
    const adapter = "adapters/smollm2-135m-instruct.decision.gguf";
    await expect(
      openRemoteEngines([{ kind: "llama-server", url: server.url }], { adapter }),
    ).rejects.toThrow(/loads none, but decisiond reads its answers for --adapter smollm2-135m/);
    const serving = await openRemoteEngines([{ kind: "llama-server", url: server.url }], {
      adapter: "none",
    });
    if (serving.kind === "engine") await serving.engine.close();
  });

  it("evaluates the state once per request, and reuses it in the next request", async () => {
    const engine = await LlamaServerEngine.open({ url: server.url });
    const decider = new Decider(engine, { contentFree: false, questionContrast: false });
    const request = decisionRequest(MIXED[0]!);
    const plan = await decider.plan(request);
    await engine.score({ prefix: plan.prefix, branches: plan.branches });
    const first = engine.lastTimings;
    // A fresh engine does not know what the server's slot holds: the prefix is evaluated whole,
    // nothing taken from the server's caches. Then one call per answer position (branches and
    // chained labels).
    const [prefixCall, ...branchCalls] = first;
    expect(prefixCall).toEqual({ prompt_n: plan.prefix.length, cache_n: 0 });
    for (const call of branchCalls) expect(call.cache_n).toBeGreaterThanOrEqual(plan.prefix.length);
    const branchTokens = plan.branches.reduce((s, b) => s + b.tokens.length, 0);
    const evaluated = branchCalls.reduce((s, c) => s + c.prompt_n, 0);
    expect(evaluated).toBeLessThanOrEqual(branchTokens + branchCalls.length);
    // The same state with another question: the prefix comes from the server's cache, every
    // call evaluates only question tokens.
    const again = await decider.plan({
      ...request,
      questions: [["other", { type: "noul", instructions: "Is a refund asked for?" }]],
    });
    await engine.score({ prefix: again.prefix, branches: again.branches });
    for (const call of engine.lastTimings)
      expect(call.cache_n).toBeGreaterThanOrEqual(again.prefix.length);
    const repeat = engine.lastTimings.reduce((s, c) => s + c.prompt_n, 0);
    const againTokens = again.branches.reduce((s, b) => s + b.tokens.length, 0);
    expect(repeat).toBeLessThanOrEqual(againTokens + engine.lastTimings.length);
    console.log(
      `timings: prefix ${plan.prefix.length} tokens; first request prompt_n per call ${first
        .map((t) => t.prompt_n)
        .join(
          ", ",
        )}; repeat state prompt_n ${engine.lastTimings.map((t) => t.prompt_n).join(", ")}`,
    );
    await engine.close();
  }, 600_000);
});

describe("a llama-server killed mid-run", () => {
  const body = {
    model: MODEL,
    state: "Terrible product. It broke after one day and support ignored me.",
    questions: { sentiment: QUESTIONS.sentiment },
  };

  it("answers 503 with Retry-After within the deadline, and 200 again once it is back", async () => {
    let server = await startLlamaServer({ modelPath: inject("modelPath") });
    const deadlineMs = 60_000;
    const serving = await openRemoteEngines([{ kind: "llama-server", url: server.url }], {
      deadlineMs,
      probeIntervalMs: 250,
    });
    if (serving.kind !== "engine") throw new Error("expected an engine");
    const service = await startTestService({ engine: serving.engine });
    try {
      const warm = await postJson(`${service.url}/v1/systemone`, body);
      expect(warm.status, JSON.stringify(warm.body)).toBe(200);
      // Requests in flight while the server dies.
      const started = performance.now();
      const inFlight = Array.from({ length: 4 }, (_, i) =>
        postJson(`${service.url}/v1/systemone`, { ...body, state: `${body.state} (${i})` }).then(
          (r) => ({ ...r, ms: performance.now() - started }),
        ),
      );
      await new Promise((r) => setTimeout(r, 50));
      const killedAt = performance.now() - started;
      await server.kill("SIGKILL");
      const results = await Promise.all(inFlight);
      for (const r of results) {
        expect([200, 503]).toContain(r.status);
        // A dead server refuses at once: far sooner than the deadline.
        expect(r.ms - killedAt).toBeLessThan(deadlineMs);
      }
      const down = await postJson(`${service.url}/v1/systemone`, body);
      expect(down.status).toBe(503);
      expect(down.body.detail.error_type).toBe("engine_unreachable");
      expect(Number(down.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      // Back on the same port: the pool probes it back, no restart of decisiond.
      server = await startLlamaServer({ modelPath: inject("modelPath"), port: server.port });
      const until = Date.now() + 30_000;
      let status = 0;
      while (Date.now() < until) {
        status = (await postJson(`${service.url}/v1/systemone`, body)).status;
        if (status === 200) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(status).toBe(200);
    } finally {
      await service.close();
      await server.kill();
    }
  }, 900_000);

  it("with two engines, one killed: every request is answered by the other", async () => {
    const a = await startLlamaServer({ modelPath: inject("modelPath"), parallel: 2 });
    const b = await startLlamaServer({ modelPath: inject("modelPath"), parallel: 2 });
    const serving = await openRemoteEngines(
      [
        { kind: "llama-server", url: a.url },
        { kind: "llama-server", url: b.url },
      ],
      { deadlineMs: 300_000, probeIntervalMs: 250 },
    );
    if (serving.kind !== "engine") throw new Error("expected an engine");
    const pool: EnginePool = serving.engine;
    const service = await startTestService({ engine: pool });
    try {
      expect((await postJson(`${service.url}/v1/systemone`, body)).status).toBe(200);
      const statuses: number[] = [];
      const wave = (n: number, tag: string) =>
        Promise.all(
          Array.from({ length: n }, (_, i) =>
            postJson(`${service.url}/v1/systemone`, {
              ...body,
              state: `${body.state} (${tag} ${i})`,
            }).then((r) => {
              statuses.push(r.status);
              if (r.status !== 200) console.log(r.status, JSON.stringify(r.body));
            }),
          ),
        );
      const first = wave(4, "before");
      await new Promise((r) => setTimeout(r, 100));
      await a.kill("SIGKILL");
      await first;
      await wave(4, "after");
      expect(statuses).toHaveLength(8);
      expect(statuses).toEqual(statuses.map(() => 200));
      expect(pool.members.map((m) => m.healthy)).toEqual([false, true]);
    } finally {
      await service.close();
      await a.kill();
      await b.kill();
    }
  }, 900_000);
});

describe("a llama-server that clears idle slots", () => {
  it("is used through one slot, and says so; a server that keeps them, through all", async () => {
    // A unified KV cache with --cache-idle-slots (llama-server's defaults without --parallel):
    // each task saves every idle slot to host memory and clears it.
    const unified = await startLlamaServer({
      modelPath: inject("modelPath"),
      parallel: 2,
      args: ["--kv-unified"],
    });
    const kept = await startLlamaServer({ modelPath: inject("modelPath"), parallel: 2 });
    try {
      const notices: string[] = [];
      const engine = await LlamaServerEngine.open({
        url: unified.url,
        onNotice: (m) => notices.push(m),
      });
      expect(engine.slotCount).toBe(1);
      expect(notices).toHaveLength(1);
      expect(notices[0]).toMatch(/uses 1 of its 2 slots.*--parallel N and no --kv-unified/);
      // Two requests at once: each evaluates its own tokens once, none evaluates the other's again.
      const decider = new Decider(engine, { contentFree: false, questionContrast: false });
      const plans = await Promise.all(
        MIXED.slice(0, 2).map((r) => decider.plan(decisionRequest(r))),
      );
      await Promise.all(plans.map((p) => engine.score({ prefix: p.prefix, branches: p.branches })));
      const tokens = plans.reduce(
        (sum, p) => sum + p.prefix.length + p.branches.reduce((s, b) => s + b.tokens.length, 0),
        0,
      );
      const { promptTokensEvaluated, completionCalls } = engine.counters;
      console.log(
        `cleared idle slots: ${promptTokensEvaluated} tokens evaluated in ${completionCalls} calls for ${tokens} tokens`,
      );
      expect(promptTokensEvaluated).toBeLessThanOrEqual(tokens + completionCalls);
      await engine.close();

      const all = await LlamaServerEngine.open({ url: kept.url, onNotice: (m) => notices.push(m) });
      expect(all.slotCount).toBe(2);
      expect(notices).toHaveLength(1);
      await all.close();
    } finally {
      await unified.kill();
      await kept.kill();
    }
  }, 600_000);
});

describe("requests on a llama-server's one slot", () => {
  it("take turns: short requests go between a long one's calls, which answers as alone", async () => {
    const server = await startLlamaServer({ modelPath: inject("modelPath"), slotContext: 4096 });
    try {
      const engine = await LlamaServerEngine.open({ url: server.url });
      expect(engine.slotCount).toBe(1);
      const decider = new Decider(engine, { contentFree: false, questionContrast: false });
      const sentences = Array.from(
        { length: 120 },
        (_, i) =>
          `${i + 1}. The clerk counted ${i + 3} baskets of apples in the market on day ${i}.`,
      );
      const long = await decider.plan(
        decisionRequest({
          state: sentences.join(" "),
          questions: {
            apples: { type: "noul", instructions: "Were apples counted?" },
            who: {
              type: "choice",
              instructions: "Who counted?",
              criteria: { clerk: null, farmer: null, baker: null, nobody: null },
            },
            rain: { type: "noul", instructions: "Was it raining?" },
          },
        }),
      );
      const short = await decider.plan(decisionRequest(MIXED[1]!));
      const score = (plan: typeof long) =>
        engine.score({ prefix: plan.prefix, branches: plan.branches });
      const alone = await score(long);
      await score(short); // the slot now holds the short request's prompt
      // A client sends short requests one after the other while the long one runs, so that the
      // long one gives its slot up in its prefix and between its branches.
      let longDone = false;
      const t0 = Date.now();
      const longRun = score(long).finally(() => (longDone = true));
      const shortTimes: number[] = [];
      while (!longDone) {
        await new Promise((r) => setTimeout(r, 300));
        const start = Date.now();
        await score(short);
        if (!longDone) shortTimes.push(Date.now() - start);
      }
      const beside = await longRun;
      console.log(
        `turns: ${long.prefix.length}-token prefix, ${long.branches.length} branches in ` +
          `${Date.now() - t0} ms; short requests before it ended: ${shortTimes.join(", ")} ms`,
      );
      expect(shortTimes.length).toBeGreaterThanOrEqual(2);
      expect(beside.branches).toEqual(alone.branches);
      await engine.close();
    } finally {
      await server.kill();
    }
  }, 600_000);
});

describe("a llama-server whose adapter scales change after start", () => {
  it("answers as at start: every call names the adapter at scale 1, the others at 0", async () => {
    const adapter = "adapters/smollm2-135m-instruct.decision.gguf";
    const server = await startLlamaServer({
      modelPath: inject("modelPath"),
      args: ["--lora", resolve(adapter)],
    });
    try {
      const pinned = await LlamaServerEngine.open({ url: server.url, adapter });
      const unpinned = await LlamaServerEngine.open({ url: server.url });
      const decider = new Decider(pinned, { contentFree: false, questionContrast: false });
      const plan = await decider.plan(decisionRequest(MIXED[0]!));
      const request = { prefix: plan.prefix, branches: plan.branches };
      const largest = (a: ScoreResult, b: ScoreResult) =>
        Math.max(
          ...a.branches.flatMap((branch, i) =>
            branch.logprobs.map((l, k) =>
              Math.abs(Math.exp(l) - Math.exp(b.branches[i]!.logprobs[k]!)),
            ),
          ),
        );
      const before = await pinned.score(request);
      // An operator turns the adapter off on the server.
      const off = await fetch(`${server.url}/lora-adapters`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify([{ id: 0, scale: 0 }]),
      });
      expect(off.status).toBe(200);
      const after = await pinned.score(request);
      expect(after.branches).toEqual(before.branches);
      // An engine that does not name the scales reads the server's own: the adapter is off.
      const moved = largest(before, await unpinned.score(request));
      console.log(`adapter off on the server: a branch probability moved by ${moved.toFixed(3)}`);
      expect(moved).toBeGreaterThan(0.1);
      // Opened again (a pool does after an outage): the adapter is loaded, named at scale 1.
      const reopened = await LlamaServerEngine.open({ url: server.url, adapter });
      expect((await reopened.score(request)).branches).toEqual(before.branches);
      await Promise.all([pinned.close(), unpinned.close(), reopened.close()]);
    } finally {
      await server.kill();
    }
  }, 600_000);
});
