// The transfer table of docs/QUALITY.md (issue 48): per left-out dataset of each task group, the
// accuracy of every system beside chance and the majority-class rate of the same rows, with the
// AUC of P(yes) for yes/no questions and Spearman's ρ for ordered scales. Systems come from
// `decisiond eval --json` runs over the groups' test rows; only the questions every run answered
// are compared. Metrics from the per-question outcomes (src/evaluation/metrics.ts); the last row is
// the macro accuracy (each dataset counted once).
//
// Usage: npm run build && node scripts/transfer-table.mjs NAME=RUN.json[#SYSTEM] ...
//   e.g. base=transfer-base.json today=transfer-today.json new=transfer-new.json
//   SYSTEM defaults to the run's first (uncalibrated) system.
import { readFileSync } from "node:fs";
import { TASK_GROUPS } from "../dist/evaluation/groups.js";
import {
  accuracy,
  chanceAccuracy,
  majorityAccuracy,
  rocAuc,
  spearman,
} from "../dist/evaluation/metrics.js";

const systems = process.argv.slice(2).map((arg) => {
  const [name, rest] = arg.split("=");
  const [file, system] = rest.split("#");
  const run = JSON.parse(readFileSync(file, "utf8"));
  const outcomes = run.outcomes[system ?? run.systems[0].name];
  return { name, byKey: new Map(outcomes.map((o) => [`${o.item}\u0000${o.question}`, o])) };
});
if (systems.length === 0) {
  console.error("usage: node scripts/transfer-table.mjs NAME=RUN.json[#SYSTEM] ...");
  process.exit(2);
}
const common = [...systems[0].byKey.keys()].filter((k) => systems.every((s) => s.byKey.has(k)));
const pct = (x) => (Number.isFinite(x) ? `${(100 * x).toFixed(0)}%` : "n/a");
const num = (x) => (Number.isFinite(x) ? x.toFixed(2) : "n/a");

/** The metric cell of one system on some outcomes: accuracy, then AUC or ρ where they fit. */
function cell(outcomes) {
  const acc = pct(accuracy(outcomes));
  const type = outcomes[0]?.type;
  if (type === "noul")
    return `${acc} / AUC ${num(
      rocAuc(
        outcomes.map((o) => o.probabilities[o.classes.indexOf("true")]),
        outcomes.map((o) => o.classes[o.gold] === "true"),
      ),
    )}`;
  if (type === "score")
    return `${acc} / ρ ${num(
      spearman(
        outcomes.map((o) => o.probabilities.reduce((s, p, i) => s + i * p, 0)),
        outcomes.map((o) => o.gold),
      ),
    )}`;
  return acc;
}

const head = ["group", "dataset", "type", "n", "chance", "majority", ...systems.map((s) => s.name)];
console.log(`| ${head.join(" | ")} |`);
console.log(`| ${head.map(() => "---").join(" | ")} |`);
/** Per system (after chance and majority), the accuracy on each dataset, for the macro row. */
const perDataset = [];
for (const [group, datasets] of Object.entries(TASK_GROUPS))
  for (const name of datasets) {
    const dataset = name === "sick-entailment" ? "sick#entailment" : name;
    const keys = common.filter((k) => systems[0].byKey.get(k).dataset === dataset);
    if (keys.length === 0) continue;
    const first = keys.map((k) => systems[0].byKey.get(k));
    const row = [
      group,
      name,
      first[0].type,
      keys.length,
      pct(chanceAccuracy(first)),
      pct(majorityAccuracy(first)),
    ];
    for (const s of systems) row.push(cell(keys.map((k) => s.byKey.get(k))));
    console.log(`| ${row.join(" | ")} |`);
    perDataset.push([
      chanceAccuracy(first),
      majorityAccuracy(first),
      ...systems.map((s) => accuracy(keys.map((k) => s.byKey.get(k)))),
    ]);
  }
// Macro accuracy: the mean over datasets, each dataset counting once whatever its rows.
const macro = perDataset[0]?.map(
  (_, i) => perDataset.reduce((sum, r) => sum + r[i], 0) / perDataset.length,
);
if (macro)
  console.log(
    `| macro | ${perDataset.length} datasets | | | ${macro.map((x) => `${(100 * x).toFixed(1)}%`).join(" | ")} |`,
  );
