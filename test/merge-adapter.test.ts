import { mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterEach, beforeEach, describe, expect, inject, it, vi } from "vitest";
import { TUNED_READOUT } from "../src/decision/options.js";
import { Decider } from "../src/decision/decide.js";
import { toDecisionRequest } from "../src/decision/from-wire.js";
import { openLlamaEngine } from "../src/engine/llama/index.js";
import type { Engine } from "../src/engine/types.js";
import { openModelEngine } from "../src/service/model.js";
import {
  mergeAdapterGguf,
  mergedModelFile,
  UnmergeableAdapterError,
} from "../src/models/merge-adapter.js";
import { floatToHalf, halfToFloat, readGgufLayout } from "../src/models/requantize.js";
import { writeGguf } from "./support/gguf.js";

const f32 = (values: readonly number[]) => new Uint8Array(new Float32Array(values).buffer);
const f16 = (values: readonly number[]) =>
  new Uint8Array(new Uint16Array(values.map(floatToHalf)).buffer);

/** Q8_0 rows from int8 values and one scale per 32-value block (f16-exact scales). */
function q8_0(rows: readonly (readonly number[])[], scales: readonly number[]): Uint8Array {
  const blocks = rows.flatMap((row) =>
    Array.from({ length: row.length / 32 }, (_, k) => row.slice(k * 32, k * 32 + 32)),
  );
  const out = new Uint8Array(blocks.length * 34);
  blocks.forEach((block, b) => {
    const h = floatToHalf(scales[b]!);
    out[b * 34] = h & 0xff;
    out[b * 34 + 1] = h >> 8;
    block.forEach((q, j) => (out[b * 34 + 2 + j] = q & 0xff));
  });
  return out;
}

/** Dequantized Q8_0 rows of `nIn` values. */
function dequantQ8_0(data: Uint8Array, nIn: number): number[][] {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const values: number[] = [];
  for (let b = 0; b < data.length / 34; b++) {
    const d = halfToFloat(view.getUint16(b * 34, true));
    for (let j = 0; j < 32; j++) values.push(d * view.getInt8(b * 34 + 2 + j));
  }
  return Array.from({ length: values.length / nIn }, (_, o) =>
    values.slice(o * nIn, o * nIn + nIn),
  );
}

/** Data of a tensor in a GGUF file. */
function tensorData(file: Uint8Array, name: string): Uint8Array {
  const layout = readGgufLayout(file);
  const t = layout.tensors.find((x) => x.name === name)!;
  return file.subarray(layout.dataStart + t.offset, layout.dataStart + t.offset + t.size);
}

// The model: a Q8_0 weight (3 rows of 64), an F32 weight (2 rows of 32), a norm left alone.
const qRows = [0, 1, 2].map((o) =>
  Array.from({ length: 64 }, (_, i) => ((i * 7 + o * 13) % 41) - 20),
);
const qScales = [0.0078125, 0.015625, 0.0039062, 0.03125, 0.0078125, 0.0625];
const upRows = [0, 1].map((o) => Array.from({ length: 32 }, (_, i) => (i - 16) / 8 + o));
const MODEL = writeGguf(
  [
    ["general.architecture", "string", "llama"],
    ["general.file_type", "u32", 7],
  ],
  [
    { name: "norm.weight", dims: [5], type: 0, data: f32([1, 2, 3, 4, 5]) },
    { name: "blk.0.attn_q.weight", dims: [64, 3], type: 8, data: q8_0(qRows, qScales) },
    { name: "blk.0.ffn_up.weight", dims: [32, 2], type: 0, data: f32(upRows.flat()) },
  ],
);

// The adapter: rank 2, alpha 8 (scale 4); attn_q's factors in F32, ffn_up's in F16.
const qA = [0, 1].map((k) => Array.from({ length: 64 }, (_, i) => ((i % 5) - 2) * 0.01 * (k + 1)));
const qB = [0, 1, 2].map((o) => [0.5 - o * 0.25, o * 0.125]);
const upA = [0, 1].map((k) => Array.from({ length: 32 }, (_, i) => (k ? 0.25 : -0.5) * (i % 2)));
const upB = [0, 1].map((o) => [1 - o, 0.5]);
const ADAPTER = writeGguf(
  [
    ["general.type", "string", "adapter"],
    ["adapter.type", "string", "lora"],
    ["adapter.lora.alpha", "f32", 8],
  ],
  [
    { name: "blk.0.attn_q.weight.lora_a", dims: [64, 2], type: 0, data: f32(qA.flat()) },
    { name: "blk.0.attn_q.weight.lora_b", dims: [2, 3], type: 0, data: f32(qB.flat()) },
    { name: "blk.0.ffn_up.weight.lora_a", dims: [32, 2], type: 1, data: f16(upA.flat()) },
    { name: "blk.0.ffn_up.weight.lora_b", dims: [2, 2], type: 1, data: f16(upB.flat()) },
  ],
);

