import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DATASETS } from "../src/evaluation/datasets.js";

/**
 * The GPU plans (`training/plans/*.json`, read by training/gpu_runs.py) are spent on a device lent
 * for 15 minutes, where a mistake costs the session: a misspelt dataset in `exclude` silently
 * trains a leave-group-out run on the group it should leave out, and a start adapter that is
 * neither in the repository nor carried stops the run on the device.
 */
const PLANS = join(import.meta.dirname, "..", "training", "plans");
const KNOWN = new Set(DATASETS.map((d) => d.name));

interface PlannedRun {
  name: string;
  exclude: string[];
  init: string | null;
  lr: number;
  args?: string;
}

describe.each(readdirSync(PLANS).filter((f) => f.endsWith(".json")))(
  "training/plans/%s",
  (file) => {
    const plan = JSON.parse(readFileSync(join(PLANS, file), "utf8")) as PlannedRun[];

    it("names each run once, with a positive learning rate", () => {
      expect(plan.length).toBeGreaterThan(0);
      expect(new Set(plan.map((r) => r.name)).size).toBe(plan.length);
      for (const run of plan) expect(run.lr, run.name).toBeGreaterThan(0);
    });

    it("leaves out only datasets the mix has", () => {
      for (const run of plan)
        for (const dataset of run.exclude)
          expect(KNOWN.has(dataset), `${run.name}: ${dataset}`).toBe(true);
    });

    it("starts from the base, a shipped adapter or one the second call carries", () => {
      for (const run of plan)
        if (run.init !== null)
          expect(run.init, run.name).toMatch(/^(adapters\/[^/]+|\.gpu-carry\/run\/[^/]+)\.gguf$/);
    });
  },
);
