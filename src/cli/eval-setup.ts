import cliProgress from "cli-progress";
import { InvalidArgumentError, type Command } from "commander";
import { existsSync, readFileSync } from "node:fs";
import type { CalibrationProfile } from "../decision/calibration.js";
import { TUNED_READOUT, type DebiasMode, type ReadoutSettings } from "../decision/decide.js";
import { openModelEngine } from "../service/build.js";
import type { Engine } from "../engine/types.js";
import {
  parseSplit,
  readEvalFile,
  selectSplit,
  type EvalItem,
  type Split,
} from "../evaluation/format.js";
import type { ResolvedModel } from "../evaluation/model.js";
import { loadCalibrationProfile } from "../models/bundle.js";
import { oneOf, onOff, readoutOf, trieTolerance, type ReadoutFlags } from "./options.js";

/**
 * What `eval`, `calibrate` and `render` share: their model and readout flags, how they load
 * evaluation items, open an engine, pick a calibration profile and show progress.
 */

/** Flags shared by `eval` and `calibrate`. */
export interface ModelFlags {
  model: string;
  /** `--adapter`: a GGUF LoRA adapter path, `none`, or absent for the catalogue model's. */
  adapter?: string;
  contextSize?: number;
  threads?: number;
}

/** Help of `--adapter` on `eval` and `calibrate`. */
export const ADAPTER_HELP =
  "GGUF LoRA adapter on the model, or none (default: the catalogue model's shipped adapter)";

/**
 * The readout settings of a run: the tuned readout under the flags when an adapter is applied
 * (as `serve` does) or `--readout tuned` asks for it, the flags alone otherwise.
 */
export function readoutFor(model: ResolvedModel, flags: ReadoutFlags): ReadoutSettings {
  const tuned = flags.readout ? flags.readout === "tuned" : model.adapterPath !== undefined;
  return tuned ? { ...TUNED_READOUT, ...readoutOf(flags) } : readoutOf(flags);
}

