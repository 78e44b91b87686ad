// Issue 5 benchmark: one run, medians and ratios over
//   state ≈ 64 / 512 / 2048 tokens × 1 / 4 / 16 questions × 2 / 4 / 8 options, for
//   (a) floor: node-llama-cpp evaluating exactly the tokens decisiond evaluates for the request
//       (the uncached prefix tokens, then the branch tokens of the engine's branch schedule: the
//       tokens all branches start with once, each branch past what it shares with the previous
//       one of its lane), no decision logic;
//   (b) decisiond's engine and readout in-process (Decider.decide), on the bundle `serve` loads:
//       the shipped adapter, its calibration profile and the tuned readout (`--adapter none`: the
//       base model and the default readout, for (b) and (c) both); all load the model file `serve`
//       loads, the adapter added into its weights (src/service/model.ts `adapterWeights`);
//   (c) decisiond over HTTP with keep-alive, end to end (a `decisiond serve` child process);
//       the HTTP overhead is (c) minus the server's own Server-Timing `decide` duration, and the
//       part of it spent in the server is Server-Timing `app` (arrival to serialized response)
//       minus `decide`; the same body sent to an empty node:http server just after gives the
//       machine's own floor for that overhead (with --held-floor that server first keeps as many
//       threads as llama.cpp busy for as long as (c)'s `decide` took, so it answers after the
//       same wait);
//   (d) node-llama-cpp's LlamaDecisionContext.decide on the same inputs and model file (with the
//       adapter added into the weights, as served; it takes no runtime adapter);
//   (e) naive: one full prompt per question (our prompt), the state read again each time.
// Every system gets a fresh state for every run (a case number leads it), so no system reuses a
// cached state; the systems take turns within each run so they see the same machine load.
// Each cell first sends (b) and (c) one untimed request: the first request carrying a question
// also scores its content-free prior (contextual calibration, then cached); (b)'s time for it is
// reported on its own ("(b) new questions"), so the medians are the steady state.
// Before the first cell the prefix caches of (b) and (c) are filled, so both run in the steady
// state of a server that has been up a while (see "Steady state" below).
// Also: the prefix-cache hit latency (2048-token state, 1 question) and the peak RSS of `serve`.
//
// Usage: npm run bench -- [--states 64,512,2048] [--questions 1,4,16] [--options 2,4,8]
//                         [--runs 3] [--naive-runs 1] [--systems a,b,c,d,e] [--threads N]
//                         [--cell-seconds S --max-runs 15 (after --runs, more runs while the
//                          cell's runs so far took under S seconds: short cells, whose medians
//                          are the noisiest, get more runs for little time)]
//                         [--parallel N (branch sequences; default: the engine's)]
//                         [--prefix-cache BYTES (snapshot budget of (b)'s engine and (c)'s
//                          server; 0: off)]
//                         [--rotate-options (question i lists the options rotated by i mod k,
//                          so only questions k apart start alike; decisiond shows them sorted
//                          by id since docs/decisions/072, so only the baselines see the rotation)]
//                         [--held-floor (the empty server computes as long as (c)'s `decide`
//                          before it answers; adds (c)'s time again to each run)]
//                         [--model NAME|PATH (default: smollm2-135m-instruct)]
//                         [--adapter PATH|none (default: the catalogue model's shipped adapter)]
import { spawn } from "node:child_process";
import http from "node:http";
import { basename } from "node:path";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { Decider } from "../dist/decision/decide.js";
import { resolveModel } from "../dist/evaluation/model.js";
import { modelBundle } from "../dist/models/bundle.js";
import { adapterWeights } from "../dist/service/model.js";
import {
  evaluateCalls,
  openLlamaEngine,
  SNAPSHOT_WRITE_DELAY_MS,
} from "../dist/engine/llama/index.js";
import { planDecode } from "../dist/engine/decode/index.js";
import { commonPrefixLength } from "../dist/engine/llama/prefix-cache.js";
import { postJson } from "./post-json.mjs";
import { median } from "./stats.mjs";
import { wireQuestions as teamQuestions } from "./workload.mjs";

