// Compares models from their `decisiond eval --json FILE` runs (docs/QUALITY.md, "Models"): per
// file and system, accuracy against the chance rate (mean 1/k over the questions), mean NLL, and
// the information gain ln k − NLL averaged over questions (0: no better than a uniform guess).
// Usage: node scripts/quality-compare.mjs bench/results/quality-<model>.json ... [--system ours+cal]
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  options: { system: { type: "string", default: "ours+cal" } },
  allowPositionals: true,
});
if (positionals.length === 0) {
  console.error("usage: node scripts/quality-compare.mjs EVAL_JSON... [--system NAME]");
  process.exit(2);
}
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
for (const file of positionals) {
  const run = JSON.parse(readFileSync(file, "utf8"));
  const outcomes = run.outcomes[values.system];
  // Accuracy and NLL as the run computed them (src/evaluation/metrics.ts), over all questions.
  const all = run.groups.find((g) => g.group === "all")?.metrics[values.system];
  if (!outcomes || !all) throw new Error(`${file} has no system ${values.system}`);
  const meanLnK = mean(outcomes.map((o) => Math.log(o.classes.length)));
  const chance = mean(outcomes.map((o) => 1 / o.classes.length));
  const gain = meanLnK - all.nll;
  const ips = run.systems.find((s) => s.name === values.system)?.itemsPerSecond;
  console.log(
    `${run.model?.modelId ?? file} (${values.system}, n ${all.n}): accuracy ${(100 * all.accuracy).toFixed(1)}% ` +
      `(chance ${(100 * chance).toFixed(1)}%), NLL ${all.nll.toFixed(3)}, ` +
      `information gain ${gain >= 0 ? "+" : ""}${gain.toFixed(4)} nats per question, ${ips?.toFixed(2)} items/s in that run`,
  );
}
