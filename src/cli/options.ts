import { InvalidArgumentError } from "commander";
import type { ReadoutSettings } from "../decision/decide.js";

/**
 * Parsers for command-line values, each naming the flag in its error.
 * @throws {InvalidArgumentError} on a value that is not what the flag takes.
 */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new InvalidArgumentError(`expected a positive integer, got "${value}"`);
  return n;
}

/** A TCP port, 0 (any free port) to 65535. */
export function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError(`expected a port 0-65535, got "${value}"`);
  return n;
}

/** A size in bytes, with an optional KiB/MiB/GiB suffix (e.g. "16MiB"). */
export function byteSize(value: string): number {
  const m = /^(\d+)\s*(b|kib|mib|gib)?$/i.exec(value.trim());
  if (!m) throw new InvalidArgumentError(`expected a size such as 16MiB, got "${value}"`);
  const unit = (m[2] ?? "b").toLowerCase();
  const scale = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 }[unit]!;
  return Number(m[1]) * scale;
}

/** One of a fixed set of words. */
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
  contentFree?: "on" | "off";
  examples?: "on" | "off";
  questionContrast?: "on" | "off";
}

/**
 * The Decider's readout settings from `--labels`, `--content-free on|off`, `--examples on|off`
 * and `--question-contrast on|off`; a flag that is absent leaves the Decider's default.
 */
export function readoutOf(flags: ReadoutFlags): ReadoutSettings {
  return {
    ...(flags.labels ? { labels: flags.labels } : {}),
    ...(flags.contentFree ? { contentFree: flags.contentFree === "on" } : {}),
    ...(flags.examples ? { examples: flags.examples === "on" } : {}),
    ...(flags.questionContrast ? { questionContrast: flags.questionContrast === "on" } : {}),
  };
}
