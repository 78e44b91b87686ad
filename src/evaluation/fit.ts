import { calibrationKey, fallbackKey, type CalibrationProfile } from "../decision/calibration.js";
import { expectedCalibrationError } from "./metrics.js";
import type { QuestionOutcome } from "./runner.js";
import {
  applyTemperature,
  fitTemperature,
  safeLog,
  type TemperatureSample,
} from "./temperature.js";

/**
 * Fitting a calibration profile from uncalibrated outcomes: one temperature per
 * `calibrationKey(type, option count)`, and one per `fallbackKey(type)` over all of the type's
 * questions, each by minimising NLL over that key's questions.
 */

/** What was fitted for one profile key. */
export interface KeyFit {
  readonly key: string;
  /** Questions of this key in the fit data. */
  readonly n: number;
  /** undefined when there were fewer than `minQuestions` (the key is left out of the profile). */
  readonly temperature?: number;
  readonly nllBefore: number;
  readonly nllAfter: number;
  readonly eceBefore: number;
  readonly eceAfter: number;
  readonly atBound: boolean;
}

/** A profile as `decisiond calibrate` writes it: the served fields plus how it was fitted. */
export interface FittedProfile extends CalibrationProfile {
  readonly fit: {
    readonly data: readonly string[];
    readonly split: string;
    readonly debias: string;
    readonly labels: string;
    /** Score label setting the profile was fitted with (`numbers`, `levels` or `default`). */
    readonly scoreLabels?: string;
    /** Contextual calibration setting the profile was fitted with (`on`, `off` or `default`). */
    readonly contentFree?: string;
    /** In-context examples setting the profile was fitted with (`on`, `off` or `default`). */
    readonly examples?: string;
    /** Question-contrast setting the profile was fitted with (`on`, `off` or `default`). */
    readonly questionContrast?: string;
    readonly items: number;
    readonly questions: number;
    readonly datasets: Readonly<Record<string, number>>;
    readonly keys: readonly KeyFit[];
    readonly minQuestions: number;
    readonly date: string;
    readonly command: string;
    readonly method: string;
  };
}

/** The samples of outcomes: ln p of each class (the normalised label log-probabilities at T = 1). */
export function samplesOf(outcomes: readonly QuestionOutcome[]): TemperatureSample[] {
  return outcomes.map((o) => ({ logprobs: o.probabilities.map(safeLog), label: o.gold }));
}

/**
 * Fits every bucket key present in the outcomes and the fallback key of every type present;
 * keys with fewer than `minQuestions` get no temperature.
 * @returns the fits, sorted by key
 */
export function fitKeys(outcomes: readonly QuestionOutcome[], minQuestions: number): KeyFit[] {
  const byKey = new Map<string, QuestionOutcome[]>();
  for (const o of outcomes)
    for (const key of [calibrationKey(o.type, o.classes.length), fallbackKey(o.type)])
      byKey.set(key, [...(byKey.get(key) ?? []), o]);
  return [...byKey.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, group]) => {
      const samples = samplesOf(group);
      const fit = fitTemperature(samples);
      const ece = (t: number) =>
        expectedCalibrationError(
          group.map((o) => ({
            classes: o.classes,
            probabilities: applyTemperature(o.probabilities, t),
            gold: o.gold,
          })),
        );
      const enough = group.length >= minQuestions;
      return {
        key,
        n: group.length,
        ...(enough ? { temperature: round(fit.temperature) } : {}),
        nllBefore: fit.nllBefore,
        nllAfter: enough ? fit.nllAfter : fit.nllBefore,
        eceBefore: ece(1),
        eceAfter: enough ? ece(fit.temperature) : ece(1),
        atBound: fit.atBound,
      };
    });
}

/** Six significant digits: enough for a temperature, short in the file. */
function round(t: number): number {
  return Number(t.toPrecision(6));
}

/** The temperatures of fitted keys as a profile's `temperatures`. */
export function temperaturesOf(keys: readonly KeyFit[]): Record<string, number> {
  return Object.fromEntries(
    keys.filter((k) => k.temperature !== undefined).map((k) => [k.key, k.temperature!]),
  );
}

/** Golden-section description written into profiles. */
export const FIT_METHOD =
  "temperature scaling: per calibrationKey(type, option-count bucket) and per type (the fallback of buckets with no key), " +
  "T minimising mean NLL of softmax(ln p / T) " +
  "over the fit split, golden-section search on ln T in [ln 0.05, ln 20]";
