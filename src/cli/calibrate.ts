import Table from "cli-table3";
import { Option, type Command } from "commander";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { DebiasMode } from "../decision/decide.js";
import { oneOf, positiveInt, type ReadoutFlags } from "./options.js";
import {
  collect,
  loadItems,
  openEngine,
  readoutFor,
  ADAPTER_HELP,
  progressBar,
  splitOption,
  type ModelFlags,
  readoutOptions,
} from "./eval-setup.js";
import { FIT_METHOD, fitKeys, temperaturesOf, type FittedProfile } from "../evaluation/fit.js";
import { datasetOf, type Split } from "../evaluation/format.js";
import { resolveModel } from "../evaluation/model.js";
import { runEvaluation } from "../evaluation/runner.js";
import { outcomesOfReports, type FitRun } from "../evaluation/saved-run.js";
import { oursSystem } from "../evaluation/systems.js";
import { DEFAULT_MODEL } from "../models/catalogue.js";

interface CalibrateFlags extends ModelFlags, ReadoutFlags {
  data?: string[];
  limit?: number;
  split: Split | "all";
  debias: DebiasMode;
  out?: string;
  minQuestions: number;
  outcomes?: string[];
}

/** The split, after warning on stderr when it is not the fit split. */
function warnSplit<S extends string>(split: S): S {
  if (split !== "fit")
    process.stderr.write(
      `decisiond calibrate: warning: fitting on split "${split}"; test-split numbers measured with this profile are not held out\n`,
    );
  return split;
}

/** Runs the model on the fit items without calibration and returns its answers. */
async function outcomesOfModel(flags: CalibrateFlags): Promise<FitRun> {
  const items = loadItems(flags.data ?? [], flags.split, flags.limit);
  const model = await resolveModel(flags.model, true, flags.adapter);
  process.stderr.write(
    `decisiond calibrate: ${items.length} items (split ${flags.split}) on ${model.modelId}, debias ${flags.debias}\n`,
  );
  const engine = await openEngine(model, flags);
  const bar = progressBar("calibrate");
  let run;
  try {
    [run] = await runEvaluation(
      items,
      [oursSystem(engine, flags.debias, readoutFor(model, flags))],
      {
        flip: false,
        onProgress: (done, total) => bar.update(done, total),
      },
    );
  } finally {
    bar.stop();
    await engine.close();
  }
  if (!run) throw new Error("the evaluation returned no run");
  if (run.errors.length > 0)
    process.stderr.write(
      `decisiond calibrate: ${run.errors.length} item(s) not answered, e.g. ${run.errors[0]!.item}: ${run.errors[0]!.message}\n`,
    );
  return {
    profileId: model.profileId,
    outcomes: run.outcomes,
    answeredItems: run.answeredItems,
    sources: flags.data ?? [],
    split: flags.split,
    readout: {
      debias: flags.debias,
      labels: flags.labels ?? "default",
      scoreLabels: flags.scoreLabels ?? "default",
      contentFree: flags.contentFree ?? "default",
      examples: flags.examples ?? "default",
      questionContrast: flags.questionContrast ?? "default",
    },
  };
}

/** `profiles/<model id>.json` in the package, where `serve` looks for a model's profile. */
export function defaultProfilePath(modelId: string): string {
  return join(dirname(fileURLToPath(import.meta.url)), "..", "..", "profiles", `${modelId}.json`);
}

function fixed(value: number, digits = 3): string {
  return Number.isFinite(value) ? value.toFixed(digits) : "n/a";
}

/** Flags that `--outcomes` replaces: the reports say which model, rows and readout answered. */
const REPORT_DECIDES = [
  "data",
  "limit",
  "split",
  "model",
  "adapter",
  "contextSize",
  "threads",
  "debias",
  "readout",
  "labels",
  "scoreLabels",
  "contentFree",
  "examples",
  "questionContrast",
];

/**
 * Adds `calibrate`: evaluates the fit split without calibration (or reads the answers of saved
 * eval runs, `--outcomes`), fits one temperature per (question type, option-count bucket) and one
 * per question type by minimising NLL, and writes the profile `serve` loads.
 */
