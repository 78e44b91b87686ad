import { describe, expect, it } from "vitest";
import {
  agreeingTokens,
  callSizes,
  FA_TILE_ROWS,
  prefixCallSizes,
  prefixResumeAfter,
  prefixTiledEnd,
  resumeAfter,
  resumePoint,
  sequenceCallSizes,
  tiledEnd,
} from "../src/engine/decode/kernel-split.js";

describe("kernel split (pure)", () => {
  it("tiles whole blocks of 64 and never leaves a single token to the one-row kernel", () => {
    expect(FA_TILE_ROWS).toBe(64);
    expect(tiledEnd(0)).toBe(0);
    expect(tiledEnd(63)).toBe(0);
    expect(tiledEnd(64)).toBe(64);
    expect(tiledEnd(65)).toBe(65);
    expect(tiledEnd(66)).toBe(64);
    expect(tiledEnd(2091)).toBe(2048);
    expect(tiledEnd(2113)).toBe(2113);
  });

  it("takes over tokens only as far as two lengths cut alike", () => {
    expect(agreeingTokens(100, 120)).toBe(100); // both tiled up to 64, the rest one-row
    expect(agreeingTokens(100, 130)).toBe(64); // 64 against 128
    expect(agreeingTokens(40, 100)).toBe(0); // 40 has no tiled part
    expect(agreeingTokens(10, 40)).toBe(10);
  });

  it("tiles a whole prefix from 64 tokens on", () => {
    expect(prefixTiledEnd(0)).toBe(0);
    expect(prefixTiledEnd(63)).toBe(0);
    expect(prefixTiledEnd(64)).toBe(64);
    expect(prefixTiledEnd(2413)).toBe(2413);
    // Two prefixes were tiled as far as the shorter goes.
    expect(agreeingTokens(2413, 2420, prefixTiledEnd)).toBe(2413);
    expect(agreeingTokens(2420, 2413, prefixTiledEnd)).toBe(2413);
    expect(agreeingTokens(40, 2413, prefixTiledEnd)).toBe(0);
    // Taken over as far as shared, stepping back so the rest is one tiled call of 64 or more.
    expect(prefixResumeAfter(2413, 2413, 2413)).toBe(2413);
    expect(prefixResumeAfter(2405, 2413, 2420)).toBe(2420 - 64);
    expect(prefixResumeAfter(2300, 2413, 2420)).toBe(2300);
    expect(prefixResumeAfter(2420, 2500, 2450)).toBe(2450 - 64);
    expect(prefixCallSizes(335, 2413, 1024)).toEqual([693, 693, 692]);
    expect(prefixCallSizes(2356, 2420, 1024)).toEqual([64]);
    expect(prefixCallSizes(0, 50, 1024)).toEqual([50]);
  });

  it("resumes where the calls left are cut as the sequence would cut itself", () => {
    // A prefix seen whole is taken over whole; a branch always evaluates its last token.
    expect(resumePoint(2091, Infinity, 2091, true)).toBe(2091);
    expect(resumePoint(103, Infinity, 103)).toBe(101); // not one token alone
    // Inside the tiled part: step back so the rest of it is one call of 64.
    expect(resumePoint(1050, Infinity, 1100, true)).toBe(1088 - 64);
    expect(resumePoint(900, Infinity, 1100, true)).toBe(900);
    // Limited by what agrees.
    expect(resumePoint(1000, 64, 1100, true)).toBe(64);
    // Past the tiled part: at most the shared tokens, never a one-token call.
    expect(resumePoint(80, Infinity, 103)).toBe(80);
    expect(resumePoint(41, Infinity, 42)).toBe(40);
    expect(resumePoint(0, Infinity, 1)).toBe(0);
    // After a held sequence: limited to where both lengths cut alike.
    expect(resumeAfter(1000, 1100, 1100, true)).toBe(1000);
    expect(resumeAfter(1040, 1050, 1100, true)).toBe(1024); // cut at 1024 against 1088
    expect(resumeAfter(90, 100, 103)).toBe(90);
  });

  it("cuts calls of at least 64 tiled tokens, then one call for the rest", () => {
    expect(callSizes(0, 2091, 2048, 1024)).toEqual([1024, 1024, 43]);
    expect(callSizes(0, 1100, 1088, 1024)).toEqual([544, 544, 12]);
    expect(callSizes(1024, 1100, 1088, 1024)).toEqual([64, 12]);
    expect(callSizes(80, 103, 64, 1024)).toEqual([23]);
    expect(callSizes(0, 30, 0, 1024)).toEqual([30]);
    expect(callSizes(5, 5, 0, 1024)).toEqual([]);
    expect(() => callSizes(1050, 1100, 1088, 1024)).toThrow(RangeError);
    expect(() => callSizes(0, 100, 64, 100)).toThrow(RangeError);
    expect(sequenceCallSizes(0, 2091, 1024)).toEqual([1024, 1024, 43]);
    expect(sequenceCallSizes(80, 103, 1024)).toEqual([23]);
  });
});
