// The ECE a perfectly calibrated system would show on a run's questions: for each question type,
// the measured ECE of a system of a `decisiond eval --json FILE` run, against the ECE of the same
// probabilities when every gold label is drawn from those probabilities themselves (so they are
// calibrated by construction), over DRAWS draws. With few questions per confidence bin, sampling
// alone leaves that floor above zero (docs/decisions/072-canonical-order-and-type-temperatures.md).
// Usage: node scripts/ece-floor.mjs FILE SYSTEM [DRAWS=2000]
// Needs `npm run build` (it reads the harness's own ECE from dist/).
// @example node scripts/ece-floor.mjs bench/results/a.json "ours+cal"
import { readFileSync } from "node:fs";
import { expectedCalibrationError } from "../dist/evaluation/metrics.js";
import { mulberry32 } from "../dist/evaluation/format.js";

const [file, system, drawsArg] = process.argv.slice(2);
if (!file || !system) {
  console.error("usage: node scripts/ece-floor.mjs FILE SYSTEM [DRAWS]");
  process.exit(2);
}
const outcomes = JSON.parse(readFileSync(file, "utf8")).outcomes?.[system];
if (!outcomes) {
  console.error(`ece-floor: ${file} has no system "${system}"`);
  process.exit(2);
}
const draws = Number(drawsArg ?? 2000);
const random = mulberry32(1);

/** A class index drawn from probabilities p. */
function draw(p) {
  let u = random() * p.reduce((a, b) => a + b, 0);
  for (let i = 0; i < p.length - 1; i++) if ((u -= p[i]) < 0) return i;
  return p.length - 1;
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
console.log("type    n     measured  floor median  floor 90%  P(floor <= 0.05)");
for (const type of ["noul", "choice", "score"]) {
  const group = outcomes.filter((o) => o.type === type);
  if (group.length === 0) continue;
  const measured = expectedCalibrationError(group);
  const floors = [];
  for (let d = 0; d < draws; d++)
    floors.push(
      expectedCalibrationError(group.map((o) => ({ ...o, gold: draw(o.probabilities) }))),
    );
  floors.sort((a, b) => a - b);
  const under = floors.filter((e) => e <= 0.05).length / draws;
  console.log(
    `${type.padEnd(7)} ${String(group.length).padEnd(5)} ${measured.toFixed(3).padEnd(9)} ` +
      `${quantile(floors, 0.5).toFixed(3).padEnd(13)} ${quantile(floors, 0.9).toFixed(3).padEnd(10)} ${under.toFixed(2)}`,
  );
}