export function registerCalibrateCommand(program: Command): Command {
  return readoutOptions(program.command("calibrate"))
    .description(
      "fit the temperatures of a model's calibration profile on labeled data (fit split) or on saved eval answers",
    )
    .option("--data <file>", "evaluation JSONL (repeatable; see `decisiond eval convert`)", collect)
    .option("--limit <n>", "at most n items of each data file (after --split)", positiveInt)
    .option(
      "--split <part>",
      "rows to fit on: fit (default; alias train), test or all",
      splitOption,
      "fit",
    )
    .option("--model <name|path>", "catalogue model name or path to a GGUF file", DEFAULT_MODEL)
    .option("--adapter <path|none>", ADAPTER_HELP)
    .option("--context-size <tokens>", "tokens per request", positiveInt)
    .option("--threads <n>", "CPU threads (default: physical cores)", positiveInt)
    .option(
      "--debias <mode>",
      "debiasing the profile will be served with: off, reverse or cyclic",
      oneOf<DebiasMode>("off", "reverse", "cyclic"),
      "off",
    )
    .option("--min-questions <n>", "fit a key only with at least n questions", positiveInt, 30)
    .option("--out <file>", "profile to write (default: profiles/<model id>.json in the package)")
    .addOption(
      new Option(
        "--outcomes <file>",
        "fit on the uncalibrated answers saved by `decisiond eval --json` instead of running the model (repeatable; the first report holding an item's question wins); model, data and readout come from the reports",
      )
        .argParser(collect)
        .conflicts(REPORT_DECIDES),
    )
    .action(async (flags: CalibrateFlags) => {
      const command = `decisiond ${process.argv.slice(2).join(" ")}`;
      const run = flags.outcomes
        ? outcomesOfReports(flags.outcomes)
        : await outcomesOfModel({ ...flags, split: warnSplit(flags.split) });
      if (flags.outcomes) warnSplit(run.split);
      const { readout } = run;
      if (run.outcomes.length === 0) throw new Error("no item could be answered; nothing to fit");
      const keys = fitKeys(run.outcomes, flags.minQuestions);
      const datasets: Record<string, number> = {};
      for (const o of run.outcomes)
        datasets[datasetOf(o.item)] = (datasets[datasetOf(o.item)] ?? 0) + 1;
      const date = new Date().toISOString();
      const profile: FittedProfile = {
        model: run.profileId,
        temperatures: temperaturesOf(keys),
        fittedOn:
          `${run.sources.join(", ")} (split ${run.split}, ${run.answeredItems} items: ` +
          `${Object.entries(datasets)
            .map(([d, n]) => `${d} ${n}`)
            .join(
              ", ",
            )}; debias ${readout.debias}, labels ${readout.labels}) on ${date}: ${command}`,
        fit: {
          data: run.sources,
          split: run.split,
          ...readout,
          items: run.answeredItems,
          questions: run.outcomes.length,
          datasets,
          keys,
          minQuestions: flags.minQuestions,
          date,
          command,
          method: FIT_METHOD,
        },
      };
      const out = resolve(flags.out ?? defaultProfilePath(run.profileId));
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(
        out,
        JSON.stringify(
          profile,
          (_k, v: unknown) => (typeof v === "number" && !Number.isFinite(v) ? null : v),
          2,
        ) + "\n",
      );

      const table = new Table({
        head: ["key", "questions", "T", "NLL before", "NLL after", "ECE before", "ECE after"],
        style: { head: [], border: [] },
      });
      for (const k of keys)
        table.push([
          k.key,
          String(k.n),
          k.temperature === undefined
            ? `(n < ${flags.minQuestions})`
            : `${fixed(k.temperature)}${k.atBound ? " (bound)" : ""}`,
          fixed(k.nllBefore),
          fixed(k.nllAfter),
          fixed(k.eceBefore),
          fixed(k.eceAfter),
        ]);
      process.stdout.write(table.toString() + "\n");
      process.stderr.write(`decisiond calibrate: wrote ${out}\n`);
    });
}
