// The repeated-question workload (issue 49, item 4; issue 48, item 4): one question asked of many
// different states, as a classifier runs in production. In-process (decisiond's engine and
// readout, the shipped adapter and tuned readout), once per prompt layout: `question-first` (the
// question before the state, so its tokens come from the engine's KV cache after the first
// request) and `state-first` (the question after the state, evaluated with every request).
// Reports per layout the median latency, and the mean evaluated and cached tokens per request
// (the token counts do not depend on the machine's load; the times do).
//
// Options: 2 to 8 teams (workload.mjs), 77 (banking77's intents with their descriptions), or
// 128 / 255 (jevcompat's `choice-options` shapes: `Billing` and `Queue 001`… with descriptions).
//
// Usage: npm run build && node bench/repeated-question.mjs [--states 40] [--options 4|77|128|255]
//                                       [--layouts question-first,state-first] [--threads N]
//                                       [--json FILE] [--model NAME|PATH] [--adapter PATH|none]
//                                       [--label-chain parting|full] (docs/decisions/101)
//                                       [--trie-tolerance X] (docs/decisions/108; default the
//                                       Decider's)
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { Decider, TUNED_READOUT } from "../dist/decision/decide.js";
import { BANKING77_DESCRIPTIONS } from "../dist/evaluation/banking77.js";
import { openLlamaEngine } from "../dist/engine/llama/index.js";
import { resolveModel } from "../dist/evaluation/model.js";
import { adapterWeights } from "../dist/service/model.js";
import { median } from "./stats.mjs";
import { jevcompatQueues, TEAMS } from "./workload.mjs";

const { values: args } = parseArgs({
  options: {
    states: { type: "string", default: "40" },
    options: { type: "string", default: "4" },
    layouts: { type: "string", default: "question-first,state-first" },
    threads: { type: "string" },
    model: { type: "string", default: "smollm2-135m-instruct" },
    adapter: { type: "string" },
    json: { type: "string" },
    "label-chain": { type: "string", default: "parting" },
    "trie-tolerance": { type: "string" },
  },
});
const labelChain = args["label-chain"];
if (labelChain !== "parting" && labelChain !== "full")
  throw new Error(`--label-chain: parting or full, got ${labelChain}`);
const count = Number(args.states);
const k = Number(args.options);
if (!((Number.isInteger(k) && k >= 2 && k <= TEAMS.length) || [77, 128, 255].includes(k)))
  throw new Error(`--options: 2 to ${TEAMS.length}, 77, 128 or 255; got ${args.options}`);
const criteria =
  k === 77
    ? BANKING77_DESCRIPTIONS
    : k > TEAMS.length
      ? jevcompatQueues(k)
      : Object.fromEntries(TEAMS.slice(0, k).map(([id, description]) => [id, description]));
const question = {
  type: "choice",
  instructions:
    k > 77 ? "Which queue should this ticket go to?" : "Which team should handle this ticket?",
  options: Object.entries(criteria),
};
const layouts = args.layouts.split(",");
for (const layout of layouts)
  if (layout !== "question-first" && layout !== "state-first")
    throw new Error(`--layouts: question-first or state-first, got ${layout}`);
const SENTENCES = [
  "I was charged twice for my order and want the extra payment back.",
  "The app crashes every time I open the settings page on my phone.",
  "My parcel arrived with a broken lid and the contents spilled.",
  "Could you send me a quote for fifty more licences next year?",
  "I cannot sign in since I changed my password yesterday evening.",
  "Thanks to your team, the migration went smoothly. Great work!",
];
/** About 64 tokens of ticket text, different for every case. */
const stateOf = (i) =>
  `Ticket ${1000 + i}: ${SENTENCES[i % 6]} ${SENTENCES[(i * 5 + 1) % 6]} ${SENTENCES[(i * 7 + 2) % 6]}`;

const model = await resolveModel(args.model, true, args.adapter);
// The files `serve` loads: the model with the adapter added into its weights where it can be.
const engine = await openLlamaEngine({
  ...(await adapterWeights(model.modelPath, model.adapterPath)),
  id: model.modelId,
  ...(args.threads ? { threads: Number(args.threads) } : {}),
});
const results = {};
for (const layout of layouts) {
  const decider = new Decider(engine, {
    ...TUNED_READOUT,
    layout,
    labelChain,
    ...(args["trie-tolerance"] !== undefined
      ? { trieTolerance: Number(args["trie-tolerance"]) }
      : {}),
  });
  // One untimed request: the first sight of the question (and of the prompt head).
  await decider.decide({ state: stateOf(-1), questions: [["team", question]] });
  const ms = [];
  let evaluated = 0;
  let cached = 0;
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const result = await decider.decide({ state: stateOf(i), questions: [["team", question]] });
    ms.push(performance.now() - started);
    evaluated += result.stats.evaluatedTokens;
    cached += result.stats.cachedPrefixTokens;
  }
  results[layout] = {
    medianMs: median(ms),
    evaluatedTokensPerRequest: evaluated / count,
    cachedTokensPerRequest: cached / count,
  };
  console.log(
    `${layout}: median ${median(ms).toFixed(0)} ms, ${(evaluated / count).toFixed(1)} tokens evaluated and ${(cached / count).toFixed(1)} cached per request (${k} options, ${count} states, labels read ${labelChain === "full" ? "to their end" : "to their parting token"})`,
  );
}
if (results["state-first"] && results["question-first"])
  console.log(
    `ratio state-first / question-first: time ${(results["state-first"].medianMs / results["question-first"].medianMs).toFixed(2)}, evaluated tokens ${(results["state-first"].evaluatedTokensPerRequest / results["question-first"].evaluatedTokensPerRequest).toFixed(2)}`,
  );
if (args.json) {
  mkdirSync(dirname(args.json), { recursive: true });
  writeFileSync(
    args.json,
    JSON.stringify(
      {
        date: new Date().toISOString(),
        options: k,
        states: count,
        labelChain,
        trieTolerance: args["trie-tolerance"] ?? "default",
        results,
      },
      null,
      1,
    ) + "\n",
  );
}
await engine.close();
