// What leaving unlikely label-trie children unread costs and saves (docs/decisions/108): the same
// evaluation rows answered by decisiond's in-process engine and readout (the shipped adapter, the
// tuned readout) once per trie tolerance, the first tolerance the reference. Reports per tolerance
// the median latency, the decode calls that read labels (node-llama-cpp's `controlledEvaluate`,
// counted by wrapping it) and the tokens evaluated per request; against the reference, the
// largest change of any probability, the largest total variation distance and the answers that
// changed. Each tolerance's first row is answered once untimed (with `--layout question-first`,
// that puts the question in the prefix cache: every timed request then asks it again).
//
// Usage: npm run build && decisiond eval convert --dataset banking77 --split test --limit 24 --out ROWS
//        node bench/trie-tolerance.mjs --data ROWS [--tolerances 0,0.002] [--layout state-first]
//                                      [--json FILE]
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { LlamaContextSequence } from "node-llama-cpp";
import { Decider, TUNED_READOUT } from "../dist/decision/decide.js";
import { toDecisionRequest } from "../dist/decision/from-wire.js";
import { openLlamaEngine } from "../dist/engine/llama/index.js";
import { resolveModel } from "../dist/evaluation/model.js";
import { adapterWeights } from "../dist/service/model.js";
import { median } from "./stats.mjs";

const { values: args } = parseArgs({
  options: {
    data: { type: "string" },
    tolerances: { type: "string", default: "0,0.002" },
    layout: { type: "string", default: "state-first" },
    json: { type: "string" },
  },
});
if (!args.data) throw new Error("--data: an evaluation JSONL (decisiond eval convert)");
const tolerances = args.tolerances.split(",").map(Number);
const rows = readFileSync(args.data, "utf8")
  .trim()
  .split("\n")
  .map((line) => JSON.parse(line));

// Every label read is one controlledEvaluate call (lanes.ts); the prefix goes through
// evaluateWithoutGeneratingNewTokens.
let reads = 0;
const controlledEvaluate = LlamaContextSequence.prototype.controlledEvaluate;
LlamaContextSequence.prototype.controlledEvaluate = function (...input) {
  reads++;
  return controlledEvaluate.apply(this, input);
};

const model = await resolveModel("smollm2-135m-instruct", true);
const engine = await openLlamaEngine({
  ...(await adapterWeights(model.modelPath, model.adapterPath)),
  id: model.modelId,
});
/** Per tolerance: per row, its time, label reads, tokens evaluated and probabilities. */
const runs = [];
for (const trieTolerance of tolerances) {
  const decider = new Decider(engine, { ...TUNED_READOUT, layout: args.layout, trieTolerance });
  await decider.decide(toDecisionRequest(rows[0].request));
  const answers = [];
  for (const row of rows) {
    reads = 0;
    const started = performance.now();
    const result = await decider.decide(toDecisionRequest(row.request));
    const ms = performance.now() - started;
    const answer = Object.values(result.answers)[0];
    const probabilities =
      answer.type === "noul" ? { true: answer.noul, false: 1 - answer.noul } : answer.probabilities;
    answers.push({ ms, reads, evaluated: result.stats.evaluatedTokens, probabilities });
  }
  runs.push({ trieTolerance, answers });
}
await engine.close();

const mean = (xs) => xs.reduce((sum, x) => sum + x, 0) / xs.length;
const top = (p) => Object.entries(p).sort((a, b) => b[1] - a[1])[0][0];
const reference = runs[0].answers;
const report = runs.map(({ trieTolerance, answers }) => {
  let largestChange = 0;
  let largestDistance = 0;
  let changed = 0;
  answers.forEach((a, i) => {
    const b = reference[i].probabilities;
    let distance = 0;
    for (const [option, p] of Object.entries(a.probabilities)) {
      largestChange = Math.max(largestChange, Math.abs(p - b[option]));
      distance += Math.abs(p - b[option]) / 2;
    }
    largestDistance = Math.max(largestDistance, distance);
    if (top(a.probabilities) !== top(b)) changed++;
  });
  const line = {
    trieTolerance,
    medianMs: median(answers.map((a) => a.ms)),
    labelReadsPerRequest: mean(answers.map((a) => a.reads)),
    evaluatedTokensPerRequest: mean(answers.map((a) => a.evaluated)),
    largestChange,
    largestDistance,
    answersChanged: changed,
  };
  console.log(
    `tolerance ${trieTolerance}: median ${line.medianMs.toFixed(0)} ms, ${line.labelReadsPerRequest.toFixed(1)} label reads and ${line.evaluatedTokensPerRequest.toFixed(1)} tokens evaluated per request; against ${tolerances[0]}: largest probability change ${largestChange.toFixed(5)}, total variation ${largestDistance.toFixed(5)}, ${changed} of ${answers.length} answers changed`,
  );
  return line;
});
if (args.json) {
  mkdirSync(dirname(args.json), { recursive: true });
  const out = { date: new Date().toISOString(), data: args.data, layout: args.layout, report };
  writeFileSync(args.json, JSON.stringify(out, null, 1) + "\n");
}
