// Where the HTTP overhead of a request goes: decisiond's app (dist/api/app.js) against a bare
// Fastify route and a bare node:http server, each in its own process, each answering through the
// same stand-in model: `threads` worker threads that stream through 64 MiB each for --hold ms
// (as llama.cpp streams a model's weights, so the server's code runs with cold caches after it,
// as after a real decode), then the answers of a 0.9 / 0.1 … readout. Requests go to the three in
// turn (the order reversed every round) over node:http keep-alive, so the machine's slow and fast
// spells fall on all of them alike.
//
// Per request it records, as bench/run.mjs does for (c):
//   overhead   the client's time for the request less the server's Server-Timing `decide` (ms);
//   server     in the server, from the `request` event to `writeHead`, less `decide`;
//   app phases (decisiond's app only) the same span cut at Fastify's hooks: routing to
//              `onRequest`, the body read (`preParsing` → `preValidation`, the JSON parse
//              included), the route up to the model (validation), after the model up to
//              `onSend` (serialization), and `onSend` → `writeHead`.
// It prints the medians over --requests rounds (the first round, a warm-up, left out).
//
// Usage: npm run build && node bench/http-overhead.mjs [--requests 30] [--hold 300]
//          [--questions 16] [--options 2] [--state-chars 10000] [--threads 2]
import { spawn } from "node:child_process";
import http from "node:http";
import { parseArgs } from "node:util";
import { Worker } from "node:worker_threads";
import { postJson } from "./post-json.mjs";
import { median } from "./stats.mjs";
import { wireQuestions } from "./workload.mjs";

const { values: args } = parseArgs({
  options: {
    requests: { type: "string", default: "30" },
    hold: { type: "string", default: "300" },
    questions: { type: "string", default: "16" },
    options: { type: "string", default: "2" },
    "state-chars": { type: "string", default: "10000" },
    threads: { type: "string", default: "2" },
    serve: { type: "string" }, // internal: run one server ("app" | "fastify" | "node")
    port: { type: "string" },
  },
});
const HOLD_MS = Number(args.hold);
const THREADS = Number(args.threads);
const SERVERS = ["app", "fastify", "node"];

if (args.serve) await serve(args.serve, Number(args.port));
else await drive();

// ---- the servers -------------------------------------------------------------------------------

/** Starts one server variant on `port`; prints "up" when it listens. */
async function serve(variant, port) {
  const source = `const { parentPort } = require("node:worker_threads");
    const memory = new Float64Array(8 << 20);
    parentPort.on("message", (ms) => { const end = performance.now() + ms; let x = 0;
      while (performance.now() < end) for (let i = 0; i < memory.length; i += 8) memory[i] += x++;
      parentPort.postMessage(0); });`;
  const workers = Array.from({ length: THREADS }, () => new Worker(source, { eval: true }));
  /** The stand-in model: keeps every worker busy for HOLD_MS. */
  const compute = () =>
    Promise.all(
      workers.map(
        (w) => new Promise((resolve) => (w.once("message", resolve), w.postMessage(HOLD_MS))),
      ),
    );
  /** A wire body's questions as [id, options as [id, text][]] pairs. */
  const optionsOf = (body) =>
    Object.entries(body.questions).map(([id, q]) => [id, Object.entries(q.criteria)]);
  /** The answers of `questions` ([id, options as [id, text][]] pairs), as the readout gives them. */
  const answersOf = (questions) =>
    Object.fromEntries(
      questions.map(([id, options]) => [
        id,
        {
          type: "choice",
          choice: options[0][0],
          probabilities: Object.fromEntries(
            options.map(([o], i) => [o, i ? 0.1 / (options.length - 1) : 0.9]),
          ),
        },
      ]),
    );
  let marks = {};
  /** Marks the raw request's arrival and `writeHead`; sends the marks back in `x-phases`. */
  const instrument = (server) =>
    server.prependListener("request", (_req, res) => {
      marks = { request: performance.now() };
      const writeHead = res.writeHead;
      res.writeHead = function (status, headers) {
        marks.writeHead = performance.now();
        const at = Object.fromEntries(
          Object.entries(marks).map(([k, t]) => [k, +(t - marks.request).toFixed(4)]),
        );
        this.setHeader("x-phases", JSON.stringify(at));
        return writeHead.call(this, status, headers);
      };
    });

  if (variant === "node") {
    const server = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", async () => {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        const questions = optionsOf(body);
        const started = performance.now();
        await compute();
        const answers = answersOf(questions);
        const text = JSON.stringify({
          model: body.model,
          answers,
          usage: { input_tokens: 1, output_tokens: 1 },
        });
        res.writeHead(200, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(text),
          "server-timing": `decide;dur=${(performance.now() - started).toFixed(2)}`,
        });
        res.end(text);
      });
    });
    instrument(server);
    server.listen(port, "127.0.0.1", () => console.log("up"));
    return;
  }

  let app;
  if (variant === "fastify") {
    const { default: Fastify } = await import("fastify");
    app = Fastify({ logger: false });
    app.post("/v1/systemone", async (request, reply) => {
      const questions = optionsOf(request.body);
      const started = performance.now();
      await compute();
      const answers = answersOf(questions);
      reply.header("server-timing", `decide;dur=${(performance.now() - started).toFixed(2)}`);
      return { model: request.body.model, answers, usage: { input_tokens: 1, output_tokens: 1 } };
    });
  } else {
    const { buildApp } = await import("../dist/api/app.js");
    app = await buildApp({
      models: [
        {
          names: ["stand-in"],
          aliases: ["jev-latest"],
          description: "a stand-in that computes for --hold ms",
          releaseDate: "2026-11-24",
          acceptsImages: false,
          acceptsVideos: false,
          decide: async (request) => {
            marks.decideIn = performance.now();
            await compute();
            const answers = answersOf(request.questions.map(([id, q]) => [id, q.options]));
            marks.decideOut = performance.now();
            return { answers, usage: { input_tokens: 1, output_tokens: request.questions.length } };
          },
        },
      ],
      // As bench/run.mjs serves it (--log-level warn).
      logger: { level: "warn" },
    });
    // Appended after the app's own hooks of each kind (Fastify builds a route's hooks when ready).
    app.addHook("onRequest", async () => void (marks.onRequest = performance.now()));
    app.addHook(
      "preParsing",
      async (_q, _r, payload) => ((marks.preParsing = performance.now()), payload),
    );
    app.addHook("preValidation", async () => void (marks.preValidation = performance.now()));
    app.addHook("onSend", async (_q, _r, payload) => ((marks.onSend = performance.now()), payload));
  }
  instrument(app.server);
  await app.listen({ host: "127.0.0.1", port });
  console.log("up");
}