/** Repeatable option: collects values in order. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** `--split` values. */
export function splitOption(value: string): Split | "all" {
  try {
    return parseSplit(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/**
 * Adds the readout flags `eval` and `calibrate` share: `--labels words|fixed`,
 * `--score-labels numbers|levels`, `--content-free on|off`, `--examples on|off` and
 * `--question-contrast on|off` (absent: the Decider's defaults; read with {@link readoutOf}).
 */
export function readoutOptions(command: Command): Command {
  return command
    .option(
      "--readout <preset>",
      "tuned (the decision-tuned readout) or default; default: tuned with an adapter",
      oneOf<"tuned" | "default">("tuned", "default"),
    )
    .option(
      "--labels <style>",
      "choice labels: words (option ids) or fixed (letters); default: the Decider's",
      oneOf<"words" | "fixed">("words", "fixed"),
    )
    .option(
      "--score-labels <style>",
      "score labels: levels (the level texts) or numbers; default: the Decider's",
      oneOf<"numbers" | "levels">("numbers", "levels"),
    )
    .option(
      "--scale-orientation <on|off>",
      "score scales asked which way they run, a falling one asked reversed (default: on with an adapter; docs/decisions/115)",
      onOff,
    )
    .option(
      "--content-free <on|off>",
      "contextual calibration against content-free states (default: the Decider's, on)",
      onOff,
    )
    .option(
      "--examples <on|off>",
      "in-context examples before every request (default: the Decider's, on)",
      onOff,
    )
    .option(
      "--question-contrast <on|off>",
      "yes/no answers read against the state alone (default: the Decider's, on)",
      onOff,
    )
    .option(
      "--layout <layout>",
      "a one-question request's question after the state (state-first, the default) or before it (question-first); docs/decisions/087",
      oneOf<"state-first" | "question-first">("state-first", "question-first"),
    )
    .option(
      "--label-chain <reach>",
      "how far a label of several tokens is read: parting (the default) or full (docs/decisions/101)",
      oneOf<"parting" | "full">("parting", "full"),
    )
    .option(
      "--trie-tolerance <p>",
      "how much of a label trie may be left unread, relative to the labels read; 0 reads every label (default: the Decider's; docs/decisions/108)",
      trieTolerance,
    )
    .option(
      "--list-windows <on|off>",
      "a lone question's list of 2,048 tokens or more evaluated in windows (default on; docs/decisions/113)",
      onOff,
    );
}

/** Comma-separated debias modes, e.g. `off,reverse`. */
export function debiasModes(value: string): DebiasMode[] {
  const modes = value.split(",").map((m) => m.trim());
  for (const m of modes)
    if (m !== "off" && m !== "reverse" && m !== "cyclic")
      throw new InvalidArgumentError(
        `expected off, reverse or cyclic (comma-separated), got "${m}"`,
      );
  return [...new Set(modes)] as DebiasMode[];
}

/**
 * Reads the data files, keeps one split and at most `limit` items of each file.
 * @throws {@link Error} when a file is missing or malformed, or nothing is left.
 */
export function loadItems(
  files: readonly string[],
  split: Split | "all",
  limit?: number,
): EvalItem[] {
  if (files.length === 0)
    throw new InvalidArgumentError(
      "give at least one --data FILE (make one with `decisiond eval convert`)",
    );
  const items: EvalItem[] = [];
  const ids = new Set<string>();
  for (const file of files) {
    if (!existsSync(file)) throw new Error(`no such data file: ${file}`);
    const chosen = selectSplit(readEvalFile(file), split);
    for (const item of limit !== undefined ? chosen.slice(0, limit) : chosen) {
      if (ids.has(item.id))
        throw new Error(`item id "${item.id}" occurs in more than one data file`);
      ids.add(item.id);
      items.push(item);
    }
  }
  if (items.length === 0) throw new Error(`no items of split "${split}" in ${files.join(", ")}`);
  return items;
}

/** Opens our engine for a model, as `serve` does (the composition root, src/service/build.ts). */
export function openEngine(model: ResolvedModel, flags: ModelFlags): Promise<Engine> {
  return openModelEngine(model, { contextSize: flags.contextSize, threads: flags.threads });
}

/** A progress bar on stderr (a line every 10 s when stderr is not a terminal). */
export function progressBar(label: string): {
  update(done: number, total: number): void;
  stop(): void;
} {
  const bar = new cliProgress.SingleBar(
    {
      format: `${label} {bar} {percentage}% | {value}/{total} passes | {duration_formatted} elapsed, ETA {eta_formatted}`,
      stream: process.stderr,
      noTTYOutput: !process.stderr.isTTY,
      notTTYSchedule: 10_000,
      etaBuffer: 50,
      hideCursor: true,
    },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  return {
    update(done, total) {
      if (!started) {
        bar.start(total, 0);
        started = true;
      }
      bar.update(done);
    },
    stop() {
      if (started) bar.stop();
    },
  };
}

/** The profile `--calibration` names: none, the model's own (auto), or a file. */
export function chooseProfile(
  value: string,
  model: ResolvedModel,
): { profile?: CalibrationProfile; source: string } {
  if (value === "none") return { source: "none" };
  if (value === "auto") {
    const profile = loadCalibrationProfile(model.profileId, model.adapterPath ?? model.modelPath);
    return profile
      ? { profile, source: `auto (${profile.fittedOn ?? model.profileId})` }
      : { source: "auto: none found" };
  }
  if (!existsSync(value)) throw new Error(`no such calibration profile: ${value}`);
  const profile = JSON.parse(readFileSync(value, "utf8")) as CalibrationProfile;
  if (typeof profile.temperatures !== "object" || profile.temperatures === null)
    throw new Error(`${value} is not a calibration profile (no "temperatures")`);
  if (profile.model !== model.profileId)
    process.stderr.write(
      `decisiond eval: note: profile ${value} was fitted for "${profile.model}", evaluating "${model.profileId}"\n`,
    );
  return { profile, source: value };
}
