/**
 * Pure numeric helpers of the readout. Formulas follow DESIGN.md "Readout rules", which match
 * the System One API's documented answer fields (reference formulas in jevcompat SPEC §4.5).
 */

/**
 * Softmax of log-scores divided by a temperature: pᵢ = exp(sᵢ/T) / Σⱼ exp(sⱼ/T), computed with
 * the max subtracted for stability.
 * @param logScores - natural-log scores (e.g. label log-probabilities); any finite values.
 * @param temperature - T \> 0; 1 leaves the model's distribution as it is.
 * @returns probabilities in [0, 1] summing to 1 (same order as the input).
 * @throws `RangeError` when the input is empty or T ≤ 0.
 */
export function softmax(logScores: readonly number[], temperature = 1): number[] {
  if (logScores.length === 0) throw new RangeError("softmax of an empty list");
  if (!(temperature > 0)) throw new RangeError(`temperature must be > 0, got ${temperature}`);
  let max = -Infinity;
  for (const s of logScores) max = Math.max(max, s / temperature);
  const exps = logScores.map((s) => Math.exp(s / temperature - max));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / total);
}

/** ln Σ exp(xᵢ), stable. */
export function logSumExp(values: readonly number[]): number {
  let max = -Infinity;
  for (const v of values) max = Math.max(max, v);
  if (max === -Infinity) return -Infinity;
  let total = 0;
  for (const v of values) total += Math.exp(v - max);
  return max + Math.log(total);
}

/** Index of the largest value (the first one on ties). */
export function argmax(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

/**
 * Choice confidence (m − 1/n)/(1 − 1/n): 0 for a uniform distribution, 1 for a certain one.
 * @param probabilities - a distribution over n ≥ 1 options.
 */
export function choiceConfidence(probabilities: readonly number[]): number {
  const n = probabilities.length;
  if (n <= 1) return 1;
  const m = Math.max(...probabilities);
  return clamp01((m - 1 / n) / (1 - 1 / n));
}

/**
 * Score confidence max(0, 1 − Σᵢ pᵢ|i − k| / D), k the mode (first on ties), D = Σᵢ |i − (n−1)/2| / n,
 * the mean absolute deviation of the uniform distribution on 0..n−1 about its centre — the
 * reference normaliser of jevcompat's `score_confidence`.
 */
export function scoreConfidence(probabilities: readonly number[]): number {
  const n = probabilities.length;
  if (n <= 1) return 1;
  const k = argmax(probabilities);
  let spread = 0;
  for (let i = 0; i < n; i++) spread += probabilities[i]! * Math.abs(i - k);
  let uniform = 0;
  for (let i = 0; i < n; i++) uniform += Math.abs(i - (n - 1) / 2);
  uniform /= n;
  return clamp01(1 - spread / uniform);
}

/** Expected level Σ i·pᵢ. */
export function expectation(probabilities: readonly number[]): number {
  let total = 0;
  for (let i = 0; i < probabilities.length; i++) total += i * probabilities[i]!;
  return total;
}

function clamp01(x: number): number {
  return Math.min(1, Math.max(0, x));
}
