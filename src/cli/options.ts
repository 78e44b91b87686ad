import { InvalidArgumentError, Option } from "commander";
import { DEFAULT_TRIE_TOLERANCE, type ReadoutSettings } from "../decision/decide.js";

/**
 * The option builders and value parsers the commands share. Each parser takes the text of one
 * value and throws commander's `InvalidArgumentError` (which names the flag in its message) on a
 * value that is not what the flag takes.
 */

/**
 * The value of a whole-number flag: decimal digits only (`1e3`, `0x10`, `4.0` and `+4` are not
 * whole numbers as an operator writes them), as a safe integer.
 * @returns the number, or undefined when `value` is not such a number
 */
export function digits(value: string): number | undefined {
  if (!/^\s*\d+\s*$/.test(value)) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * A whole number ≥ 1, in decimal digits.
 * @throws {@link InvalidArgumentError} for anything else.
 * @example positiveInt("4") // → 4
 */
export function positiveInt(value: string): number {
  const n = digits(value);
  if (n === undefined || n <= 0)
    throw new InvalidArgumentError(`expected a positive integer in digits, got "${value}"`);
  return n;
}

/** The longest timer Node keeps: a longer one fires at once (`TimeoutOverflowWarning`). */
export const LONGEST_TIMER_MS = 2 ** 31 - 1;

/**
 * A whole number of milliseconds from 0 to {@link LONGEST_TIMER_MS} (24.8 days).
 * @throws {@link InvalidArgumentError} for anything else.
 * @example milliseconds("30000") // → 30000
 */
export function milliseconds(value: string): number {
  return millisecondsFrom(0)(value);
}

/**
 * @returns a parser of whole milliseconds from `least` to {@link LONGEST_TIMER_MS}, throwing
 *   {@link InvalidArgumentError} (with `why`, when given, after the range) for anything else
 * @example millisecondsFrom(1)("0") // throws: expected milliseconds from 1 to 2147483647 …
 */
export function millisecondsFrom(least: number, why?: string): (value: string) => number {
  return (value) => {
    const n = digits(value);
    if (n === undefined || n < least || n > LONGEST_TIMER_MS)
      throw new InvalidArgumentError(
        `expected milliseconds in digits, from ${least} to ${LONGEST_TIMER_MS} (24.8 days, the longest ` +
          `timer Node keeps)${why ? `; ${why}` : ""}, got "${value}"`,
      );
    return n;
  };
}

/**
 * A label trie's tolerance (`DeciderOptions.trieTolerance`): a number from 0 up to (not
 * including) 1; 0 reads every label.
 * @throws {@link InvalidArgumentError} for anything else.
 * @example trieTolerance("0.002") // → 0.002
 */
export function trieTolerance(value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0 || n >= 1)
    throw new InvalidArgumentError(
      `expected a number from 0 (read every label) up to 1, got "${value}"`,
    );
  return n;
}

/** A TCP port, 0 (any free port) to 65535. @throws {@link InvalidArgumentError} otherwise. */
export function port(value: string): number {
  const n = digits(value);
  if (n === undefined || n > 65535)
    throw new InvalidArgumentError(`expected a port 0-65535 in digits, got "${value}"`);
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
  const bytes = Number(m[1]) * scale;
  if (!Number.isSafeInteger(bytes))
    throw new InvalidArgumentError(`expected a size such as 16MiB, got "${value}"`);
  return bytes;
}

/**
 * A size in bytes ({@link byteSize}) of at least one byte.
 * @throws {@link InvalidArgumentError} for anything else.
 * @example positiveByteSize("16MiB") // → 16777216
 */
