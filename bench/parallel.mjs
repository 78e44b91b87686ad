// How many KV-cache sequences should evaluate question branches side by side on this machine?
// 16 questions of 4 options on a ~512-token state, a fresh state every run, medians of 3 runs
// after a warm-up, for each --parallel value; prints the peak RSS of the process after each.
// Usage: npm run build && node bench/parallel.mjs [1,4,16]
import { readFileSync } from "node:fs";
import { Decider } from "../dist/decision/decide.js";
import { openLlamaEngine } from "../dist/engine/llama/index.js";
import { ensureModel } from "../dist/models/pull.js";
import { TEAMS } from "./workload.mjs";

const modelPath = await ensureModel("smollm2-135m-instruct");
const text =
  "The customer wrote that the parcel arrived late and the box was damaged. Their invoice listed an item they never ordered. ".repeat(
    22,
  );
const questions = Array.from({ length: 16 }, (_, i) => [
  `q${i}`,
  {
    type: "choice",
    instructions: `Which team should handle this (${i + 1})?`,
    options: TEAMS.slice(0, 4),
  },
]);
let caseNumber = 0;
for (const parallel of (process.argv[2] ?? "1,4,16").split(",").map(Number)) {
  const engine = await openLlamaEngine({
    modelPath,
    contextSize: 8192,
    parallelBranches: parallel,
  });
  const decider = new Decider(engine);
  const times = [];
  for (let run = 0; run < 4; run++) {
    const t0 = performance.now();
    await decider.decide({ state: `Case ${++caseNumber}. ${text}`, questions });
    if (run > 0) times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const rss = Number(/VmHWM:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))[1]) / 1024;
  console.log(
    `parallel ${parallel}: median ${times[1].toFixed(0)} ms (runs ${times.map((t) => t.toFixed(0)).join(", ")}), peak RSS so far ${rss.toFixed(0)} MiB`,
  );
  await engine.close();
}
process.exit(0);