const { values: args } = parseArgs({
  options: {
    states: { type: "string", default: "64,512,2048" },
    questions: { type: "string", default: "1,4,16" },
    options: { type: "string", default: "2,4,8" },
    runs: { type: "string", default: "3" },
    "naive-runs": { type: "string", default: "1" },
    "cell-seconds": { type: "string", default: "0" },
    "max-runs": { type: "string", default: "15" },
    systems: { type: "string", default: "a,b,c,d,e" },
    threads: { type: "string" },
    "context-size": { type: "string", default: "8192" },
    parallel: { type: "string" },
    "prefix-cache": { type: "string" },
    "rotate-options": { type: "boolean", default: false },
    "held-floor": { type: "boolean", default: false },
    model: { type: "string", default: "smollm2-135m-instruct" },
    adapter: { type: "string" },
    out: { type: "string" },
  },
});
const list = (s) => s.split(",").map(Number);
const STATES = list(args.states);
const QUESTIONS = list(args.questions);
const OPTION_COUNTS = list(args.options);
const RUNS = Number(args.runs);
const NAIVE_RUNS = Number(args["naive-runs"]);
const CELL_SECONDS = Number(args["cell-seconds"]);
const MAX_RUNS = Math.max(RUNS, Number(args["max-runs"]));
const SYSTEMS = new Set(args.systems.split(","));
const CONTEXT = Number(args["context-size"]);
const MODEL = args.model;

// The bundle `serve` loads: the model, its shipped adapter (or --adapter), profile and readout.
const resolved = await resolveModel(MODEL, true, args.adapter);
const bundle = await modelBundle(resolved);
const { adapterPath } = bundle;
// The files `serve` loads: the model with the adapter added into its weights where it can be.
const weights = await adapterWeights(bundle.modelPath, adapterPath);
const { modelPath } = weights;
/** node-llama-cpp's context option applying an adapter the merge could not add, as the engine does. */
const lora = weights.adapterPath ? { lora: { adapters: [{ filePath: weights.adapterPath }] } } : {};
const llama = await getLlama({ gpu: "auto", logLevel: LlamaLogLevel.error });
const threads = args.threads ? Number(args.threads) : llama.cpuMathCores;
const now = () => performance.now();

// ---- inputs -----------------------------------------------------------------------------------
const SENTENCES = [
  "The customer wrote that the parcel arrived late and the box was damaged.",
  "Their invoice listed an item they never ordered, and the refund has not arrived.",
  "Support answered after three days with a template that did not address the problem.",
  "They ask for the charge to be reversed and for a call from a manager this week.",
  "Earlier orders from the same account were delivered on time without complaints.",
  "The tracking page showed the parcel in a depot for six days before delivery.",
];
const PARALLEL = args.parallel ? Number(args.parallel) : undefined;
const engine = await openLlamaEngine({
  ...weights,
  id: MODEL,
  threads,
  contextSize: CONTEXT,
  ...(PARALLEL ? { parallelBranches: PARALLEL } : {}),
  ...(args["prefix-cache"] !== undefined ? { prefixCacheBytes: Number(args["prefix-cache"]) } : {}),
});
const decider = new Decider(engine, {
  calibration: bundle.profile,
  debias: "off",
  ...bundle.readout,
});

/** A state of about `tokens` tokens (whole sentences), led by a case number. */
const baseTexts = new Map();
async function stateOf(tokens, caseNumber) {
  if (!baseTexts.has(tokens)) {
    let text = "";
    let i = 0;
    while ((await engine.tokenize(text)).length < tokens - 6)
      text += SENTENCES[i++ % SENTENCES.length] + " ";
    // Trim words back to the target.
    const words = text.trim().split(" ");
    while ((await engine.tokenize(words.join(" "))).length > tokens - 6) words.pop();
    baseTexts.set(tokens, words.join(" "));
  }
  return `Case ${caseNumber}. ${baseTexts.get(tokens)}`;
}
const ROTATE = args["rotate-options"];
const HELD_FLOOR = args["held-floor"];
/** `n` choice questions of `k` options, wire (HTTP) shape (rotated per question with --rotate-options). */
const wireQuestions = (n, k) => teamQuestions(n, k, ROTATE);
const toDecision = (state, wq) => ({
  state,
  questions: Object.entries(wq).map(([id, q]) => [
    id,
    { type: "choice", instructions: q.instructions, options: Object.entries(q.criteria) },
  ]),
});
let caseNumber = 0;

