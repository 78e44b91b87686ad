// What the decision-tuned LoRA adapter costs a request: the same requests through the same
// Decider (the tuned readout), on the base alone, on the base with its adapter applied per token
// (llama.cpp's runtime LoRA) and on the model file with the adapter added into its weights (what
// `serve` loads, src/models/merge-adapter.ts), in turns; medians and their ratios to the base.
// One run; issue 30's bar is adapter/base <= 1.10.
//
// Usage: node bench/adapter-cost.mjs [--runs N] [--adapter PATH] [--threads N] [--out FILE]
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { toDecisionRequest } from "../dist/decision/from-wire.js";
import { Decider, TUNED_READOUT } from "../dist/decision/decide.js";
import { openLlamaEngine } from "../dist/engine/llama/index.js";
import { resolveAdapter } from "../dist/models/adapters.js";
import { mergedModelFile } from "../dist/models/merge-adapter.js";
import { DEFAULT_MODEL, findModel } from "../dist/models/catalogue.js";
import { ensureModel } from "../dist/models/pull.js";
import { median } from "./stats.mjs";
import { TEAMS, wireQuestions } from "./workload.mjs";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "7" },
    adapter: { type: "string" },
    threads: { type: "string" },
    out: { type: "string" },
  },
});
const runs = Number(values.runs);
const threads = values.threads === undefined ? undefined : Number(values.threads);
const modelPath = await ensureModel(DEFAULT_MODEL, { progress: false });
const adapterPath = resolveAdapter(values.adapter, findModel(DEFAULT_MODEL));
if (!adapterPath) throw new Error("no adapter: give --adapter PATH or ship one in adapters/");

const ticket =
  "I was charged twice for my March invoice and the refund still has not arrived. Fix this today! ";
/** Workloads: [name, state, questions] in the wire shape. */
const workloads = [
  ["64-token state, 1 question, 4 options", ticket.repeat(2), wireQuestions(1, 4)],
  ["64-token state, 4 questions, 8 options", ticket.repeat(2), wireQuestions(4, 8)],
  ["512-token state, 4 questions, 8 options", ticket.repeat(16), wireQuestions(4, 8)],
];

const engines = {
  base: await openLlamaEngine({ modelPath, threads, prefixCacheBytes: 0 }),
  adapter: await openLlamaEngine({ modelPath, adapterPath, threads, prefixCacheBytes: 0 }),
  merged: await openLlamaEngine({
    modelPath: await mergedModelFile(modelPath, adapterPath),
    threads,
    prefixCacheBytes: 0,
  }),
};
const deciders = Object.fromEntries(
  Object.entries(engines).map(([k, e]) => [k, new Decider(e, { ...TUNED_READOUT })]),
);

const results = [];
for (const [name, state, questions] of workloads) {
  const times = { base: [], adapter: [], merged: [] };
  const turns = ["base", "adapter", "merged"];
  for (let r = 0; r < runs + 1; r++) {
    // Each run starts with the next system, so none is always first.
    for (const which of turns.map((_, i) => turns[(i + r) % turns.length])) {
      // A fresh state each run, so no run reuses an evaluated prefix.
      const request = toDecisionRequest({
        model: "decisiond-1.0-experimental",
        state: `Run ${r} ${which}. ${state}`,
        questions,
      });
      const t0 = performance.now();
      await deciders[which].decide(request);
      if (r > 0) times[which].push(performance.now() - t0); // run 0 warms up
    }
  }
  const row = {
    workload: name,
    baseMs: median(times.base),
    adapterMs: median(times.adapter),
    mergedMs: median(times.merged),
  };
  row.ratio = row.adapterMs / row.baseMs;
  row.mergedRatio = row.mergedMs / row.baseMs;
  results.push(row);
  console.log(
    `${name}: base ${row.baseMs.toFixed(1)} ms, adapter ${row.adapterMs.toFixed(1)} ms (${row.ratio.toFixed(3)}), merged ${row.mergedMs.toFixed(1)} ms (${row.mergedRatio.toFixed(3)})`,
  );
}
for (const e of Object.values(engines)) await e.close();
if (values.out)
  writeFileSync(
    values.out,
    JSON.stringify(
      { date: new Date().toISOString(), runs, teams: TEAMS.length, results },
      null,
      2,
    ) + "\n",
  );
