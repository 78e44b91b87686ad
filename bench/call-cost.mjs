// What one `llama_decode` call costs on top of a KV cache of a given depth (docs/SPEED.md, "Many
// labels and long prompts"): calls of 1, 4 and 16 tokens without logits, 4 tokens reading the
// candidates at the last token or at every token (as the engine reads a label chain, lanes.ts),
// and two sequences of 4 tokens each, one after the other and at once (node-llama-cpp then puts
// both into one call). Each case is timed `--runs` times on top of the same cached tokens, which
// are kept between runs; medians in ms. The model is the bundle `serve` loads.
//
// Usage: npm run build && node bench/call-cost.mjs [--depth 1800] [--runs 15]
//                                                  [--threads N (default: physical cores)]
//                                                  [--model NAME|PATH] [--adapter PATH|none]
//                                                  [--kv f16|f32|K/V (the KV cache's type; f16)]
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { resolveModel } from "../dist/evaluation/model.js";
import { adapterWeights } from "../dist/service/model.js";
import { median } from "./stats.mjs";

const { values: args } = parseArgs({
  options: {
    depth: { type: "string", default: "1800" },
    runs: { type: "string", default: "15" },
    threads: { type: "string" },
    model: { type: "string", default: "smollm2-135m-instruct" },
    adapter: { type: "string" },
    kv: { type: "string", default: "f16" },
  },
});
const depth = Number(args.depth);
const runs = Number(args.runs);

const resolved = await resolveModel(args.model, true, args.adapter);
const { modelPath } = await adapterWeights(resolved.modelPath, resolved.adapterPath);
const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({
  contextSize: 8192,
  batchSize: 1024,
  sequences: 2,
  experimentalKvCacheKeyType: args.kv.toUpperCase().split("/")[0],
  experimentalKvCacheValueType: args.kv.toUpperCase().split("/").at(-1),
  // As the engine does (engine/llama/index.ts): without it, node-llama-cpp's default took 3 s a
  // call on this 2-vCPU machine.
  threads: args.threads ? Number(args.threads) : llama.cpuMathCores,
});
const [one, two] = [context.getSequence(), context.getSequence()];

// A long option list as the cached depth (jevcompat's queue lines, repeated as needed).
const lines = Array.from(
  { length: Math.ceil(depth / 10) },
  (_, i) => `Queue ${String(i % 1000).padStart(3, "0")}: Tickets routed to queue ${i}`,
);
const cached = model.tokenize(lines.join("\n")).slice(0, depth);
if (cached.length < depth) throw new Error(`only ${cached.length} tokens for --depth ${depth}`);
for (let i = 0; i < cached.length; i += 1024)
  await one.evaluateWithoutGeneratingNewTokens(cached.slice(i, i + 1024));
await two._copyStateFromOtherSequence(one, depth);

const tokens = model.tokenize(
  " card payment wrong exchange rate top up reverted pending transfer declined",
);
const sixteen = [...tokens, ...tokens].slice(0, 16);
const candidates = tokens.slice(0, 8);
/** The engine's read of a label node: the candidates' logits and the full-vocabulary weight. */
const read = {
  generateNext: {
    options: { temperature: 0 },
    logits: { filter: { tokens: candidates, includeSelected: true } },
    totalLogitWeight: true,
  },
};
const readLast = (t) => [...t.slice(0, -1), [t.at(-1), read]];

/** Median ms of `fn` over the runs, each followed by erasing what it added to both sequences. */
async function time(label, fn) {
  const ms = [];
  for (let r = 0; r < runs; r++) {
    const started = performance.now();
    await fn();
    ms.push(performance.now() - started);
    for (const sequence of [one, two])
      if (sequence.nextTokenIndex > depth)
        await sequence.eraseContextTokenRanges([{ start: depth, end: sequence.nextTokenIndex }]);
  }
  console.log(`${label.padEnd(44)} ${median(ms).toFixed(1)} ms`);
}

console.log(`on top of ${depth} cached tokens, medians of ${runs}:`);
await time("1 token, no logits", () => one.evaluateWithoutGeneratingNewTokens(tokens.slice(0, 1)));
await time("4 tokens, no logits", () => one.evaluateWithoutGeneratingNewTokens(tokens.slice(0, 4)));
await time("16 tokens, no logits", () => one.evaluateWithoutGeneratingNewTokens(sixteen));
await time("4 tokens, read at the last", () =>
  one.controlledEvaluate(readLast(tokens.slice(0, 4))),
);
await time("4 tokens, read at each", () =>
  one.controlledEvaluate(tokens.slice(0, 4).map((t) => [t, read])),
);
await time("8 tokens, read at the last", () =>
  one.controlledEvaluate(readLast(tokens.slice(0, 8))),
);
await time("2 sequences × 4 tokens, one after the other", async () => {
  await one.controlledEvaluate(readLast(tokens.slice(0, 4)));
  await two.controlledEvaluate(readLast(tokens.slice(0, 4)));
});
await time("2 sequences × 4 tokens, at once", () =>
  Promise.all([
    one.controlledEvaluate(readLast(tokens.slice(0, 4))),
    two.controlledEvaluate(readLast(tokens.slice(0, 4))),
  ]),
);
await context.dispose();
await model.dispose();
await llama.dispose();
