// Accuracy per dataset of systems from several `decisiond eval --json FILE` runs, on the questions
// every one of them answered (item and question id), so runs of different sizes compare on the
// same rows (docs/QUALITY.md).
// Usage: node scripts/quality-shared.mjs LABEL=FILE:SYSTEM ...
//   SYSTEM: a system name of that run (`run.outcomes` keys), e.g. node-llama-cpp or ours+cal.
// @example node scripts/quality-shared.mjs tuned=bench/results/a.json:ours base=b.json:ours
import { readFileSync } from "node:fs";

const specs = process.argv.slice(2).map((arg) => {
  const match = /^([^=]+)=(.+):([^:]+)$/.exec(arg);
  if (!match) {
    console.error(`quality-shared: "${arg}" is not LABEL=FILE:SYSTEM`);
    process.exit(2);
  }
  const [, label, file, system] = match;
  const outcomes = JSON.parse(readFileSync(file, "utf8")).outcomes?.[system];
  if (!outcomes) {
    console.error(`quality-shared: ${file} has no system "${system}"`);
    process.exit(2);
  }
  return { label, byKey: new Map(outcomes.map((o) => [`${o.item}\u0000${o.question}`, o])) };
});
if (specs.length === 0) {
  console.error("usage: node scripts/quality-shared.mjs LABEL=FILE:SYSTEM ...");
  process.exit(2);
}

/** Whether the top class of an outcome is its gold class. */
const right = (o) => o.probabilities.indexOf(Math.max(...o.probabilities)) === o.gold;
const shared = [...specs[0].byKey.keys()].filter((k) => specs.every((s) => s.byKey.has(k)));
const datasets = new Map();
for (const key of shared) {
  const dataset = specs[0].byKey.get(key).dataset;
  datasets.set(dataset, [...(datasets.get(dataset) ?? []), key]);
}
const row = (name, keys) => {
  const cells = specs.map((s) => {
    const hits = keys.filter((k) => right(s.byKey.get(k))).length;
    return `${((100 * hits) / keys.length).toFixed(0)}%`;
  });
  return `| ${name} | ${keys.length} | ${cells.join(" | ")} |`;
};
console.log(`| dataset | n | ${specs.map((s) => s.label).join(" | ")} |`);
console.log(`| --- | --- | ${specs.map(() => "---").join(" | ")} |`);
console.log(row("all", shared));
for (const [dataset, keys] of [...datasets].sort()) console.log(row(dataset, keys));
