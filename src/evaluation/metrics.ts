/**
 * Quality metrics of probabilistic answers. Every function is pure and takes plain arrays, so the
 * tests check them against hand-computed values.
 *
 * A *prediction* is a probability vector over a question's classes (choice: its options in request
 * order; noul: [true, false]; score: levels 0..n−1) and the index of the expected class.
 */

/** One answered question, reduced to what the metrics need. */
export interface Prediction {
  /** Class keys in probability order (option ids; "true"/"false"; "0".."n−1"). */
  readonly classes: readonly string[];
  readonly probabilities: readonly number[];
  /** Index of the expected class. */
  readonly gold: number;
}

/** Probabilities are clamped to at least this before taking logs. */
export const NLL_EPSILON = 1e-12;

/** Number of equal-width confidence bins of {@link expectedCalibrationError}. */
export const ECE_BINS = 15;

/** Index of the largest value; the first one on ties. */
export function argmax(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

function mean(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  let total = 0;
  for (const v of values) total += v;
  return total / values.length;
}

/** Share of predictions whose argmax is the expected class. NaN for none. */
export function accuracy(predictions: readonly Prediction[]): number {
  return mean(predictions.map((p) => (argmax(p.probabilities) === p.gold ? 1 : 0)));
}

/**
 * Macro-averaged F1 over class keys: for each key that occurs as an expected or a predicted
 * class, F1 = 2TP / (2TP + FP + FN); the mean over those keys (scikit-learn's
 * `f1_score(average="macro")` with its default labels). Keys are compared as strings, so
 * predictions of different questions with the same option ids pool. NaN for none.
 */
export function macroF1(predictions: readonly Prediction[]): number {
  const counts = new Map<string, { tp: number; fp: number; fn: number }>();
  const at = (key: string) => {
    let c = counts.get(key);
    if (!c) counts.set(key, (c = { tp: 0, fp: 0, fn: 0 }));
    return c;
  };
  for (const p of predictions) {
    const gold = p.classes[p.gold]!;
    const predicted = p.classes[argmax(p.probabilities)]!;
    if (gold === predicted) at(gold).tp++;
    else {
      at(gold).fn++;
      at(predicted).fp++;
    }
  }
  if (counts.size === 0) return NaN;
  return mean([...counts.values()].map(({ tp, fp, fn }) => (2 * tp) / (2 * tp + fp + fn)));
}

/** Mean negative log-likelihood −ln p(gold), p clamped to ≥ {@link NLL_EPSILON}. NaN for none. */
export function negativeLogLikelihood(predictions: readonly Prediction[]): number {
  return mean(predictions.map((p) => -Math.log(Math.max(p.probabilities[p.gold]!, NLL_EPSILON))));
}

/** Multi-class Brier score: mean over predictions of Σᵢ (pᵢ − yᵢ)², y one-hot. Range [0, 2]. */
export function brierScore(predictions: readonly Prediction[]): number {
  return mean(
    predictions.map((p) => {
      let total = 0;
      p.probabilities.forEach((q, i) => {
        total += (q - (i === p.gold ? 1 : 0)) ** 2;
      });
      return total;
    }),
  );
}

/**
 * Expected calibration error on the top-class confidence (Guo et al. 2017): predictions fall into
 * `bins` equal-width bins of confidence c = max pᵢ (bin ⌊c·bins⌋, c = 1 in the last bin);
 * ECE = Σ_b (|B_b| / N) · |accuracy(B_b) − mean confidence(B_b)|. NaN for none.
 */
export function expectedCalibrationError(
  predictions: readonly Prediction[],
  bins = ECE_BINS,
): number {
  if (predictions.length === 0) return NaN;
  const count = new Array<number>(bins).fill(0);
  const correct = new Array<number>(bins).fill(0);
  const confidence = new Array<number>(bins).fill(0);
  for (const p of predictions) {
    const top = argmax(p.probabilities);
    const c = p.probabilities[top]!;
    const b = Math.min(bins - 1, Math.max(0, Math.floor(c * bins)));
    count[b]!++;
    confidence[b]! += c;
    if (top === p.gold) correct[b]!++;
  }
  let ece = 0;
  for (let b = 0; b < bins; b++)
    if (count[b]! > 0) ece += Math.abs(correct[b]! - confidence[b]!) / predictions.length;
  return ece;
}

/**
 * The ECE that answers calibrated by construction would show on the same questions: the
 * expectation of {@link expectedCalibrationError} when each prediction is right with probability
 * equal to its confidence c = max pᵢ, independently. ECE is a sum of absolute errors, so sampling
 * alone makes it positive; a measured ECE near this floor is as small as `predictions.length`
 * questions can show (for a few hundred questions it is typically 0.02–0.06).
 *
 * Per bin the number right K is Poisson-binomial over the bin's confidences; E|K − Σc| is exact by
 * the usual dynamic programme over the bin's predictions (O(n²) per bin):
 *
 *   floor = Σ_b E|K_b − Σ_(i in b) cᵢ| / N.
 *
 * @returns a value in [0, 1); NaN for no predictions
 * @example
 * ```ts
 * // One question at confidence .75: right (error .25) with p .75, wrong (.75) with p .25.
 * expectedCalibrationErrorFloor([{ classes: ["x", "y"], probabilities: [0.75, 0.25], gold: 0 }]); // → 0.375
 * ```
 */
export function expectedCalibrationErrorFloor(
  predictions: readonly Prediction[],
  bins = ECE_BINS,
): number {
  if (predictions.length === 0) return NaN;
  const byBin: number[][] = Array.from({ length: bins }, () => []);
  for (const p of predictions) {
    const c = p.probabilities[argmax(p.probabilities)]!;
    byBin[Math.min(bins - 1, Math.max(0, Math.floor(c * bins)))]!.push(c);
  }
  let floor = 0;
  for (const confidences of byBin) {
    if (confidences.length === 0) continue;
    // dist[k] = P(k of the predictions so far are right)
    let dist = [1];
    for (const c of confidences) {
      const next = new Array<number>(dist.length + 1).fill(0);
      for (let k = 0; k < dist.length; k++) {
        next[k]! += dist[k]! * (1 - c);
        next[k + 1]! += dist[k]! * c;
      }
      dist = next;
    }
    const expected = confidences.reduce((a, b) => a + b, 0);
    floor += dist.reduce((sum, p, k) => sum + p * Math.abs(k - expected), 0);
  }
  return floor / predictions.length;
}

/** Mean absolute error. NaN for none. @throws {@link RangeError} on different lengths. */
export function meanAbsoluteError(
  predicted: readonly number[],
  expected: readonly number[],
): number {
  if (predicted.length !== expected.length) throw new RangeError("lengths differ");
  return mean(predicted.map((v, i) => Math.abs(v - expected[i]!)));
}

/** Ranks 1..n with ties given the mean of the ranks they span ("average" ranking). */
export function averageRanks(values: readonly number[]): number[] {
  const order = values.map((v, i) => [v, i] as const).sort((a, b) => a[0] - b[0]);
  const ranks = new Array<number>(values.length);
  let i = 0;
  while (i < order.length) {
    let j = i;
    while (j + 1 < order.length && order[j + 1]![0] === order[i]![0]) j++;
    const rank = (i + j) / 2 + 1;
    for (let k = i; k <= j; k++) ranks[order[k]![1]] = rank;
    i = j + 1;
  }
  return ranks;
}

/** Pearson's correlation; NaN when fewer than 2 values or either side is constant. */
export function pearson(x: readonly number[], y: readonly number[]): number {
  if (x.length !== y.length) throw new RangeError("lengths differ");
  if (x.length < 2) return NaN;
  const mx = mean(x);
  const my = mean(y);
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < x.length; i++) {
    const dx = x[i]! - mx;
    const dy = y[i]! - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  return sxx === 0 || syy === 0 ? NaN : sxy / Math.sqrt(sxx * syy);
}

/** Spearman's ρ: Pearson's correlation of average ranks (ties handled). NaN when undefined. */
export function spearman(x: readonly number[], y: readonly number[]): number {
  return pearson(averageRanks(x), averageRanks(y));
}

/** Share of `true` values; NaN for none. */
export function rate(flags: readonly boolean[]): number {
  return mean(flags.map((f) => (f ? 1 : 0)));
}

/** Expected accuracy of a uniform random answer: the mean over predictions of 1/classes. */
export function chanceAccuracy(predictions: readonly Prediction[]): number {
  return mean(predictions.map((p) => 1 / p.classes.length));
}

/**
 * Accuracy of always giving the most common expected answer of the set: the baseline every
 * accuracy must beat to mean anything. The commonest answer is counted both by class key (a
 * label dataset's intent, "true") and by position among the question's classes (a
 * multiple-choice dataset whose options are its answer texts, where every key is new but "always
 * the second option" is a strategy), and the better of the two is the baseline. NaN for none.
 * @example majorityAccuracy(predictions) // → 2/3 when the golds are a, a, b
 */
export function majorityAccuracy(predictions: readonly Prediction[]): number {
  if (predictions.length === 0) return NaN;
  const byKey = new Map<string, number>();
  const byPosition = new Map<number, number>();
  for (const p of predictions) {
    const key = p.classes[p.gold]!;
    byKey.set(key, (byKey.get(key) ?? 0) + 1);
    byPosition.set(p.gold, (byPosition.get(p.gold) ?? 0) + 1);
  }
  return Math.max(...byKey.values(), ...byPosition.values()) / predictions.length;
}

/**
 * Area under the ROC curve of scores against binary outcomes: the probability that a random
 * positive scores above a random negative, ties counted half (the Mann–Whitney U statistic over
 * n₊·n₋). NaN when either class is absent.
 * @param scores - e.g. P(yes) per question
 * @param positive - whether each question's expected answer is the positive class
 * @example rocAuc([0.9, 0.2, 0.6], [true, false, false]) // → 1
 */
export function rocAuc(scores: readonly number[], positive: readonly boolean[]): number {
  const order = scores.map((s, i) => [s, i] as const).sort((a, b) => a[0] - b[0]);
  const ranks = new Array<number>(scores.length);
  for (let i = 0; i < order.length;) {
    let j = i;
    while (j + 1 < order.length && order[j + 1]![0] === order[i]![0]) j++;
    for (let k = i; k <= j; k++) ranks[order[k]![1]] = (i + j) / 2 + 1;
    i = j + 1;
  }
  let positives = 0;
  let rankSum = 0;
  positive.forEach((p, i) => {
    if (p) {
      positives++;
      rankSum += ranks[i]!;
    }
  });
  const negatives = positive.length - positives;
  if (positives === 0 || negatives === 0) return NaN;
  return (rankSum - (positives * (positives + 1)) / 2) / (positives * negatives);
}
