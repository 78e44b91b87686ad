import Table from "cli-table3";
import type { GroupMetrics, Metrics, SystemRun } from "./runner.js";

/** Formatting of evaluation results: a terminal table and a JSON document. */

function fixed(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : "n/a";
}

function percent(value: number): string {
  return Number.isFinite(value) ? `${(value * 100).toFixed(1)}%` : "n/a";
}

/** Column headers and the cells of one metrics row. */
export const METRIC_COLUMNS = [
  "n",
  "acc",
  "chance",
  "major.",
  "AUC",
  "macro-F1",
  "NLL",
  "Brier",
  "ECE",
  "ECE floor",
  "MAE",
  "rho",
  "flip",
  "move",
  "drop",
  "items/s",
];

export function metricCells(m: Metrics, itemsPerSecond: number): string[] {
  return [
    String(m.n),
    percent(m.accuracy),
    percent(m.chance),
    percent(m.majority),
    fixed(m.auc, 3),
    fixed(m.macroF1, 3),
    fixed(m.nll, 3),
    fixed(m.brier, 3),
    fixed(m.ece, 3),
    fixed(m.eceFloor, 3),
    fixed(m.mae, 3),
    fixed(m.spearman, 3),
    m.flipN > 0 ? percent(m.flipRate) : "n/a",
    m.moveN > 0 ? percent(m.moveRate) : "n/a",
    m.dropN > 0 ? percent(m.dropRate) : "n/a",
    fixed(itemsPerSecond, 2),
  ];
}

/** Items per second of a run's main pass. */
export function throughput(run: SystemRun): number {
  return run.seconds > 0 ? run.answeredItems / run.seconds : NaN;
}

/** The terminal table: one row per group and system. */
export function renderTable(groups: readonly GroupMetrics[], runs: readonly SystemRun[]): string {
  const table = new Table({
    head: ["group", "system", ...METRIC_COLUMNS],
    style: { head: [], border: [] },
    colAligns: ["left", "left", ...METRIC_COLUMNS.map(() => "right" as const)],
  });
  for (const group of groups)
    for (const run of runs) {
      const m = group.metrics[run.name];
      if (m) table.push([group.group, run.name, ...metricCells(m, throughput(run))]);
    }
  return table.toString();
}

/** NaN and ±Infinity as null, so the JSON stays valid and says "does not apply". */
export function finiteOrNull(_key: string, value: unknown): unknown {
  return typeof value === "number" && !Number.isFinite(value) ? null : value;
}
