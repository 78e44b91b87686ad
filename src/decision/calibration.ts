import { builtinType, type AnyQuestionType } from "./questions/index.js";
import type { QuestionTypeName } from "./types.js";

/**
 * Temperature calibration (Guo et al. 2017, "On Calibration of Modern Neural Networks"): one
 * temperature T per (question type, option-count bucket), applied as pᵢ ∝ exp(log pᵢ / T) over a
 * question's labels, with one temperature per question type for the buckets the fit data did not
 * cover. A profile belongs to one model file.
 */
export interface CalibrationProfile {
  /** The model id the profile was fitted for. */
  readonly model: string;
  /**
   * Key `${type}:${bucket}` (see {@link calibrationKey}) → temperature T \> 0; key `${type}`
   * (see {@link fallbackKey}) → the temperature of that type's questions in buckets with no key.
   */
  readonly temperatures: Readonly<Record<string, number>>;
  /** Free-form provenance: data, split, date, command. */
  readonly fittedOn?: string;
}

/** A question type as calibration sees it: its name and its option-count buckets. */
export type CalibratedType = Pick<AnyQuestionType, "name" | "bucket">;

/**
 * Option-count bucket of a question, its type's (questions/*.ts `bucket`): noul "2"; choice "2",
 * "3-4", "5-8", "9-16", "17+"; score "2-3", "4-5", "6-10". Buckets keep enough fitting data per
 * temperature while separating regimes whose over-confidence differs.
 * @param type - a built-in type's name, or a question type's module
 */
export function optionCountBucket(type: QuestionTypeName | CalibratedType, n: number): string {
  return calibrated(type).bucket(n);
}

/** Profile key of a question type and option count. */
export function calibrationKey(type: QuestionTypeName | CalibratedType, n: number): string {
  return `${calibrated(type).name}:${optionCountBucket(type, n)}`;
}

/** Profile key of a question type's fallback temperature, fitted on all its questions. */
export function fallbackKey(type: QuestionTypeName | CalibratedType): string {
  return calibrated(type).name;
}

/**
 * The temperature a profile gives a question: its bucket's, else its type's fallback, else 1 (no
 * change).
 * @example
 * ```ts
 * temperatureFor({ model: "m", temperatures: { "choice:3-4": 1.9, choice: 1.7 } }, "choice", 6); // → 1.7
 * ```
 */
export function temperatureFor(
  profile: CalibrationProfile | undefined,
  type: QuestionTypeName | CalibratedType,
  n: number,
): number {
  for (const key of [calibrationKey(type, n), fallbackKey(type)]) {
    const t = profile?.temperatures[key];
    if (t !== undefined && t > 0) return t;
  }
  return 1;
}

function calibrated(type: QuestionTypeName | CalibratedType): CalibratedType {
  return typeof type === "string" ? builtinType(type) : type;
}