// ---- (a) floor and (e) naive: plain node-llama-cpp on one context ---------------------------
const model = await llama.loadModel({ modelPath });
/** Tokens per decode call: the engine's default batch size. */
const BATCH = 1024;
// Made only when (a) or (e) is measured.
const rawContext =
  SYSTEMS.has("a") || SYSTEMS.has("e")
    ? await model.createContext({
        contextSize: CONTEXT,
        sequences: 2,
        batchSize: BATCH,
        threads,
        ...lora,
      })
    : undefined;
const floorSeq = rawContext?.getSequence();
const naiveSeq = rawContext?.getSequence();

async function floor(request) {
  const plan = await decider.plan(request);
  // The engine's decode plan (src/engine/decode/plan.ts): the prefix tokens it takes over from
  // the previous prefix (the same call map), then the rest in its calls; its common lead once,
  // then each lane's branches from where they resume after the lane's previous branch, in its
  // calls (one sequence here, lane after lane).
  const P = plan.prefix.length;
  const held = floorSeq.contextTokens.length;
  const common = commonPrefixLength(floorSeq.contextTokens, plan.prefix);
  const decode = planDecode(
    plan,
    { shared: common, length: held },
    { lanes: engine.parallelBranches, batchSize: BATCH },
  );
  const shared = decode.prefix.resume;
  if (shared < floorSeq.contextTokens.length)
    await floorSeq.eraseContextTokenRanges([{ start: shared, end: floorSeq.nextTokenIndex }]);
  await evaluateCalls(floorSeq, plan.prefix, shared, decode.prefix.calls);
  const base = P + decode.lead.length;
  if (decode.lead.length > 0)
    await evaluateCalls(floorSeq, plan.branches[0].tokens, 0, decode.lead.calls);
  const eraseTo = (at) =>
    floorSeq.nextTokenIndex > at &&
    floorSeq.eraseContextTokenRanges([{ start: at, end: floorSeq.nextTokenIndex }]);
  const children = async (b) => {
    const start = floorSeq.nextTokenIndex;
    for (const child of b.children ?? []) {
      await floorSeq.evaluateWithoutGeneratingNewTokens(child.tokens);
      await children(child);
      await eraseTo(start);
    }
  };
  for (const run of decode.lanes) {
    for (const { index, shared: from, calls } of run) {
      await eraseTo(plan.prefix.length + from);
      await evaluateCalls(floorSeq, plan.branches[index].tokens, from, calls);
      await children(plan.branches[index]);
    }
    await eraseTo(base);
  }
  await eraseTo(plan.prefix.length);
}

async function naive(request) {
  const plan = await decider.plan(request);
  for (const b of plan.branches) {
    await naiveSeq.clearHistory();
    const tokens = [...plan.prefix, ...b.tokens];
    await naiveSeq.controlledEvaluate(
      tokens.map((t, i) =>
        i === tokens.length - 1
          ? [t, { generateNext: { logits: { filter: { tokens: b.candidates } } } }]
          : t,
      ),
    );
  }
}

// ---- (d) node-llama-cpp's decision context ----------------------------------------------------
const decisionContext = SYSTEMS.has("d")
  ? await model.createDecisionContext({ contextSize: CONTEXT, threads })
  : undefined;
async function theirs(state, wq) {
  const questions = Object.fromEntries(
    Object.entries(wq).map(([id, q]) => [
      id,
      { type: "choice", instruction: q.instructions, criteria: q.criteria },
    ]),
  );
  await decisionContext.decide(state, questions);
}

