// Prompt-processing speed of GGUF files of one model, side by side (docs/decisions/092): each
// file × context setting evaluates the same prompts (one per --tokens length) into a fresh
// sequence, the files and settings taking turns within every run (the order rotates run by
// run), so they share the machine's load; prints medians, tokens per second and each cell's
// ratio to the first file's cell of the same setting and length.
//
// Usage: npm run build && nice -n 5 node bench/quant-speed.mjs --files A.gguf,B.gguf[,…]
//          [--runs 7] [--tokens 64,512] [--adapter PATH|none (default: the shipped adapter)]
//          [--settings "threads=2,batch=1024,fa=auto;threads=1"] [--json OUT.json]
// A setting is comma-separated key=value: threads (default llama.cpuMathCores), batch (tokens
// per decode call, which node-llama-cpp also makes the micro-batch; default 1024, as the engine)
// fa (flash attention: auto, on, off; default auto, as the engine) and kv (the KV cache's type,
// f16, as the engine, or f32, q8_0; K/V, e.g. f32/f16, gives keys and values apart).
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { basename } from "node:path";
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { median } from "./stats.mjs";

const { values: args } = parseArgs({
  options: {
    files: { type: "string" },
    runs: { type: "string", default: "7" },
    tokens: { type: "string", default: "64,512" },
    adapter: { type: "string", default: "adapters/smollm2-135m-instruct.decision.gguf" },
    settings: { type: "string", default: "" },
    json: { type: "string" },
  },
});
if (!args.files) throw new Error("--files is required");
const files = args.files.split(",");
const runs = Number(args.runs);
const lengths = args.tokens.split(",").map(Number);
const adapter = args.adapter === "none" ? undefined : args.adapter;

const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
const settings = (args.settings || `threads=${llama.cpuMathCores}`).split(";").map((spec) => {
  const kv = Object.fromEntries(spec.split(",").map((p) => p.split("=")));
  return {
    label: spec,
    threads: Number(kv.threads ?? llama.cpuMathCores),
    batch: Number(kv.batch ?? 1024),
    fa: kv.fa === "on" ? true : kv.fa === "off" ? false : "auto",
    kv: (kv.kv ?? "f16").toUpperCase().split("/"),
  };
});

const text = Array.from(
  { length: 200 },
  (_, i) =>
    `Case ${i}: the parcel arrived late, the box was damaged and the customer wants a refund.`,
).join(" ");

/** One cell per file × setting: its context's sequence and its timings per prompt length. */
const cells = [];
for (const file of files) {
  const model = await llama.loadModel({ modelPath: file });
  const all = model.tokenize(text);
  const prompts = lengths.map((n) => all.slice(0, n));
  for (const setting of settings) {
    const context = await model.createContext({
      contextSize: 8192,
      batchSize: setting.batch,
      threads: setting.threads,
      flashAttention: setting.fa,
      experimentalKvCacheKeyType: setting.kv[0],
      experimentalKvCacheValueType: setting.kv[1] ?? setting.kv[0],
      ...(adapter ? { lora: { adapters: [{ filePath: adapter }] } } : {}),
    });
    cells.push({
      file: basename(file),
      setting,
      sequence: context.getSequence(),
      prompts,
      ms: lengths.map(() => []),
    });
  }
}

/** Evaluates a cell's prompts once each, from an empty sequence; records the times. */
async function measure(cell) {
  for (const [i, prompt] of cell.prompts.entries()) {
    await cell.sequence.clearHistory();
    const started = performance.now();
    await cell.sequence.evaluateWithoutGeneratingNewTokens(prompt);
    cell.ms[i].push(performance.now() - started);
  }
}

for (const cell of cells) await measure(cell); // warm-up, not recorded
for (const cell of cells) cell.ms = lengths.map(() => []);
for (let run = 0; run < runs; run++)
  for (let k = 0; k < cells.length; k++) await measure(cells[(k + run) % cells.length]);

const rows = [];
for (const cell of cells)
  for (const [i, n] of lengths.entries()) {
    const base = cells.find((c) => c.setting === cell.setting);
    const ms = median(cell.ms[i]);
    rows.push({
      file: cell.file,
      setting: cell.setting.label,
      tokens: n,
      medianMs: Math.round(ms * 10) / 10,
      tokensPerSecond: Math.round((n / ms) * 1000),
      ratioToFirstFile: Math.round((ms / median(base.ms[i])) * 1000) / 1000,
      ms: cell.ms[i].map((x) => Math.round(x)),
    });
  }
console.log(
  `${runs} runs, medians; adapter ${adapter ?? "none"}; ` +
    `load average at the end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}`,
);
console.log("| file | setting | tokens | median ms | tokens/s | × first file |");
console.log("|---|---|---:|---:|---:|---:|");
for (const r of rows)
  console.log(
    `| ${r.file} | ${r.setting} | ${r.tokens} | ${r.medianMs} | ${r.tokensPerSecond} | ${r.ratioToFirstFile} |`,
  );
if (args.json) writeFileSync(args.json, JSON.stringify({ runs, adapter, rows }, null, 2) + "\n");
process.exit(0);
