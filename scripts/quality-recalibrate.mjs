// A `decisiond eval --json FILE` run's uncalibrated answers with another calibration profile
// applied, by the Decider's own rule (`calibrateRun`): the `+cal` metrics that `decisiond eval
// --calibration PROFILE` would print on the same rows, without running the model again (the
// model's answers do not depend on the profile). Prints accuracy / ECE (its floor) / NLL per group:
// the floor is the ECE calibrated answers would show on as many questions (metrics.ts).
// Usage: node scripts/quality-recalibrate.mjs FILE SYSTEM PROFILE
//   SYSTEM: the uncalibrated system of that run, e.g. "ours[words][no-cf][no-examples][no-contrast]".
// Needs `npm run build` (it reads the harness from dist/).
// @example node scripts/quality-recalibrate.mjs bench/results/a.json ours profiles/m.json
import { readFileSync } from "node:fs";
import { calibrateRun, summarize } from "../dist/evaluation/runner.js";

const [file, system, profileFile] = process.argv.slice(2);
if (!file || !system || !profileFile) {
  console.error("usage: node scripts/quality-recalibrate.mjs FILE SYSTEM PROFILE");
  process.exit(2);
}
const report = JSON.parse(readFileSync(file, "utf8"));
const outcomes = report.outcomes?.[system];
if (!outcomes) {
  console.error(`quality-recalibrate: ${file} has no system "${system}"`);
  process.exit(2);
}
const profile = JSON.parse(readFileSync(profileFile, "utf8"));
const run = { name: system, outcomes, errors: [], answeredItems: 0, seconds: 0 };
const calibrated = calibrateRun(run, profile, "recalibrated");
const groups = summarize([run, calibrated]);
const cell = (m) =>
  `${(100 * m.accuracy).toFixed(0)}% / ${m.ece.toFixed(3)} (${m.eceFloor.toFixed(3)}) / ${m.nll.toFixed(2)}`;
console.log(`| group | n | ${system} | +${profileFile} |`);
console.log("| --- | --- | --- | --- |");
for (const g of groups) {
  const m = g.metrics;
  console.log(
    `| ${g.group.replace(/^dataset:/, "")} | ${m[system].n} | ${cell(m[system])} | ${cell(m.recalibrated)} |`,
  );
}