// ---- (c) decisiond serve over HTTP --------------------------------------------------------------
/** Spawns `node <args(port)>` on a random port from `basePort` up; returns it and its base URL. */
function spawnOnPort(basePort, args) {
  const port = basePort + Math.floor(Math.random() * 2000);
  const child = spawn(process.execPath, args(port), { stdio: ["ignore", "inherit", "inherit"] });
  return { child, url: `http://127.0.0.1:${port}` };
}
/** Retries `probe` (which throws or returns false until the server is up) every `ms`, `tries` times. */
async function waitUntilUp(probe, tries, ms, what) {
  for (let i = 0; ; i++) {
    try {
      if (await probe()) return;
    } catch {
      /* not up yet */
    }
    if (i > tries) throw new Error(`${what} did not start`);
    await new Promise((r) => setTimeout(r, ms));
  }
}
let server;
let serverUrl;
if (SYSTEMS.has("c")) {
  ({ child: server, url: serverUrl } = spawnOnPort(18000, (port) => [
    "dist/cli/main.js",
    "serve",
    "--auth",
    "off",
    "--port",
    String(port),
    "--threads",
    String(threads),
    "--context-size",
    String(CONTEXT),
    "--log-level",
    "warn",
    "--console",
    "off",
    ...(PARALLEL ? ["--parallel", String(PARALLEL)] : []),
    ...(args["prefix-cache"] !== undefined ? ["--prefix-cache", args["prefix-cache"]] : []),
    ...(args.adapter !== undefined ? ["--adapter", args.adapter] : []),
  ]));
  await waitUntilUp(
    async () => (await fetch(`${serverUrl}/healthz`)).ok,
    600,
    200,
    "decisiond serve",
  );
}
// The machine's own floor for one HTTP exchange: an empty node:http server (another process, the
// same loopback, keep-alive) that reads the body and answers a fixed small JSON at once. Each (c)
// request is followed by one to it with the same body, so (c)'s overhead can be read against what
// any Node HTTP server costs here (on a VM whose idle vCPUs halt, each wake-up is a VM exit).
let emptyServer;
let emptyUrl;
if (SYSTEMS.has("c"))
  ({ child: emptyServer, url: emptyUrl } = spawnOnPort(20000, (port) => [
    "-e",
    `const { Worker } = require("node:worker_threads");
     // With --held-floor, ?hold=H keeps ${threads} worker threads (llama.cpp's count) busy for H
     // ms before the answer, each streaming through 8 MiB as a model's weights do.
     const source = \`const { parentPort } = require("node:worker_threads");
       const memory = new Float64Array(1 << 20);
       parentPort.on("message", (ms) => { const end = performance.now() + ms; let x = 0;
         while (performance.now() < end) for (let i = 0; i < memory.length; i += 8) memory[i] += x++;
         parentPort.postMessage(0); });\`;
     const workers = ${HELD_FLOOR} ? Array.from({ length: ${threads} }, () => new Worker(source, { eval: true })) : [];
     const busy = (ms) => Promise.all(workers.map((w) => new Promise((r) => { w.once("message", r); w.postMessage(ms); })));
     require("node:http").createServer((q, s) => { const c = []; q.on("data", (d) => c.push(d));
         q.on("end", async () => { JSON.parse(Buffer.concat(c).toString("utf8"));
           const hold = Number(new URL(q.url, "http://x").searchParams.get("hold") ?? 0);
           const t0 = performance.now();
           if (hold > 0) await busy(hold);
           s.setHeader("server-timing", "hold;dur=" + (performance.now() - t0).toFixed(3));
           s.setHeader("content-type", "application/json"); s.end('{"ok":true}'); });
       }).listen(${port}, "127.0.0.1");`,
  ]));
