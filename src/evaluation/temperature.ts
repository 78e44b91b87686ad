import { logSumExp, softmax } from "../decision/math.js";

/**
 * Temperature scaling (Guo et al. 2017): given per-question label log-probabilities sᵢ and the
 * expected label y, find the positive T minimising the mean NLL of pᵢ ∝ exp(sᵢ / T):
 *
 *   NLL(T) = mean over samples of [ logΣⱼ exp(sⱼ/T) − s_y/T ].
 *
 * NLL is convex in β = 1/T (a log-sum-exp of functions linear in β minus a linear term), so it
 * has one minimum along any monotone reparametrisation; the fit runs golden-section search on
 * u = ln T over [ln 0.05, ln 20] to a width of 1e-6 (about 30 evaluations of NLL). A minimum on
 * a bound means the data want a temperature outside that range; the bound is returned.
 */

/** One fitting sample: label log-probabilities (any additive constant) and the expected label. */
export interface TemperatureSample {
  readonly logprobs: readonly number[];
  readonly label: number;
}

/** Range of the search. */
export const MIN_TEMPERATURE = 0.05;
export const MAX_TEMPERATURE = 20;

/** Floor for log-probabilities (ln of an underflowed 0 would make every T equally bad). */
const LOG_FLOOR = -745;

/** ln p with p = 0 mapped to a finite floor. */
export function safeLog(p: number): number {
  return p > 0 ? Math.max(Math.log(p), LOG_FLOOR) : LOG_FLOOR;
}

/** Mean NLL of the samples at temperature T. NaN for no samples. */
export function nllAtTemperature(
  samples: readonly TemperatureSample[],
  temperature: number,
): number {
  if (samples.length === 0) return NaN;
  let total = 0;
  for (const { logprobs, label } of samples) {
    const scaled = logprobs.map((s) => Math.max(s, LOG_FLOOR) / temperature);
    total += logSumExp(scaled) - scaled[label]!;
  }
  return total / samples.length;
}

/** The result of {@link fitTemperature}. */
export interface TemperatureFit {
  readonly temperature: number;
  /** Mean NLL at T = 1 and at the fitted T. */
  readonly nllBefore: number;
  readonly nllAfter: number;
  /** Whether the minimum sits on a bound of the search range. */
  readonly atBound: boolean;
}

/**
 * Fits one temperature by golden-section search on ln T (see the module comment).
 * @throws {@link RangeError} for no samples.
 */
export function fitTemperature(
  samples: readonly TemperatureSample[],
  options: { min?: number; max?: number; tolerance?: number } = {},
): TemperatureFit {
  if (samples.length === 0) throw new RangeError("no samples to fit a temperature on");
  const f = (u: number) => nllAtTemperature(samples, Math.exp(u));
  let a = Math.log(options.min ?? MIN_TEMPERATURE);
  let b = Math.log(options.max ?? MAX_TEMPERATURE);
  const lo = a;
  const hi = b;
  const tolerance = options.tolerance ?? 1e-6;
  const g = (Math.sqrt(5) - 1) / 2;
  let c = b - g * (b - a);
  let d = a + g * (b - a);
  let fc = f(c);
  let fd = f(d);
  while (b - a > tolerance) {
    if (fc <= fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - g * (b - a);
      fc = f(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + g * (b - a);
      fd = f(d);
    }
  }
  let u = (a + b) / 2;
  // The ends are never evaluated by the interior search; take one when it is better.
  for (const end of [lo, hi]) if (f(end) < f(u)) u = end;
  const temperature = Math.exp(u);
  return {
    temperature,
    nllBefore: nllAtTemperature(samples, 1),
    nllAfter: nllAtTemperature(samples, temperature),
    atBound: Math.abs(u - lo) < 1e-3 || Math.abs(u - hi) < 1e-3,
  };
}

/** Probabilities pᵢ ∝ exp(ln pᵢ / T) of a distribution at temperature T (the Decider's rule). */
export function applyTemperature(probabilities: readonly number[], temperature: number): number[] {
  if (temperature === 1) return [...probabilities];
  return softmax(probabilities.map(safeLog), temperature);
}
