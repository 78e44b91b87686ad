import { describe, expect, it } from "vitest";
import {
  argmax,
  choiceConfidence,
  expectation,
  logSumExp,
  scoreConfidence,
  softmax,
} from "../src/decision/math.js";

describe("softmax", () => {
  it("matches hand-computed values", () => {
    // exp(0)=1, exp(ln 3)=3 → [0.25, 0.75]
    const p = softmax([0, Math.log(3)]);
    expect(p[0]).toBeCloseTo(0.25, 12);
    expect(p[1]).toBeCloseTo(0.75, 12);
  });
  it("applies the temperature as exp(s/T)", () => {
    // T=2: exp(0)=1, exp(ln 9 / 2)=3 → [0.25, 0.75]
    const p = softmax([0, Math.log(9)], 2);
    expect(p[1]).toBeCloseTo(0.75, 12);
  });
  it("is stable for large magnitudes and rejects bad input", () => {
    expect(softmax([-1000, -1001])[0]).toBeCloseTo(1 / (1 + Math.exp(-1)), 12);
    expect(() => softmax([])).toThrow(RangeError);
    expect(() => softmax([1], 0)).toThrow(RangeError);
  });
});

describe("confidence formulas", () => {
  it("choice: (m − 1/n)/(1 − 1/n)", () => {
    expect(choiceConfidence([0.5, 0.5])).toBe(0);
    expect(choiceConfidence([1, 0, 0])).toBe(1);
    // m=0.6, n=3: (0.6 − 1/3)/(2/3) = 0.4
    expect(choiceConfidence([0.6, 0.3, 0.1])).toBeCloseTo(0.4, 12);
  });
  it("score: 1 − Σ pᵢ|i − k| / D with D the uniform spread about the centre", () => {
    // n=3: D = (1 + 0 + 1)/3 = 2/3. p=[0.2,0.5,0.3], k=1: spread = 0.2 + 0.3 = 0.5 → 1 − 0.75 = 0.25
    expect(scoreConfidence([0.2, 0.5, 0.3])).toBeCloseTo(0.25, 12);
    expect(scoreConfidence([0, 1, 0])).toBe(1);
    // mass split between both ends: k=0, spread = 0.5·2 = 1 > D → clamped to 0
    expect(scoreConfidence([0.5, 0, 0.5])).toBe(0);
  });
  it("score expectation Σ i·pᵢ", () => {
    expect(expectation([0.2, 0.5, 0.3])).toBeCloseTo(1.1, 12);
  });
  it("argmax and logSumExp", () => {
    expect(argmax([0.1, 0.7, 0.7])).toBe(1);
    expect(logSumExp([Math.log(2), Math.log(3)])).toBeCloseTo(Math.log(5), 12);
    expect(logSumExp([-Infinity, -Infinity])).toBe(-Infinity);
  });
});