// The child servers go when the benchmark does, also when it is interrupted.
process.on("exit", () => {
  server?.kill();
  emptyServer?.kill();
});
for (const [signal, code] of [
  ["SIGINT", 130],
  ["SIGTERM", 143],
])
  process.on(signal, () => process.exit(code));
// One keep-alive socket per server (bench/post-json.mjs).
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const emptyAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
/**
 * One POST of `body` to the empty server, which first holds `holdMs` (0: answers at once);
 * resolves with its round trip minus the time it held, in ms.
 */
async function emptyRoundTrip(body, holdMs = 0) {
  const t0 = now();
  const { headers } = await postJson(`${emptyUrl}/?hold=${holdMs}`, emptyAgent, body);
  const held = Number(/hold;dur=([\d.]+)/.exec(headers["server-timing"] ?? "")?.[1] ?? 0);
  if (held < holdMs) throw new Error(`the empty server held ${held} ms, asked for ${holdMs}`);
  return now() - t0 - held;
}
// Up when it answers (it starts in well under a second; serve took longer above).
if (emptyServer)
  await waitUntilUp(
    async () => (await emptyRoundTrip("{}"), true),
    100,
    100,
    "the empty node:http server",
  );
const bodyOf = (state, wq) => JSON.stringify({ model: "jev-latest", state, questions: wq });
/** One request to decisiond serve; resolves with its Server-Timing `decide` and `app` (ms). */
async function overHttp(state, wq) {
  const { status, headers, text } = await postJson(
    `${serverUrl}/v1/systemone`,
    agent,
    bodyOf(state, wq),
  );
  if (status !== 200) throw new Error(`HTTP ${status}: ${text.slice(0, 200)}`);
  JSON.parse(text);
  const timing = headers["server-timing"] ?? "";
  const decide = /decide;dur=([\d.]+)/.exec(timing);
  const app = /app;dur=([\d.]+)/.exec(timing);
  return { decide: decide ? Number(decide[1]) : NaN, app: app ? Number(app[1]) : NaN };
}
function serverPeakRssMiB() {
  if (!server) return undefined;
  const status = readFileSync(`/proc/${server.pid}/status`, "utf8");
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]);
  return Math.round(kb / 1024);
}

// ---- one system, one run -----------------------------------------------------------------------
async function timeOne(system, tokens, n, k) {
  const state = await stateOf(tokens, ++caseNumber);
  const wq = wireQuestions(n, k);
  const t0 = now();
  let extra;
  switch (system) {
    case "a":
      await floor(toDecision(state, wq));
      break;
    case "b": {
      extra = (await decider.decide(toDecision(state, wq))).stats.evaluatedTokens;
      const ms = now() - t0;
      // The engine writes this state's prefix snapshot SNAPSHOT_WRITE_DELAY_MS later (write-behind);
      // wait for it here, untimed, so that it does not fall into the next system's time.
      await engine.idle();
      return { ms, extra };
    }
    case "c": {
      extra = await overHttp(state, wq);
      const ms = now() - t0;
      // Then the empty server's round trip with the same body, outside (c)'s time (after it, so
      // it cannot warm (c)'s client path); with --held-floor it first computes as long as (c)'s
      // `decide` took, so both exchanges come after the same wait.
      const emptyMs = await emptyRoundTrip(bodyOf(state, wq), HELD_FLOOR ? extra.decide : 0);
      // The server writes the state's prefix snapshot SNAPSHOT_WRITE_DELAY_MS after answering
      // (write-behind, ~21 ms at 2048 tokens): with --held-floor that falls in the empty server's
      // hold; otherwise wait it out here, untimed, so it does not fall into the next system's time.
      if (!HELD_FLOOR)
        await new Promise((resolve) => setTimeout(resolve, SNAPSHOT_WRITE_DELAY_MS + 90));
      return { ms, extra: { ...extra, emptyMs } };
    }
    case "d":
      await theirs(state, wq);
      break;
    case "e":
      await naive(toDecision(state, wq));
      break;
  }
  return { ms: now() - t0, extra };
}

