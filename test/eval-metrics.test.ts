import { describe, expect, it } from "vitest";
import {
  accuracy,
  averageRanks,
  brierScore,
  chanceAccuracy,
  majorityAccuracy,
  rocAuc,
  expectedCalibrationError,
  expectedCalibrationErrorFloor,
  macroF1,
  meanAbsoluteError,
  negativeLogLikelihood,
  spearman,
  type Prediction,
} from "../src/evaluation/metrics.js";

/**
 * A hand-worked example over classes a, b, c:
 *
 * | # | p (a, b, c)      | gold | top | correct | confidence | 15-bin index |
 * |---|------------------|------|-----|---------|------------|--------------|
 * | 1 | .70 .20 .10      | a    | a   | yes     | .70        | ⌊10.5⌋ = 10  |
 * | 2 | .30 .62 .08      | a    | b   | no      | .62        | ⌊9.3⌋ = 9    |
 * | 3 | .20 .15 .65      | c    | c   | yes     | .65        | ⌊9.75⌋ = 9   |
 * | 4 | .50 .25 .25      | b    | a   | no      | .50        | ⌊7.5⌋ = 7    |
 */
const classes = ["a", "b", "c"];
const EXAMPLE: Prediction[] = [
  { classes, probabilities: [0.7, 0.2, 0.1], gold: 0 },
  { classes, probabilities: [0.3, 0.62, 0.08], gold: 0 },
  { classes, probabilities: [0.2, 0.15, 0.65], gold: 2 },
  { classes, probabilities: [0.5, 0.25, 0.25], gold: 1 },
];

describe("classification metrics on a hand-worked example", () => {
  it("accuracy: 2 of 4 correct", () => {
    expect(accuracy(EXAMPLE)).toBe(0.5);
  });

  it("macro-F1: a 2·1/(2+1+1) = .5, b 0, c 2/2 = 1 → .5", () => {
    // a: TP #1, FP #4 (predicted a, gold b), FN #2 (gold a, predicted b). b: FP #2, FN #4. c: TP #3.
    expect(macroF1(EXAMPLE)).toBeCloseTo(0.5, 12);
  });

  it("macro-F1 averages over classes that are expected or predicted only", () => {
    // Only class a ever appears: F1(a) = 1; b and c are never seen and do not count.
    expect(macroF1([{ classes, probabilities: [0.9, 0.05, 0.05], gold: 0 }])).toBe(1);
  });

  it("NLL: −(ln .7 + ln .3 + ln .65 + ln .25) / 4", () => {
    // 0.356675 + 1.203973 + 0.430783 + 1.386294 = 3.377725; / 4 = 0.844431
    expect(negativeLogLikelihood(EXAMPLE)).toBeCloseTo(0.844431, 5);
  });

  it("Brier: mean of Σ (p − y)²", () => {
    // #1 .09+.04+.01 = .14; #2 .49+.3844+.0064 = .8808; #3 .04+.0225+.1225 = .185;
    // #4 .25+.5625+.0625 = .875; sum 2.0808; mean .5202
    expect(brierScore(EXAMPLE)).toBeCloseTo(0.5202, 12);
  });

  it("ECE with 15 bins", () => {
    // bin 10: {#1} |1 − .70| = .30, weight 1/4 → .075
    // bin 9:  {#2 wrong, #3 right} |.5 − .635| = .135, weight 2/4 → .0675
    // bin 7:  {#4 wrong} |0 − .50| = .50, weight 1/4 → .125
    expect(expectedCalibrationError(EXAMPLE)).toBeCloseTo(0.2675, 12);
  });

  it("ECE puts confidence 1 in the last bin and is 0 for perfectly calibrated bins", () => {
    const certain: Prediction = { classes: ["x", "y"], probabilities: [1, 0], gold: 0 };
    expect(expectedCalibrationError([certain])).toBe(0);
    // Two predictions at .75 in one bin, one right and one wrong: |.5 − .75| = .25.
    const p: Prediction[] = [
      { classes: ["x", "y"], probabilities: [0.75, 0.25], gold: 0 },
      { classes: ["x", "y"], probabilities: [0.75, 0.25], gold: 1 },
    ];
    expect(expectedCalibrationError(p)).toBeCloseTo(0.25, 12);
    expect(expectedCalibrationError(p, 2)).toBeCloseTo(0.25, 12);
  });

  it("ECE floor: the expected ECE of answers right with probability equal to their confidence", () => {
    // bin 10 {#1, c .70}: E|K − .70| = .7·.30 + .3·.70 = .42
    // bin 9 {#2 .62, #3 .65}: K = 0 w.p. .38·.35 = .133, 2 w.p. .62·.65 = .403, 1 w.p. .464;
    //   Σc = 1.27 → .133·1.27 + .464·.27 + .403·.73 = .16891 + .12528 + .29419 = .58838
    // bin 7 {#4 .50}: .5·.5 + .5·.5 = .5
    // (.42 + .58838 + .5) / 4 = .377095
    expect(expectedCalibrationErrorFloor(EXAMPLE)).toBeCloseTo(0.377095, 12);
    // The gold answers do not enter the floor; only the confidences do.
    const regolded = EXAMPLE.map((p) => ({ ...p, gold: (p.gold + 1) % 3 }));
    expect(expectedCalibrationErrorFloor(regolded)).toBe(expectedCalibrationErrorFloor(EXAMPLE));
  });

  it("ECE floor: 0 for certain answers, shrinking as questions grow", () => {
    const certain: Prediction = { classes: ["x", "y"], probabilities: [1, 0], gold: 1 };
    expect(expectedCalibrationErrorFloor([certain])).toBe(0);
    const at = (n: number) =>
      expectedCalibrationErrorFloor(
        Array.from({ length: n }, () => ({
          classes: ["x", "y"],
          probabilities: [0.7, 0.3],
          gold: 0,
        })),
      );
    // One bin, K ~ Binomial(n, .7): E|K/n − .7| ≈ √(2/π)·√(.21/n) for large n.
    expect(at(1)).toBeCloseTo(0.42, 12);
    expect(at(400)).toBeCloseTo(Math.sqrt(2 / Math.PI) * Math.sqrt(0.21 / 400), 3);
    expect(at(400)).toBeLessThan(at(50));
    expect(expectedCalibrationErrorFloor([])).toBeNaN();
  });

  it("NLL clamps p = 0 instead of returning Infinity", () => {
    const value = negativeLogLikelihood([{ classes: ["x", "y"], probabilities: [1, 0], gold: 1 }]);
    expect(value).toBeCloseTo(-Math.log(1e-12), 9);
  });

  it("says NaN (does not apply) for no predictions", () => {
    expect(accuracy([])).toBeNaN();
    expect(expectedCalibrationError([])).toBeNaN();
  });
});

