// The remote path against the embedded engine, one run (issue 33, item 6; docs/experiments/048-remote-bench.md):
//
// (a) per-request overhead: the same requests through decisiond with the embedded engine and
//     through decisiond in front of a llama-server (`--engine llama-server=URL`) on the same GGUF,
//     alternating, one request at a time; medians of the client's time per request.
// (b) 8 accounts at once against one llama-server started with `--parallel 4`: 8 clients each
//     with one request in flight (what one-request-per-account admission allows 8 accounts),
//     against 1 client at a time; requests per second over the same number of requests.
//
// Every request has its own state (a case number), so no request repeats another's prefix.
// Usage: npm run build && scripts/build-llama-server.sh && node bench/remote.mjs
//          [--requests 24] [--questions 2] [--threads 2]
import { spawn } from "node:child_process";
import http from "node:http";
import { createServer } from "node:net";
import { parseArgs } from "node:util";
import { execFileSync } from "node:child_process";
import { openRemoteEngines } from "../dist/decision/backends/remote.js";
import { DEFAULT_MODEL } from "../dist/models/catalogue.js";
import { ensureModel } from "../dist/models/pull.js";
import { startService } from "../dist/service/build.js";
import { postJson } from "./post-json.mjs";
import { median } from "./stats.mjs";
import { wireQuestions } from "./workload.mjs";

const { values: args } = parseArgs({
  options: {
    requests: { type: "string", default: "24" },
    questions: { type: "string", default: "2" },
    threads: { type: "string", default: "2" },
  },
});
const REQUESTS = Number(args.requests);
const QUESTIONS = Number(args.questions);
const THREADS = Number(args.threads);

const modelPath = await ensureModel(DEFAULT_MODEL, { progress: false });
const binary = execFileSync("bash", ["scripts/build-llama-server.sh"], { encoding: "utf8" }).trim();

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function llamaServer(parallel) {
  const port = await freePort();
  const child = spawn(
    binary,
    ["-m", modelPath, "--host", "127.0.0.1", "--port", String(port), "--parallel", String(parallel)]
      .concat(["-c", String(2048 * parallel), "-t", String(THREADS), "-b", "1024", "-ub", "1024"])
      .concat(["--no-webui"]),
    { stdio: "ignore" },
  );
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) break;
    } catch {
      // starting
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { url, stop: () => child.kill("SIGKILL") };
}

const common = {
  modelId: DEFAULT_MODEL,
  isDefault: true,
  host: "127.0.0.1",
  port: 0,
  logger: false,
  contextSize: 2048,
};
let caseNumber = 0;
const body = () =>
  JSON.stringify({
    model: DEFAULT_MODEL,
    state: `Case ${++caseNumber}. The parcel arrived two weeks late and the box was crushed; the customer asks for a refund.`,
    questions: wireQuestions(QUESTIONS, 4),
  });
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
async function timed(url) {
  const t0 = performance.now();
  const r = await postJson(`${url}/v1/systemone`, agent, body());
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
  return performance.now() - t0;
}

// (a) overhead, one request at a time, alternating.
const one = await llamaServer(1);
const embedded = await startService({ ...common, modelPath, threads: THREADS });
const serving = await openRemoteEngines([{ kind: "llama-server", url: one.url }], {
  deadlineMs: 600_000,
});
const remote = await startService({ ...common, engine: serving.engine });
for (const url of [embedded.url, remote.url]) await timed(url); // warm-up: priors, templates
const ms = { embedded: [], remote: [] };
for (let i = 0; i < REQUESTS; i++) {
  const order = i % 2 ? ["remote", "embedded"] : ["embedded", "remote"];
  for (const name of order)
    ms[name].push(await timed(name === "remote" ? remote.url : embedded.url));
}
await remote.close();
await embedded.close();
one.stop();
const a = { embedded: median(ms.embedded), remote: median(ms.remote) };

// (b) throughput against one llama-server with 4 slots: 1 client, then 8 clients.
const four = await llamaServer(4);
const served = await openRemoteEngines([{ kind: "llama-server", url: four.url }], {
  deadlineMs: 600_000,
});
const front = await startService({ ...common, engine: served.engine });
await timed(front.url);
async function throughput(clients) {
  let left = REQUESTS;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (left-- > 0) await timed(front.url);
    }),
  );
  return (REQUESTS / (performance.now() - t0)) * 1000;
}
const serial = await throughput(1);
const eight = await throughput(8);
await front.close();
four.stop();
agent.destroy();

const line = (k, v) => console.log(`${k.padEnd(44)} ${v}`);
console.log(
  `\nbench/remote.mjs: ${DEFAULT_MODEL}, ${QUESTIONS} questions × 4 options, ${REQUESTS} requests, ${THREADS} threads, ${new Date().toISOString().slice(0, 10)}`,
);
line("(a) embedded, median ms per request", a.embedded.toFixed(1));
line("(a) llama-server (--parallel 1), median ms", a.remote.toFixed(1));
line("(a) remote overhead, ms (median difference)", (a.remote - a.embedded).toFixed(1));
line("(b) 1 client, requests/s (--parallel 4)", serial.toFixed(2));
line("(b) 8 clients at once, requests/s", eight.toFixed(2));
line("(b) 8 at once / 1 at a time", (eight / serial).toFixed(2));
process.exit(0);