// ---- report -------------------------------------------------------------------------------------
const f0 = (x) => (x === undefined || Number.isNaN(x) ? "–" : x.toFixed(0));
const f2 = (x) => (x === undefined || Number.isNaN(x) ? "–" : x.toFixed(2));
const machine = {
  cpu: cpus()[0]?.model,
  logicalCpus: cpus().length,
  threads,
  memoryGiB: Math.round(totalmem() / 2 ** 30),
  gpu: llama.gpu,
  node: process.version,
  nodeLlamaCpp: JSON.parse(readFileSync("node_modules/node-llama-cpp/package.json", "utf8"))
    .version,
};

/**
 * Writes `<base>.json` and `<base>.md` from the cells measured so far (after every cell, so a
 * stopped run still leaves its table), and once more at the end with the prefix-cache figures and
 * the serve peak RSS. Returns the markdown.
 */
function writeReport(cache, peakRssMiB) {
  const result = {
    date: new Date().toISOString(),
    model: MODEL,
    adapter: adapterPath ? basename(adapterPath) : "none",
    contextSize: CONTEXT,
    parallelBranches: PARALLEL ?? "default",
    rotateOptions: ROTATE,
    heldFloor: HELD_FLOOR,
    runs: RUNS,
    maxRuns: MAX_RUNS,
    cellSeconds: CELL_SECONDS,
    naiveRuns: NAIVE_RUNS,
    machine,
    prefixCacheFill: fill,
    cells,
    prefixCache: cache,
    servePeakRssMiB: peakRssMiB,
    finished: cache !== undefined,
  };
  const lines = [
    `decisiond bench ${result.date} — ${MODEL}, adapter ${result.adapter}, ${machine.cpu}, ${threads} threads, context ${CONTEXT}, medians of ${RUNS === MAX_RUNS || !CELL_SECONDS ? RUNS : `${RUNS}–${MAX_RUNS} (more while a cell took under ${CELL_SECONDS} s)`} runs (naive: ${NAIVE_RUNS}), ms${ROTATE ? ", options rotated per question" : ""}`,
    "",
    `| state | q | k | runs | (a) floor | (b) in-process | (c) HTTP | c−b HTTP overhead | of it in the server | empty node:http server${HELD_FLOOR ? " after computing as long as decide" : ""} | (d) LlamaDecisionContext | (e) naive | b/a | b/a per run | d/b | d/b per run | e/b | (b) new questions |`,
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...cells.map((c) => {
      const m = c.medianMs;
      return `| ${c.stateTokens} | ${c.questions} | ${c.options} | ${c.runs} | ${f0(m.a)} | ${f0(m.b)} | ${f0(m.c)} | ${f2(c.httpOverheadMs)} | ${f2(c.serverHandlingMs)} | ${f2(c.emptyServerMs)} | ${f0(m.d)} | ${f0(m.e)} | ${f2(m.b / m.a)} | ${f2(c.pairedBA)} | ${f2(m.d / m.b)} | ${f2(c.pairedDB)} | ${f2(m.e / m.b)} | ${f0(c.firstRequestMsB)} |`;
    }),
    "",
    ...STATES.flatMap((t) =>
      OPTION_COUNTS.map((k) => {
        const one = cells.find((c) => c.stateTokens === t && c.questions === 1 && c.options === k);
        const many = cells.find(
          (c) => c.stateTokens === t && c.questions === Math.max(...QUESTIONS) && c.options === k,
        );
        return one && many
          ? `state ${t}, ${k} options: ${Math.max(...QUESTIONS)} questions cost ${f2(many.medianMs.b / one.medianMs.b)}× one question (b)`
          : "";
      }),
    ).filter(Boolean),
    "",
    "b/a per run, d/b per run: the median over the runs of the ratio within one run (the systems take turns).",
    fill.requests
      ? `Before the first cell the prefix caches were filled with ${fill.requests} states (${(fill.ms / 1000).toFixed(0)} s), so (b) and (c) run as a server that has been up a while.`
      : "",
    "",
    ...(cache
      ? [
          `prefix cache, state ${cache.stateTokens} tokens, 1 question: miss ${f0(cache.medianMissMs)} ms, hit from a snapshot ${f0(cache.medianHitSnapshotMs)} ms (${f2(cache.medianHitSnapshotMs / cache.medianMissMs)} of a miss), same state again ${f0(cache.medianHitLastMs)} ms`,
          `peak RSS of decisiond serve during the benchmark: ${peakRssMiB ?? "–"} MiB`,
        ]
      : ["(stopped before the end: the cells measured so far)"]),
  ];
  const markdown = lines.join("\n") + "\n";
  mkdirSync("bench/results", { recursive: true });
  writeFileSync(`${base}.json`, JSON.stringify(result, null, 2) + "\n");
  writeFileSync(`${base}.md`, markdown);
  return markdown;
}
const date = new Date().toISOString().slice(0, 10);
const base = args.out ?? `bench/results/${date}`;