export function positiveByteSize(value: string): number {
  const bytes = byteSize(value);
  if (bytes === 0)
    throw new InvalidArgumentError(`expected a size of at least 1 byte, got "${value}"`);
  return bytes;
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

/** Parses an `on|off` flag: `"on"` or `"off"`, else {@link InvalidArgumentError}. */
export const onOff: (value: string) => "on" | "off" = oneOf("on", "off");

/** The readout flags `serve`, `eval` and `calibrate` share (absent: the Decider's default). */
export interface ReadoutFlags {
  /** `--readout tuned`: start from the decision-tuned readout, as with an adapter. */
  readout?: "tuned" | "default";
  labels?: "words" | "fixed";
  scoreLabels?: "numbers" | "levels";
  scaleOrientation?: "on" | "off";
  contentFree?: "on" | "off";
  examples?: "on" | "off";
  questionContrast?: "on" | "off";
  layout?: "state-first" | "question-first";
  labelChain?: "parting" | "full";
  trieTolerance?: number;
  listWindows?: "on" | "off";
}

/**
 * The Decider's readout settings from `--labels`, `--score-labels`, `--scale-orientation on|off`,
 * `--content-free on|off`,
 * `--examples on|off`, `--question-contrast on|off`, `--layout`, `--label-chain`,
 * `--trie-tolerance` and `--list-windows on|off`.
 * @returns only the settings whose flag was given: an absent one must leave the Decider's
 *   default (or the tuned readout's) in place when the result is spread over it.
 * @example `readoutOf({ labels: "fixed", examples: "off" })` → `{ labels: "fixed", examples: false }`
 */
export function readoutOf(flags: ReadoutFlags): ReadoutSettings {
  const settings: ReadoutSettings = {
    labels: flags.labels,
    scoreLabels: flags.scoreLabels,
    scaleOrientation: onOrOff(flags.scaleOrientation),
    contentFree: onOrOff(flags.contentFree),
    examples: onOrOff(flags.examples),
    questionContrast: onOrOff(flags.questionContrast),
    layout: flags.layout,
    labelChain: flags.labelChain,
    trieTolerance: flags.trieTolerance,
    listWindows: onOrOff(flags.listWindows),
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
  )
    .env("DECISIOND_STORE")
    .argParser(nonEmpty);
}

/**
 * A `serve` option read from `--flag`, else from the variable `env`, else its default.
 * @param parse - the value's parser, for the flag and the variable alike (an empty variable is a
 *   value, checked as any other); default {@link nonEmpty}
 */
export function envOption<T>(
  flags: string,
  description: string,
  env: string,
  parse: (value: string) => T | string = nonEmpty,
): Option {
  return new Option(flags, description).env(env).argParser(parse);
}

/**
 * Parses a text value that may not be empty: an empty variable (`DECISIOND_HOST=`) would
 * otherwise pass for a setting (an empty host binds every interface).
 * @throws InvalidArgumentError for an empty or blank value
 */
export function nonEmpty(value: string): string {
  if (value.trim() === "")
    throw new InvalidArgumentError("it is empty: give a value, or leave it unset");
  return value;
}

/**
 * The readout options of `decisiond serve` ({@link ReadoutFlags}), each with its `DECISIOND_*`
 * variable; absent, the served readout's own setting holds (the tuned readout's with an adapter).
 * @example for (const option of readoutServeOptions()) command.addOption(option);
 */
export function readoutServeOptions(): Option[] {
  return [
    envOption(
      "--labels <style>",
      "choice labels: words (option ids after an Answer: cue) or fixed (letters) (default words)",
      "DECISIOND_LABELS",
      oneOf<"words" | "fixed">("words", "fixed"),
    ),
    envOption(
      "--score-labels <style>",
      "score labels: levels (the level texts after an Answer: cue) or numbers (default numbers)",
      "DECISIOND_SCORE_LABELS",
      oneOf<"numbers" | "levels">("numbers", "levels"),
    ),
    envOption(
      "--scale-orientation <on|off>",
      "score scales answered with level numbers asked which way they run, once per question, and a falling one asked reversed (default on with an adapter; docs/decisions/115)",
      "DECISIOND_SCALE_ORIENTATION",
      onOff,
    ),
    envOption(
      "--content-free <on|off>",
      "contextual calibration against content-free states (default on)",
      "DECISIOND_CONTENT_FREE",
      onOff,
    ),
    envOption(
      "--examples <on|off>",
      "in-context examples before every request (default on)",
      "DECISIOND_EXAMPLES",
      onOff,
    ),
    envOption(
      "--question-contrast <on|off>",
      "yes/no answers read against the state alone (default on)",
      "DECISIOND_QUESTION_CONTRAST",
      onOff,
    ),
    envOption(
      "--layout <layout>",
      "where a one-question request's question is written: state-first (default) or question-first, before the state, so one question asked of many states comes from the prefix cache (docs/decisions/087)",
      "DECISIOND_LAYOUT",
      oneOf<"state-first" | "question-first">("state-first", "question-first"),
    ),
    envOption(
      "--label-chain <reach>",
      "how far a label of several tokens is read: parting (default), to the token where it parts from the others, or full, to its end (docs/decisions/101)",
      "DECISIOND_LABEL_CHAIN",
      oneOf<"parting" | "full">("parting", "full"),
    ),
    envOption(
      "--trie-tolerance <p>",
      `how much of a choice's label trie may be left unread: subtrees whose probability is at most p times that of the labels read share what is left equally; 0 reads every label (default ${DEFAULT_TRIE_TOLERANCE}; docs/decisions/108)`,
      "DECISIOND_TRIE_TOLERANCE",
      trieTolerance,
    ),
    envOption(
      "--list-windows <on|off>",
      "a lone question's list of 2,048 tokens or more (hundreds of described options) evaluated in windows of about 512 tokens, each seeing the state and itself: about half the time on a CPU (default on; docs/decisions/113)",
      "DECISIOND_LIST_WINDOWS",
      onOff,
    ),
  ];
}
