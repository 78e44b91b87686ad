import type { QuestionType } from "./types.js";

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

/**
 * Option-count bucket of a question: noul "2"; choice "2", "3-4", "5-8", "9-16", "17+";
 * score "2-3", "4-5", "6-10". Buckets keep enough fitting data per temperature while separating
 * regimes whose over-confidence differs.
 */
export function optionCountBucket(type: QuestionType, n: number): string {
  if (type === "noul") return "2";
  if (type === "score") return n <= 3 ? "2-3" : n <= 5 ? "4-5" : "6-10";
  if (n <= 2) return "2";
  if (n <= 4) return "3-4";
  if (n <= 8) return "5-8";
  if (n <= 16) return "9-16";
  return "17+";
}

/** Profile key of a question type and option count. */
export function calibrationKey(type: QuestionType, n: number): string {
  return `${type}:${optionCountBucket(type, n)}`;
}

/** Profile key of a question type's fallback temperature, fitted on all its questions. */
export function fallbackKey(type: QuestionType): string {
  return type;
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
  type: QuestionType,
  n: number,
): number {
  for (const key of [calibrationKey(type, n), fallbackKey(type)]) {
    const t = profile?.temperatures[key];
    if (t !== undefined && t > 0) return t;
  }
  return 1;
}