// Warm-up: every system once on a small cell.
for (const s of SYSTEMS) await timeOne(s, 64, 1, 2);

// Steady state: fill the prefix caches of (b)'s engine and of (c)'s server before the first cell,
// as in a server that has been running. A cache that is still growing writes every snapshot
// (~10 MB at a 64-token state) into memory the process has not touched for a while, and on this
// VM that memory costs a page fault on the host per 4 KiB page (the guest's virtio-balloon free
// page reporting hands freed memory back to the host): measured 25–35 ms per snapshot while the
// cache grows, 4–7 ms once it is full and each snapshot reuses the pages of the one it evicts.
const fill = { requests: 0, ms: 0 };
if (engine.prefixCache && (SYSTEMS.has("b") || SYSTEMS.has("c"))) {
  const started = now();
  // Full: a snapshot was evicted, or one was refused (larger than a small budget on its own).
  const cache = engine.prefixCache;
  const full = () => cache.stats.dropped > 0 || cache.stats.saved > cache.size;
  while (!full()) {
    const state = await stateOf(64, ++caseNumber);
    const wq = wireQuestions(1, 2);
    await decider.decide(toDecision(state, wq));
    // The server's cache has the same budget and gets the same states, so it fills alike.
    if (SYSTEMS.has("c")) await overHttp(state, wq);
    fill.requests++;
  }
  fill.ms = now() - started;
  console.log(
    `prefix caches filled: ${fill.requests} states, ${engine.prefixCache.size} snapshots, ` +
      `${(engine.prefixCache.bytes / 2 ** 20).toFixed(0)} MiB, ${(fill.ms / 1000).toFixed(0)} s`,
  );
}

