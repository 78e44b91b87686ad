// How much of a long evaluation is attention (docs/decisions/112): the same N tokens evaluated
// as one sequence, then as K sequences of N/K tokens each in the same batches (node-llama-cpp
// gives every sequence its own KV stream, so each attends to its own tokens only). Two rounds.
//
// Usage: npm run build && node bench/attention-share.mjs [tokens=4096] [model=GGUF]
import { servedModelFile } from "./workload.mjs";

const args = Object.fromEntries(process.argv.slice(2).map((a) => a.split("=")));
const modelPath = args.model ?? (await servedModelFile());
// The engine's own choice of llama.cpp build (setup.ts), as every server and test makes it.
const { usableLlama } = await import("../dist/engine/llama/setup.js");
const llama = await usableLlama("auto");
const model = await llama.loadModel({ modelPath });
const N = Number(args.tokens ?? 4096);
const text = Array.from(
  { length: 400 },
  (_, i) => `Queue ${String(i).padStart(3, "0")}: Tickets routed to queue ${i}`,
).join("\n");
const all = model.tokenize(text).slice(0, N);
for (const K of [1, 4, 16, 1, 4, 16]) {
  const context = await model.createContext({
    contextSize: N + 256,
    sequences: K,
    batchSize: 512,
    flashAttention: true,
    threads: 2,
  });
  const sequences = Array.from({ length: K }, () => context.getSequence());
  const per = N / K;
  const started = performance.now();
  await Promise.all(
    sequences.map((s, i) =>
      s.evaluateWithoutGeneratingNewTokens(all.slice(i * per, (i + 1) * per)),
    ),
  );
  const ms = performance.now() - started;
  console.log(
    `${K} × ${per} tokens: ${ms.toFixed(0)} ms, ${((N / ms) * 1000).toFixed(0)} tokens/s`,
  );
  await context.dispose();
}
