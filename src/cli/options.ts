import { InvalidArgumentError, Option } from "commander";
import type { ReadoutSettings } from "../decision/decide.js";

/**
 * The option builders and value parsers the commands share. Each parser takes the text of one
 * value and throws commander's `InvalidArgumentError` (which names the flag in its message) on a
 * value that is not what the flag takes.
 */

/**
 * A whole number ≥ 1.
 * @throws {@link InvalidArgumentError} for anything else.
 * @example positiveInt("4") // → 4
 */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new InvalidArgumentError(`expected a positive integer, got "${value}"`);
  return n;
}

/**
 * A whole number of milliseconds ≥ 0.
 * @throws {@link InvalidArgumentError} for anything else.
 */
export function milliseconds(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new InvalidArgumentError(`expected milliseconds ≥ 0, got "${value}"`);
  return n;
}

/** A TCP port, 0 (any free port) to 65535. @throws {@link InvalidArgumentError} otherwise. */
export function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError(`expected a port 0-65535, got "${value}"`);
  return n;
}

/**
 * A size in bytes, with an optional B, KiB, MiB or GiB suffix (any case).
 * @throws {@link InvalidArgumentError} for anything else.
 * @example byteSize("16MiB") // → 16777216
 */
export function byteSize(value: string): number {
  const m = /^(\d+)\s*(b|kib|mib|gib)?$/i.exec(value.trim());
  if (!m) throw new InvalidArgumentError(`expected a size such as 16MiB, got "${value}"`);
  const unit = (m[2] ?? "b").toLowerCase();
  const scale = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 }[unit]!;
  return Number(m[1]) * scale;
}

/**
 * @returns a parser taking one of `allowed` and throwing {@link InvalidArgumentError} otherwise.
 * @example oneOf("on", "off")("on") // → "on"
 */
export function oneOf<T extends string>(...allowed: T[]): (value: string) => T {
  return (value) => {
    if (!(allowed as string[]).includes(value))
      throw new InvalidArgumentError(`expected one of ${allowed.join(", ")}, got "${value}"`);
    return value as T;
  };
}

/** The readout flags `serve`, `eval` and `calibrate` share (absent: the Decider's default). */
export interface ReadoutFlags {
  /** `--readout tuned`: start from the decision-tuned readout, as with an adapter. */
  readout?: "tuned" | "default";
  labels?: "words" | "fixed";
  scoreLabels?: "numbers" | "levels";
  contentFree?: "on" | "off";
  examples?: "on" | "off";
  questionContrast?: "on" | "off";
  layout?: "state-first" | "question-first";
}

/**
 * The Decider's readout settings from `--labels`, `--score-labels`, `--content-free on|off`,
 * `--examples on|off` and `--question-contrast on|off`.
 * @returns only the settings whose flag was given: an absent one must leave the Decider's
 *   default (or the tuned readout's) in place when the result is spread over it.
 * @example `readoutOf({ labels: "fixed", examples: "off" })` → `{ labels: "fixed", examples: false }`
 */
export function readoutOf(flags: ReadoutFlags): ReadoutSettings {
  const settings: ReadoutSettings = {
    labels: flags.labels,
    scoreLabels: flags.scoreLabels,
    contentFree: onOrOff(flags.contentFree),
    examples: onOrOff(flags.examples),
    questionContrast: onOrOff(flags.questionContrast),
    layout: flags.layout,
  };
  return Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== undefined));
}

function onOrOff(flag: "on" | "off" | undefined): boolean | undefined {
  return flag === undefined ? undefined : flag === "on";
}

/**
 * `--store URL` (env `DECISIOND_STORE`), shared by `serve`, `keys`, `accounts` and `usage`:
 * `sqlite:PATH` (the default file when absent) or `postgres://user@host:port/db`.
 */
export function storeOption(): Option {
  return new Option(
    "--store <url>",
    "accounts store: sqlite:PATH or postgres://user@host:port/db (default sqlite:$DECISIOND_HOME/decisiond.db)",
  ).env("DECISIOND_STORE");
}
