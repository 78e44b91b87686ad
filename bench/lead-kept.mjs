// One question asked again of the same state (docs/decisions/110): state first, one choice of
// 77 described options (banking77's intents) or 128 / 255 (jevcompat's queues), asked of state A,
// A again, B, A again after B, C, C again, the engine idle between requests (its write-behind
// done). Prints each request's time, evaluated and cached tokens and answer, then the prefix
// cache's counts. `--dist` runs another build (e.g. a worktree of an earlier commit).
//
// `--list-windows off` evaluates the list whole (docs/decisions/113).
//
// Usage: npm run build && node bench/lead-kept.mjs [--options 77|128|255] [--list-windows on|off]
//          [--dist DIR]
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { jevcompatQueues } from "./workload.mjs";

const { values: args } = parseArgs({
  options: {
    options: { type: "string", default: "255" },
    "list-windows": { type: "string", default: "on" },
    dist: { type: "string", default: new URL("../dist", import.meta.url).pathname },
  },
});
const k = Number(args.options);
if (![77, 128, 255].includes(k)) throw new Error(`--options: 77, 128 or 255; got ${args.options}`);
const dist = pathToFileURL(resolve(args.dist)).href;
const { Decider, TUNED_READOUT } = await import(`${dist}/decision/decide.js`);
const { openLlamaEngine } = await import(`${dist}/engine/llama/index.js`);
const { resolveModel } = await import(`${dist}/evaluation/model.js`);
const { adapterWeights } = await import(`${dist}/service/model.js`);
const { BANKING77_DESCRIPTIONS } = await import(`${dist}/evaluation/banking77.js`);

const question = {
  type: "choice",
  instructions:
    k === 77 ? "Which intent does this message have?" : "Which queue should this ticket go to?",
  options: Object.entries(k === 77 ? BANKING77_DESCRIPTIONS : jevcompatQueues(k)),
};
const STATES = {
  A: "I was charged twice for my order and want the extra payment back.",
  B: "The app crashes every time I open the settings page on my phone.",
  C: "My card has not arrived yet, it has been two weeks since I ordered it.",
};
const model = await resolveModel("smollm2-135m-instruct", true, undefined);
const engine = await openLlamaEngine({
  ...(await adapterWeights(model.modelPath, model.adapterPath)),
  id: model.modelId,
});
const listWindows = args["list-windows"] !== "off";
const decider = new Decider(engine, { ...TUNED_READOUT, listWindows });
const steps = [
  ["A", "first"],
  ["A", "again"],
  ["B", "first"],
  ["A", "after B"],
  ["C", "first"],
  ["C", "again"],
];
for (const [name, label] of steps) {
  await engine.idle();
  const started = performance.now();
  const result = await decider.decide({ state: STATES[name], questions: [["q", question]] });
  const ms = Math.round(performance.now() - started);
  const { evaluatedTokens, cachedPrefixTokens } = result.stats;
  const { choice, probabilities } = result.answers.q;
  console.log(
    `${k} options, ${name} ${label}: ${ms} ms, ${evaluatedTokens} tokens evaluated, ${cachedPrefixTokens} cached, ${choice} (${probabilities[choice].toFixed(3)})`,
  );
}
await engine.idle();
console.log(
  `snapshots ${JSON.stringify(engine.prefixCache?.stats)}, ${engine.prefixCache?.bytes} bytes`,
);
await engine.close();
