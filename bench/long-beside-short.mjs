// A long request beside a short one (docs/decisions/103): one client sends a request with a long
// state (about 6,000 tokens, the outside probe's), another a short one while it runs. In-process
// (decisiond's engine and readout, the shipped adapter as `serve` loads it). Each run uses a new
// long state, so no prefix comes from the cache. Reports the medians over the runs of: the short
// request alone, the short one sent while the long one runs (from its own start), the long one
// alone, and the long one with the short one beside it.
//
// `--longs N` sends N long requests at once (from N clients), the short one after them; "the long
// one beside the short one" is then the first of them. `--shorts N`: that client sends N short
// requests one after the other (each once the one before is answered); the figures then also
// give the slowest of them.
//
// Usage: npm run build && node bench/long-beside-short.mjs [--runs 3] [--sentences 300]
//          [--longs 1] [--shorts 1] [--delay 500] [--prefix-cache BYTES] [--dist DIR] [--threads N]
//          [--json FILE]
// `--dist` runs another build (e.g. an earlier commit's, built in a worktree) for before/after;
// `--prefix-cache 0` turns the cache off, and with it the long request's turns.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { median } from "./stats.mjs";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    sentences: { type: "string", default: "300" },
    longs: { type: "string", default: "1" },
    shorts: { type: "string", default: "1" },
    delay: { type: "string", default: "500" },
    "prefix-cache": { type: "string" },
    dist: { type: "string", default: new URL("../dist", import.meta.url).pathname },
    threads: { type: "string" },
    json: { type: "string" },
  },
});
const dist = (path) => import(pathToFileURL(resolve(args.dist, path)).href);
const { Decider, TUNED_READOUT } = await dist("decision/decide.js");
const { openLlamaEngine } = await dist("engine/llama/index.js");
const { resolveModel } = await dist("evaluation/model.js");
const { adapterWeights } = await dist("service/model.js");

const QUESTION = [
  "team",
  {
    type: "choice",
    instructions: "Which team should handle this ticket?",
    options: [
      ["Billing", "Payments, invoices, refunds"],
      ["Technical", "Bugs, outages, errors"],
      ["Sales", "Quotes, new licences, upgrades"],
    ],
  },
];
const WORDS = ["invoice", "outage", "licence", "refund", "password", "parcel", "upgrade", "quote"];
/** A long state, different for every run: numbered log lines of a support conversation. */
const longState = (run, sentences) =>
  Array.from(
    { length: sentences },
    (_, i) =>
      `[${run}.${i}] The customer wrote again about the ${WORDS[(i * 3 + run) % 8]} and the ${WORDS[(i * 5 + run + 1) % 8]}.`,
  ).join(" ");
const shortState = (run) =>
  `Ticket ${run}: I was charged twice for my order and want the extra payment back.`;

const model = await resolveModel("smollm2-135m-instruct", true, undefined);
const engine = await openLlamaEngine({
  ...(await adapterWeights(model.modelPath, model.adapterPath)),
  id: model.modelId,
  ...(args.threads ? { threads: Number(args.threads) } : {}),
  ...(args["prefix-cache"] !== undefined ? { prefixCacheBytes: Number(args["prefix-cache"]) } : {}),
});
const decider = new Decider(engine, { ...TUNED_READOUT, layout: "state-first" });
const decide = async (state) => {
  const started = performance.now();
  const result = await decider.decide({ state, questions: [QUESTION] });
  return { ms: performance.now() - started, tokens: result.stats.evaluatedTokens };
};

await decide(shortState(-1)); // the prompt head, once
const runs = Number(args.runs);
const sentences = Number(args.sentences);
const delay = Number(args.delay);
const longs = Number(args.longs);
const shorts = Number(args.shorts);
const ms = { shortAlone: [], shortBeside: [], shortBesideMax: [], longAlone: [], longBeside: [] };
let longTokens = 0;
for (let run = 0; run < runs; run++) {
  ms.shortAlone.push((await decide(shortState(100 + run))).ms);
  const alone = await decide(longState(2 * run, sentences));
  longTokens = alone.tokens;
  ms.longAlone.push(alone.ms);
  const beside = Array.from({ length: longs }, (_, k) =>
    decide(longState(2 * run + 1 + 1000 * k, sentences)),
  );
  await new Promise((done) => setTimeout(done, delay));
  const each = [];
  for (let i = 0; i < shorts; i++) each.push((await decide(shortState(200 + 100 * run + i))).ms);
  ms.shortBeside.push(...each);
  ms.shortBesideMax.push(Math.max(...each));
  ms.longBeside.push((await Promise.all(beside))[0].ms);
}
const medians = Object.fromEntries(Object.entries(ms).map(([key, v]) => [key, median(v)]));
const s = (value) => `${(value / 1000).toFixed(2)} s`;
console.log(
  `${args.dist}, prefix cache ${args["prefix-cache"] ?? "default"}, long state ${longTokens} tokens evaluated, ${runs} runs, short sent ${delay} ms after ${longs} long:\n` +
    `  short alone ${s(medians.shortAlone)}, beside the long ${s(medians.shortBeside)} (the slowest of ${shorts} ${s(medians.shortBesideMax)})\n` +
    `  long alone ${s(medians.longAlone)}, beside the short ${s(medians.longBeside)}`,
);
if (args.json) {
  mkdirSync(dirname(args.json), { recursive: true });
  writeFileSync(
    args.json,
    JSON.stringify(
      {
        date: new Date().toISOString(),
        dist: args.dist,
        longTokens,
        longs,
        shorts,
        delay,
        runs,
        medians,
        ms,
      },
      null,
      1,
    ) + "\n",
  );
}
await engine.close();
