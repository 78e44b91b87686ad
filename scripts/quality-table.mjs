// Renders the docs/QUALITY.md results table from one `decisiond eval --json FILE` run.
// Usage: node scripts/quality-table.mjs bench/results/quality-<model>.json
// Each cell: accuracy / ECE / NLL, then for groups with score questions MAE and Spearman's rho,
// then the flip rate (choice) and the injection move and drop rates when the run measured them, and for
// groups with yes/no questions the AUC of P(yes) (from the run's per-question outcomes).
import { readFileSync } from "node:fs";

const file = process.argv[2];
if (!file) {
  console.error("usage: node scripts/quality-table.mjs EVAL_JSON");
  process.exit(2);
}
const run = JSON.parse(readFileSync(file, "utf8"));
const systems = run.systems.map((s) => s.name);
const pct = (x) => (x === null || x === undefined ? "n/a" : `${(100 * x).toFixed(0)}%`);
const num = (x, d = 2) => (x === null || x === undefined ? "n/a" : x.toFixed(d));

/** The group's yes/no outcomes of one system: the questions the group's name selects. */
function noulOutcomes(system, group) {
  const all = run.outcomes?.[system] ?? [];
  const [kind, value] = group.split(":");
  return all.filter(
    (o) =>
      o.type === "noul" &&
      (kind === "all" || (kind === "type" ? o.type === value : o.dataset === value)),
  );
}

/**
 * Area under the ROC curve of P(yes) against the gold answer (Mann–Whitney U / (n₊·n₋), ties
 * count half); null without both answers among the outcomes.
 */
function auc(outcomes) {
  const yes = (o) => o.probabilities[o.classes.indexOf("true")];
  const pos = outcomes.filter((o) => o.classes[o.gold] === "true").map(yes);
  const neg = outcomes.filter((o) => o.classes[o.gold] !== "true").map(yes);
  if (pos.length === 0 || neg.length === 0) return null;
  let u = 0;
  for (const p of pos) for (const q of neg) u += p > q ? 1 : p === q ? 0.5 : 0;
  return u / (pos.length * neg.length);
}

function cell(m, system, group) {
  if (!m) return "—";
  const parts = [pct(m.accuracy), num(m.ece, 3), num(m.nll)];
  if (m.mae !== null && m.mae !== undefined)
    parts.push(`MAE ${num(m.mae)}`, `ρ ${num(m.spearman)}`);
  if (m.flipN > 0) parts.push(`flip ${pct(m.flipRate)}`);
  if (m.moveN > 0) parts.push(`move ${pct(m.moveRate)}`);
  if (m.dropN > 0) parts.push(`drop ${pct(m.dropRate)}`);
  const a = auc(noulOutcomes(system, group));
  if (a !== null) parts.push(`AUC ${num(a)}`);
  return parts.join(" / ");
}

// Every group: all, per question type, per dataset (the runner leaves out a dataset group that
// holds exactly the items of a type group, e.g. sst5 = type:score).
const rows = run.groups;
const n = (g) => Math.max(...Object.values(g.metrics).map((m) => m.n));
console.log(`| dataset | n | ${systems.join(" | ")} |`);
console.log(`| --- | --- | ${systems.map(() => "---").join(" | ")} |`);
for (const g of rows)
  console.log(
    `| ${g.group.replace(/^dataset:/, "")} | ${n(g)} | ${systems.map((s) => cell(g.metrics[s], s, g.group)).join(" | ")} |`,
  );
console.log(
  `| items/s | | ${run.systems.map((s) => (s.itemsPerSecond ? s.itemsPerSecond.toFixed(2) : "—")).join(" | ")} |`,
);
