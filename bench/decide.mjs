// Issue 2 measurement: decisiond's in-process engine + readout vs node-llama-cpp's own
// LlamaDecisionContext.decide, same model, same inputs, in one run.
// State ≈ 512 tokens; 1, 4 and 16 choice questions of 4 options; RUNS runs each (medians).
// Every run uses a fresh state (a case number leads it) so neither side reuses a cached prefix.
// Usage: npm run build && node bench/decide.mjs [runs]
import { getLlama } from "node-llama-cpp";
import { cpus } from "node:os";
import { writeFileSync } from "node:fs";
import { openLlamaEngine } from "../dist/engine/llama.js";
import { Decider } from "../dist/decision/decide.js";
import { ensureModel } from "../dist/models/pull.js";

const RUNS = Number(process.argv[2] ?? 5);
const modelPath = await ensureModel("smollm2-135m-instruct");
const sentence =
  "The customer wrote that the parcel arrived late, the box was damaged, and the invoice listed an item they never ordered. ";
const engine = await openLlamaEngine({ modelPath, id: "smollm2-135m-instruct" });
const decider = new Decider(engine);
let base = "";
while (engine.tokenize(base).length < 500) base += sentence;
const stateTokens = engine.tokenize(base).length;

const OPTIONS = {
  billing: "Payments, invoices, refunds",
  shipping: "Deliveries and damaged parcels",
  technical: "Bugs and outages",
  sales: "Pricing and new contracts",
};
const questionsOf = (n) =>
  Array.from({ length: n }, (_, i) => [
    `q${i}`,
    { instructions: `Which team should handle this (${i + 1})?`, options: OPTIONS },
  ]);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = [];
let salt = 0;

for (const n of [1, 4, 16]) {
  const qs = questionsOf(n);
  const ours = [];
  for (let r = 0; r < RUNS + 1; r++) {
    const state = `Case ${++salt}. ${base}`;
    const request = {
      state,
      questions: qs.map(([id, q]) => [
        id,
        { type: "choice", instructions: q.instructions, options: Object.entries(q.options) },
      ]),
    };
    const t0 = performance.now();
    await decider.decide(request);
    if (r > 0) ours.push(performance.now() - t0); // first run warms up
  }
  results.push({
    system: "decisiond (in-process)",
    questions: n,
    medianMs: median(ours),
    runsMs: ours,
  });
}
await engine.close();

const llama = await getLlama({ gpu: "auto" });
const model = await llama.loadModel({ modelPath });
const dc = await model.createDecisionContext({ contextSize: 4096, threads: llama.cpuMathCores });
for (const n of [1, 4, 16]) {
  const qs = Object.fromEntries(
    questionsOf(n).map(([id, q]) => [
      id,
      { type: "choice", instruction: q.instructions, criteria: q.options },
    ]),
  );
  const theirs = [];
  for (let r = 0; r < RUNS + 1; r++) {
    const state = `Case ${++salt}. ${base}`;
    const t0 = performance.now();
    await dc.decide(state, qs);
    if (r > 0) theirs.push(performance.now() - t0);
  }
  results.push({
    system: "node-llama-cpp LlamaDecisionContext.decide",
    questions: n,
    medianMs: median(theirs),
    runsMs: theirs,
  });
}
await dc.dispose();

const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version };
const out = {
  date: new Date().toISOString(),
  stateTokens,
  options: 4,
  runs: RUNS,
  machine,
  results,
};
const file = `bench/results/decide-${out.date.slice(0, 10)}.json`;
writeFileSync(file, JSON.stringify(out, null, 2) + "\n");
console.log(`state ${stateTokens} tokens, 4 options, ${RUNS} runs each, medians (ms):`);
console.log("| questions | decisiond | LlamaDecisionContext | ratio |\n|---|---|---|---|");
for (const n of [1, 4, 16]) {
  const a = results.find((r) => r.questions === n && r.system.startsWith("decisiond")).medianMs;
  const b = results.find((r) => r.questions === n && !r.system.startsWith("decisiond")).medianMs;
  console.log(`| ${n} | ${a.toFixed(0)} | ${b.toFixed(0)} | ${(b / a).toFixed(2)}× |`);
}
console.log(`wrote ${file}`);
