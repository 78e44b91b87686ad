import { readFileSync } from "node:fs";
import { CALIBRATED_SUFFIX, type QuestionOutcome } from "./runner.js";
import { BASELINE_SYSTEM } from "./systems.js";

/**
 * Answers saved by `decisiond eval --json`, read back: `decisiond calibrate --outcomes` fits a
 * profile on them without running the model again.
 */

/** The readout a run answered with, as a profile records it (`default` where not set). */
export interface FitReadout {
  readonly debias: string;
  readonly labels: string;
  readonly scoreLabels: string;
  readonly contentFree: string;
  readonly examples: string;
  readonly questionContrast: string;
}

/** Uncalibrated answers to fit on, and where they came from. */
export interface FitRun {
  /** The profile id of the model (and adapter) that answered. */
  readonly profileId: string;
  readonly outcomes: readonly QuestionOutcome[];
  readonly answeredItems: number;
  /** The data files (a model run) or eval reports (`--outcomes`) the answers came from. */
  readonly sources: readonly string[];
  /** The split of the items answered (the reports' splits joined by "+" when they differ). */
  readonly split: string;
  /** The readout that answered: the reports' (`--outcomes`), or a model run's flags. */
  readonly readout: FitReadout;
}

/** What `decisiond eval --json` writes, as far as fitting reads it. */
interface SavedReport {
  model?: { profileId?: unknown };
  split?: unknown;
  options?: Record<string, unknown>;
  outcomes?: Record<string, QuestionOutcome[]>;
}

/** A report option as a profile records it: a list joined by ",", unset as "default". */
function setting(value: unknown): string {
  if (value === undefined || value === null) return "default";
  const text = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));
  return Array.isArray(value) ? value.map(text).join(",") : text(value);
}

/**
 * The uncalibrated answers of `decisiond eval --json` reports: from each, the one system that is
 * neither calibrated (`+cal`) nor the node-llama-cpp baseline. An (item, question) pair already
 * taken from an earlier report is skipped: the first report wins.
 * @param files - report paths, at least one
 * @returns the answers, with the model, split and readout the reports share
 * @throws {@link Error} naming the file when it cannot be read or parsed, is not such a report,
 *   holds no or several such systems, or differs from the first report in model or readout
 * @example
 * ```ts
 * outcomesOfReports(["fit-120.json", "fit-60.json"]).outcomes.length; // → 719
 * ```
 */
export function outcomesOfReports(files: readonly string[]): FitRun {
  if (files.length === 0) throw new Error("--outcomes names no file");
  let first: { profileId: string; readout: FitReadout } | undefined;
  const seen = new Set<string>();
  const splits = new Set<string>();
  const outcomes: QuestionOutcome[] = [];
  for (const file of files) {
    let report: SavedReport;
    try {
      report = JSON.parse(readFileSync(file, "utf8")) as SavedReport;
    } catch (error) {
      throw new Error(`${file}: ${(error as Error).message}`);
    }
    const profileId = report.model?.profileId;
    if (
      typeof profileId !== "string" ||
      typeof report.split !== "string" ||
      typeof report.outcomes !== "object" ||
      report.outcomes === null
    )
      throw new Error(
        `${file} is not a \`decisiond eval --json\` report (no model.profileId, split or outcomes)`,
      );
    const options = report.options ?? {};
    const readout: FitReadout = {
      debias: setting(options.debias),
      labels: setting(options.labels),
      scoreLabels: setting(options.scoreLabels),
      contentFree: setting(options.contentFree),
      examples: setting(options.examples),
      questionContrast: setting(options.questionContrast),
    };
    if (first && profileId !== first.profileId)
      throw new Error(
        `${file} was answered by ${profileId}, ${files[0]} by ${first.profileId}: fit one model at a time`,
      );
    if (first && JSON.stringify(readout) !== JSON.stringify(first.readout))
      throw new Error(
        `${file} was answered with readout ${JSON.stringify(readout)}, ${files[0]} with ${JSON.stringify(first.readout)}: fit one readout at a time`,
      );
    first ??= { profileId, readout };
    splits.add(report.split);
    const names = Object.keys(report.outcomes).filter(
      (name) => !name.endsWith(CALIBRATED_SUFFIX) && name !== BASELINE_SYSTEM,
    );
    if (names.length !== 1)
      throw new Error(
        `${file} holds ${names.length === 0 ? "no" : "several"} uncalibrated systems of ours (${Object.keys(report.outcomes).join(", ")}); fitting needs exactly one`,
      );
    for (const o of report.outcomes[names[0]!]!) {
      const key = `${o.item}\u0000${o.question}`;
      if (seen.has(key)) continue;
      seen.add(key);
      outcomes.push(o);
    }
  }
  return {
    profileId: first!.profileId,
    outcomes,
    answeredItems: new Set(outcomes.map((o) => o.item)).size,
    sources: files,
    split: [...splits].join("+"),
    readout: first!.readout,
  };
}