// ---- the client --------------------------------------------------------------------------------

async function drive() {
  const servers = await Promise.all(
    SERVERS.map(
      (variant, i) =>
        new Promise((resolve, reject) => {
          const port = 19300 + Math.floor(Math.random() * 500) * 3 + i;
          const child = spawn(
            process.execPath,
            [
              new URL(import.meta.url).pathname,
              "--serve",
              variant,
              "--port",
              String(port),
              "--hold",
              args.hold,
              "--threads",
              args.threads,
            ],
            { stdio: ["ignore", "pipe", "inherit"] },
          );
          child.once("error", reject);
          child.stdout.once("data", () =>
            resolve({
              variant,
              child,
              port,
              agent: new http.Agent({ keepAlive: true, maxSockets: 1 }),
              runs: [],
            }),
          );
        }),
    ),
  );
  process.on("exit", () => servers.forEach((s) => s.child.kill()));

  const questions = wireQuestions(Number(args.questions), Number(args.options));
  const sentence = "The customer wrote that the parcel arrived late and the box was damaged. ";
  const base = sentence.repeat(Math.ceil(Number(args["state-chars"]) / sentence.length));
  let caseNumber = 0;

  for (let round = 0; round <= Number(args.requests); round++) {
    for (const s of round % 2 ? [...servers].reverse() : servers) {
      const t0 = performance.now();
      const body = JSON.stringify({
        model: "jev-latest",
        state: `Case ${++caseNumber}. ${base}`,
        questions,
      });
      const { status, headers, text } = await postJson(
        `http://127.0.0.1:${s.port}/v1/systemone`,
        s.agent,
        body,
      );
      JSON.parse(text);
      const total = performance.now() - t0;
      if (status !== 200) throw new Error(`${s.variant}: HTTP ${status} ${text.slice(0, 200)}`);
      const decide = Number(/decide;dur=([\d.]+)/.exec(headers["server-timing"])[1]);
      const at = JSON.parse(headers["x-phases"]);
      if (round > 0) s.runs.push({ overhead: total - decide, server: at.writeHead - decide, at });
    }
  }

  console.log(
    `${Number(args.requests)} rounds, ${args.questions} questions × ${args.options} options, ` +
      `state ${base.length} chars, stand-in computes ${HOLD_MS} ms on ${THREADS} threads; medians, ms`,
  );
  console.log("server    overhead (client − decide)   server (request → writeHead − decide)");
  for (const s of servers)
    console.log(
      `${s.variant.padEnd(9)} ${median(s.runs.map((r) => r.overhead))
        .toFixed(3)
        .padStart(8)}` +
        `${median(s.runs.map((r) => r.server))
          .toFixed(3)
          .padStart(32)}`,
    );
  const app = servers.find((s) => s.variant === "app");
  const phase = (from, to) => median(app.runs.map((r) => r.at[to] - r.at[from])).toFixed(3);
  console.log("decisiond's app, by phase:");
  console.log(
    `  request event → onRequest (routing, request objects)   ${phase("request", "onRequest")}`,
  );
  console.log(
    `  onRequest → preParsing (its hooks)                     ${phase("onRequest", "preParsing")}`,
  );
  console.log(
    `  preParsing → preValidation (body read, JSON parse)     ${phase("preParsing", "preValidation")}`,
  );
  console.log(
    `  preValidation → model (body check, translation)        ${phase("preValidation", "decideIn")}`,
  );
  console.log(
    `  model → onSend (serialization)                         ${phase("decideOut", "onSend")}`,
  );
  console.log(
    `  onSend → writeHead                                      ${phase("onSend", "writeHead")}`,
  );
  process.exit(0);
}