/** W + 4·B·A, row by row, from the dequantized (or float) W. */
function expected(w: number[][], a: number[][], b: number[][]): number[][] {
  return w.map((row, o) =>
    row.map((x, i) => x + 4 * (b[o]![0]! * a[0]![i]! + b[o]![1]! * a[1]![i]!)),
  );
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-merge-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function files(model: Uint8Array, adapter: Uint8Array) {
  const modelPath = join(dir, "model.gguf");
  const adapterPath = join(dir, "adapter.gguf");
  await writeFile(modelPath, model);
  await writeFile(adapterPath, adapter);
  return { modelPath, adapterPath };
}

describe("mergeAdapterGguf", () => {
  it("adds (alpha / r)·B·A into each adapted weight and leaves every other byte", async () => {
    const { modelPath, adapterPath } = await files(MODEL, ADAPTER);
    const out = join(dir, "merged.gguf");
    const { merged } = await mergeAdapterGguf(modelPath, adapterPath, out);
    expect(merged).toBe(2);
    const bytes = new Uint8Array(await readFile(out));
    expect(bytes.length).toBe(MODEL.length);
    const layout = readGgufLayout(MODEL);
    const same = (x: Uint8Array, y: Uint8Array) => Buffer.from(x).equals(Buffer.from(y));
    expect(same(bytes.subarray(0, layout.dataStart), MODEL.subarray(0, layout.dataStart))).toBe(
      true,
    );
    expect(same(tensorData(bytes, "norm.weight"), tensorData(MODEL, "norm.weight"))).toBe(true);

    // F32: W + 4·B·A to float32 precision (the F16 factors are exact halves here).
    const up = new Float32Array(tensorData(bytes, "blk.0.ffn_up.weight").slice().buffer);
    expected(upRows, upA, upB)
      .flat()
      .forEach((x, i) => expect(up[i]).toBeCloseTo(x, 6));

    // Q8_0: each value within half a step of its block's new scale d = max|x| / 127, plus what
    // storing d as a half moves a value (|q| ≤ 127 times d's relative rounding, 2^-11).
    const want = expected(dequantQ8_0(tensorData(MODEL, "blk.0.attn_q.weight"), 64), qA, qB);
    const got = dequantQ8_0(tensorData(bytes, "blk.0.attn_q.weight"), 64);
    for (let o = 0; o < 3; o++)
      for (let k = 0; k < 2; k++) {
        const block = want[o]!.slice(k * 32, k * 32 + 32);
        const step = Math.max(...block.map(Math.abs)) / 127;
        block.forEach((x, j) =>
          expect(Math.abs(got[o]![k * 32 + j]! - x)).toBeLessThanOrEqual(step * (0.5 + 127 / 2048)),
        );
      }
    // The delta is there: the merged weight is not the old one.
    expect(
      same(tensorData(bytes, "blk.0.attn_q.weight"), tensorData(MODEL, "blk.0.attn_q.weight")),
    ).toBe(false);
  });

  it("refuses an adapter it cannot add, naming what", async () => {
    const lone = writeGguf(
      [["adapter.lora.alpha", "f32", 8]],
      [{ name: "blk.0.attn_q.weight.lora_a", dims: [64, 2], type: 0, data: f32(qA.flat()) }],
    );
    const missing = writeGguf(
      [],
      [
        { name: "blk.9.attn_q.weight.lora_a", dims: [64, 2], type: 0, data: f32(qA.flat()) },
        { name: "blk.9.attn_q.weight.lora_b", dims: [2, 3], type: 0, data: f32(qB.flat()) },
      ],
    );
    const misshapen = writeGguf(
      [],
      [
        { name: "blk.0.attn_q.weight.lora_a", dims: [64, 2], type: 0, data: f32(qA.flat()) },
        { name: "blk.0.attn_q.weight.lora_b", dims: [2, 2], type: 0, data: f32([1, 2, 3, 4]) },
      ],
    );
    for (const [adapter, message] of [
      [lone, /without blk\.0\.attn_q\.weight\.lora_b/],
      [missing, /no weight blk\.9\.attn_q\.weight/],
      [misshapen, /does not fit/],
    ] as const) {
      const { modelPath, adapterPath } = await files(MODEL, adapter);
      const error = await mergeAdapterGguf(modelPath, adapterPath, join(dir, "m.gguf")).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(UnmergeableAdapterError);
      expect((error as Error).message).toMatch(message);
    }
    // A weight type it does not write again (Q4_1).
    const q4 = writeGguf(
      [],
      [{ name: "blk.0.attn_q.weight", dims: [64, 3], type: 3, data: new Uint8Array(6 * 20) }],
    );
    const { modelPath, adapterPath } = await files(q4, ADAPTER);
    await expect(mergeAdapterGguf(modelPath, adapterPath, join(dir, "m.gguf"))).rejects.toThrow(
      UnmergeableAdapterError,
    );
  });
});

describe("mergedModelFile", () => {
  it("makes the merged file once, and anew (dropping the old) when an input changes", async () => {
    const { modelPath, adapterPath } = await files(MODEL, ADAPTER);
    const cache = join(dir, "merged");
    const first = await mergedModelFile(modelPath, adapterPath, cache);
    const made = (await stat(first)).mtimeMs;
    expect(await mergedModelFile(modelPath, adapterPath, cache)).toBe(first);
    expect((await stat(first)).mtimeMs).toBe(made);
    // The same adapter file, touched: the same merge.
    await utimes(adapterPath, new Date(), new Date(Date.now() + 5000));
    expect(await mergedModelFile(modelPath, adapterPath, cache)).toBe(first);
    // Another adapter under the same name (alpha 4): another merge, and the first one removed.
    const other = Buffer.from(ADAPTER);
    const at = other.indexOf(Buffer.from(new Float32Array([8]).buffer));
    other.set(new Uint8Array(new Float32Array([4]).buffer), at);
    await writeFile(adapterPath, other);
    const second = await mergedModelFile(modelPath, adapterPath, cache);
    expect(second).not.toBe(first);
    expect(await readdir(cache)).toEqual([basename(second)]);
  });
});

/**
 * On the real model: `openModelEngine` serves the shipped adapter added into the weights, and its
 * answers are llama.cpp's runtime LoRA's, up to Q8_0 rounding of the merged weights, where the
 * base alone answers otherwise.
 */
describe("the shipped adapter added into the real model", () => {
  const adapterPath = "adapters/smollm2-135m-instruct.decision.gguf";
  const requests = [
    {
      state: "You charged my card twice. Refund me now!",
      questions: { refund: { type: "noul", instructions: "Is this a refund request?" } },
    },
    {
      state: "The app crashes every time I open the settings page on my phone.",
      questions: {
        team: {
          type: "choice",
          instructions: "Which team should handle this ticket?",
          criteria: {
            billing: "Payments and refunds",
            technical: "Bugs and crashes",
            sales: "Quotes",
          },
        },
      },
    },
    {
      state: "hardly a masterpiece, but it introduces viewers to a good charitable enterprise.",
      questions: {
        sentiment: {
          type: "score",
          instructions: "How positive is this movie review?",
          criteria: ["Very negative", "Negative", "Neutral or mixed", "Positive", "Very positive"],
        },
      },
    },
  ];

  /** Every probability of every answer, in a fixed order. */
  async function answers(engine: Engine): Promise<number[]> {
    const decider = new Decider(engine, { ...TUNED_READOUT });
    const out: number[] = [];
    for (const wire of requests) {
      const { answers } = await decider.decide(
        toDecisionRequest({ model: "decisiond-1.0-experimental", ...wire } as never),
      );
      for (const a of Object.values(answers) as { noul?: number; probabilities?: object }[])
        out.push(...(a.noul !== undefined ? [a.noul] : Object.values(a.probabilities ?? {})));
    }
    return out;
  }

  it("answers as the runtime adapter does, and unlike the base", { timeout: 300_000 }, async () => {
    vi.stubEnv("DECISIOND_HOME", dir);
    const modelPath = inject("modelPath");
    const options = { contextSize: 1024, prefixCacheBytes: 0 };
    const merged = await openModelEngine({ modelId: "m", modelPath, adapterPath }, options);
    const runtime = await openLlamaEngine({ modelPath, adapterPath, ...options });
    const base = await openLlamaEngine({ modelPath, ...options });
    try {
      expect(merged.model.adapter).toBe("smollm2-135m-instruct.decision.gguf");
      expect(merged.model.path.startsWith(join(dir, "models", "merged"))).toBe(true);
      const [m, r, b] = [await answers(merged), await answers(runtime), await answers(base)];
      const largest = (x: number[], y: number[]) =>
        Math.max(...x.map((v, i) => Math.abs(v - y[i]!)));
      expect(m.length).toBe(r.length);
      // Q8_0 rounding of the merged weights moves a probability by up to about 0.1 (0.013 on
      // average over 1,206 test questions, docs/decisions/094); the base is 0.3–0.5 away.
      expect(largest(m, r)).toBeLessThan(0.1);
      expect(largest(b, r)).toBeGreaterThan(0.25);
    } finally {
      await Promise.all([merged.close(), runtime.close(), base.close()]);
      vi.unstubAllEnvs();
    }
  });
});