const cells = [];
const started = Date.now();
for (const tokens of STATES)
  for (const n of QUESTIONS)
    for (const k of OPTION_COUNTS) {
      const samples = Object.fromEntries([...SYSTEMS].map((s) => [s, []]));
      const overhead = [];
      const inServer = [];
      const emptyTrips = [];
      let evaluated;
      // The first request carrying a question also scores its content-free prior (contextual
      // calibration, cached per question): time it on its own, untimed in the medians.
      let firstRequestMsB;
      if (SYSTEMS.has("b")) firstRequestMsB = (await timeOne("b", tokens, n, k)).ms;
      if (SYSTEMS.has("c")) await timeOne("c", tokens, n, k);
      const cellStarted = Date.now();
      let run = 0;
      for (
        ;
        run < RUNS || (run < MAX_RUNS && (Date.now() - cellStarted) / 1000 < CELL_SECONDS);
        run++
      ) {
        const order = [...SYSTEMS];
        for (let i = 0; i < run % order.length; i++) order.push(order.shift());
        for (const s of order) {
          if (s === "e" && run >= NAIVE_RUNS) continue;
          const { ms, extra } = await timeOne(s, tokens, n, k);
          samples[s].push(ms);
          if (s === "b") evaluated = extra;
          if (s === "c") {
            overhead.push(ms - extra.decide);
            inServer.push(extra.app - extra.decide);
            emptyTrips.push(extra.emptyMs);
          }
        }
      }
      const m = Object.fromEntries(Object.entries(samples).map(([s, xs]) => [s, median(xs)]));
      // (b)/(a) within each run (the two took turns), then the median: the machine's slow and
      // fast spells cancel out of each pair, which the ratio of the two medians does not do.
      const paired = (num, den) =>
        samples[num]?.length && samples[den]?.length
          ? median(samples[den].map((x, i) => samples[num][i] / x))
          : undefined;
      const pairedBA = paired("b", "a");
      // (d)/(b) the same way: at the 2048-token state with 4 questions the two are within a few
      // percent, where the ratio of medians moves with the machine's spells.
      const pairedDB = paired("d", "b");
      const cell = {
        stateTokens: tokens,
        questions: n,
        options: k,
        runs: run,
        evaluatedTokensB: evaluated,
        firstRequestMsB,
        medianMs: m,
        pairedBA,
        pairedDB,
        runsMs: samples,
        httpOverheadMs: overhead.length ? median(overhead) : undefined,
        // Of the overhead, the part spent inside the server around `decide` (parse, validate,
        // serialize): Server-Timing `app` − `decide`.
        serverHandlingMs: inServer.length ? median(inServer) : undefined,
        // The same exchange with an empty node:http server: the machine's floor for the overhead.
        emptyServerMs: emptyTrips.length ? median(emptyTrips) : undefined,
        // Each (c) run's figures, in run order, so a median's spread can be read.
        ...(overhead.length ? { httpRunsMs: { overhead, inServer, emptyServer: emptyTrips } } : {}),
      };
      cells.push(cell);
      writeReport();
      console.log(
        `state ${tokens} q ${n} k ${k}: a ${f0(m.a)} b ${f0(m.b)} c ${f0(m.c)} d ${f0(m.d)} e ${f0(m.e)} ms` +
          (m.a ? ` b/a ${(m.b / m.a).toFixed(2)}` : "") +
          (cell.httpOverheadMs !== undefined
            ? ` c−b(http) ${cell.httpOverheadMs.toFixed(1)} (server ${cell.serverHandlingMs.toFixed(1)})`
            : "") +
          (firstRequestMsB !== undefined ? ` (b, new questions: ${f0(firstRequestMsB)})` : "") +
          ` [${Math.round((Date.now() - started) / 1000)} s]`,
      );
    }

// ---- prefix cache: miss vs hit at the largest state, 1 question -------------------------------
const big = Math.max(...STATES);
const cache = { stateTokens: big, missMs: [], hitSnapshotMs: [], hitLastMs: [] };
// Untimed: the question's content-free prior, so the miss times the state alone.
await decider.decide(toDecision(await stateOf(64, ++caseNumber), wireQuestions(1, 4)));
for (let run = 0; run < RUNS; run++) {
  const wq = wireQuestions(1, 4);
  const x = await stateOf(big, ++caseNumber);
  const y = await stateOf(big, ++caseNumber);
  let t = now();
  await decider.decide(toDecision(x, wq));
  cache.missMs.push(now() - t);
  t = now();
  await decider.decide(toDecision(x, wq)); // sequence 0 still holds x
  cache.hitLastMs.push(now() - t);
  await decider.decide(toDecision(y, wq)); // x is saved as a snapshot
  t = now();
  await decider.decide(toDecision(x, wq)); // x comes back from the snapshot
  cache.hitSnapshotMs.push(now() - t);
}
cache.medianMissMs = median(cache.missMs);
cache.medianHitSnapshotMs = median(cache.hitSnapshotMs);
cache.medianHitLastMs = median(cache.hitLastMs);

const peakRssMiB = serverPeakRssMiB();
server?.kill();
await decisionContext?.dispose();
await rawContext?.dispose();
await engine.close();

const markdown = writeReport(cache, peakRssMiB);
console.log("\n" + markdown + `wrote ${base}.json and ${base}.md`);
process.exit(0);
