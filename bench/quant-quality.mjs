// How far the answers of GGUF files of one model are from the first file's (docs/decisions/092):
// the same real requests (the first --per requests of each --data file, decisiond's eval format)
// through decisiond's Decider with the shipped adapter and its tuned readout, uncalibrated, one
// file after the other. Reports, per file against the first: the largest |Δ log p| of a
// question's labels (log of the answer probabilities, renormalised over the question's labels,
// before calibration), the largest and the mean |Δ p| over labels, how many answers (argmax) changed, and the accuracy
// against the expected answers.
//
// Usage: npm run build && nice -n 5 node bench/quant-quality.mjs --files A.gguf,B.gguf[,…]
//          --data a.jsonl,b.jsonl [--per 4] [--threads 1] [--adapter PATH|none] [--json OUT]
import { readFileSync, writeFileSync } from "node:fs";
import { basename } from "node:path";
import { parseArgs } from "node:util";
import { Decider } from "../dist/decision/decide.js";
import { TUNED_READOUT } from "../dist/decision/options.js";
import { openLlamaEngine } from "../dist/engine/llama/index.js";
import { toDecisionRequest } from "../dist/decision/from-wire.js";

const { values: args } = parseArgs({
  options: {
    files: { type: "string" },
    data: { type: "string" },
    per: { type: "string", default: "4" },
    threads: { type: "string", default: "1" },
    adapter: { type: "string", default: "adapters/smollm2-135m-instruct.decision.gguf" },
    json: { type: "string" },
  },
});
if (!args.files || !args.data) throw new Error("--files and --data are required");
const files = args.files.split(",");
const adapterPath = args.adapter === "none" ? undefined : args.adapter;
const cases = args.data.split(",").flatMap((path) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .slice(0, Number(args.per))
    .map((line) => JSON.parse(line)),
);

/** Per file: per case, per question id, the answer's probabilities by class. */
const results = [];
for (const file of files) {
  const engine = await openLlamaEngine({
    modelPath: file,
    threads: Number(args.threads),
    ...(adapterPath ? { adapterPath } : {}),
  });
  const decider = new Decider(engine, { ...TUNED_READOUT, debias: "off" });
  const started = performance.now();
  const answers = [];
  for (const c of cases) {
    const result = await decider.decide(toDecisionRequest(c.request));
    answers.push(
      Object.fromEntries(
        Object.entries(result.answers).map(([qid, a]) => [
          qid,
          a.type === "noul" ? { true: a.noul, false: 1 - a.noul } : a.probabilities,
        ]),
      ),
    );
  }
  results.push({ file: basename(file), answers, seconds: (performance.now() - started) / 1000 });
  await engine.close();
}

const argmax = (p) => Object.entries(p).reduce((a, b) => (b[1] > a[1] ? b : a))[0];
const expectedOf = (c, qid) => {
  const e = c.expected?.[qid];
  return typeof e === "boolean" ? String(e) : e === undefined ? undefined : String(e);
};
const base = results[0];
const rows = results.map((r) => {
  let maxDLogP = 0;
  let maxDP = 0;
  let sumDP = 0;
  let labels = 0;
  let changed = 0;
  let correct = 0;
  let questions = 0;
  for (const [i, c] of cases.entries())
    for (const [qid, p] of Object.entries(r.answers[i])) {
      const q = base.answers[i][qid];
      questions++;
      for (const k of Object.keys(q)) {
        maxDP = Math.max(maxDP, Math.abs(p[k] - q[k]));
        sumDP += Math.abs(p[k] - q[k]);
        labels++;
        // Labels the base gives under 1e-6 are below any answer's resolution; skip their logs.
        if (q[k] > 1e-6)
          maxDLogP = Math.max(maxDLogP, Math.abs(Math.log(p[k]) - Math.log(Math.max(q[k], 1e-30))));
      }
      if (argmax(p) !== argmax(q)) changed++;
      if (argmax(p) === expectedOf(c, qid)) correct++;
    }
  return {
    file: r.file,
    questions,
    maxAbsDeltaLogP: Math.round(maxDLogP * 1000) / 1000,
    maxAbsDeltaP: Math.round(maxDP * 1000) / 1000,
    meanAbsDeltaP: Math.round((sumDP / labels) * 10000) / 10000,
    answersChanged: changed,
    accuracy: Math.round((correct / questions) * 1000) / 1000,
    seconds: Math.round(r.seconds),
  };
});
console.log(`${cases.length} requests; adapter ${adapterPath ?? "none"}; against ${base.file}`);
console.log(
  "| file | questions | max abs Δ log p | max abs Δ p | mean abs Δ p | answers changed | accuracy |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const r of rows)
  console.log(
    `| ${r.file} | ${r.questions} | ${r.maxAbsDeltaLogP} | ${r.maxAbsDeltaP} | ${r.meanAbsDeltaP} | ${r.answersChanged} | ${r.accuracy} |`,
  );
if (args.json) writeFileSync(args.json, JSON.stringify({ rows, results }, null, 2) + "\n");
process.exit(0);