describe("score metrics", () => {
  it("MAE", () => {
    // |1.5 − 1| + |2 − 3| + |0 − 0| = 1.5; / 3 = .5
    expect(meanAbsoluteError([1.5, 2, 0], [1, 3, 0])).toBeCloseTo(0.5, 12);
  });

  it("average ranks of ties", () => {
    expect(averageRanks([10, 20, 20, 30])).toEqual([1, 2.5, 2.5, 4]);
    expect(averageRanks([3, 1, 3, 3])).toEqual([3, 1, 3, 3]);
  });

  it("Spearman's rho with ties", () => {
    // ranks x = [1, 2.5, 2.5, 4], ranks y = [1, 3, 2, 4], both means 2.5;
    // Σdxdy = 2.25 + 0 + 0 + 2.25 = 4.5, Σdx² = 4.5, Σdy² = 5 → 4.5 / √22.5 = √0.9
    expect(spearman([1, 2, 2, 3], [1, 3, 2, 4])).toBeCloseTo(Math.sqrt(0.9), 12);
    expect(spearman([1, 2, 3], [30, 20, 10])).toBeCloseTo(-1, 12);
  });

  it("Spearman is undefined (NaN) for a constant side", () => {
    expect(spearman([1, 1, 1], [1, 2, 3])).toBeNaN();
  });
});

describe("baselines beside an accuracy", () => {
  const p = (classes: string[], gold: number): Prediction => ({
    classes,
    probabilities: classes.map(() => 1 / classes.length),
    gold,
  });

  it("chance is the mean of 1/classes", () => {
    expect(chanceAccuracy([p(["a", "b"], 0), p(["a", "b", "c", "d"], 1)])).toBeCloseTo(0.375, 12);
  });

  it("majority is the share of the most common expected class", () => {
    expect(majorityAccuracy([p(["a", "b"], 0), p(["a", "b"], 0), p(["a", "b"], 1)])).toBeCloseTo(
      2 / 3,
      12,
    );
    expect(majorityAccuracy([])).toBeNaN();
    // Answer texts as ids: every key is new, but the gold is the second option 2 times of 3.
    expect(majorityAccuracy([p(["x", "y"], 1), p(["u", "v"], 1), p(["s", "t"], 0)])).toBeCloseTo(
      2 / 3,
      12,
    );
  });

  it("AUC ranks positives above negatives, ties counted half", () => {
    expect(rocAuc([0.9, 0.2, 0.6], [true, false, false])).toBe(1);
    expect(rocAuc([0.1, 0.8], [true, false])).toBe(0);
    expect(rocAuc([0.5, 0.5], [true, false])).toBe(0.5);
    // Hand count: pairs (0.7>0.3) (0.7>0.6) (0.4>0.3) (0.4<0.6) → 3 of 4.
    expect(rocAuc([0.7, 0.4, 0.3, 0.6], [true, true, false, false])).toBe(0.75);
    expect(rocAuc([0.3, 0.4], [true, true])).toBeNaN();
  });
});
