import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LIST_WINDOW_TOKENS, listWindows } from "../src/decision/list-windows.js";
import { leadWindows, windowsAgree } from "../src/engine/decode/lead-windows.js";
import { ropeShiftOf } from "../src/engine/llama/windowed-lead.js";
import { halfToFloat } from "../src/models/dequantize.js";
import { floatToHalf } from "../src/models/requantize.js";
import {
  openStateFile,
  parseSequenceState,
  ropeShift,
  StateFormatError,
  type RopeShift,
  type SequenceState,
} from "../src/engine/llama/sequence-state.js";
import { StateWriter } from "../src/engine/llama/state-writer.js";
import { cellsOf } from "./support/state-cells.js";

/**
 * Option lines in windows (docs/decisions/113), the parts that need no model: where a question
 * is cut, which cells two layouts share, and llama.cpp's sequence-state file read, merged and
 * written back. The engine's use of them on the real model: test/windowed-lead.test.ts.
 */

describe("listWindows", () => {
  // One token a word, a line break its own token: "a b\n" → [a, b, \n].
  const vocabulary = new Map<string, number>();
  const tokenize = async (text: string) =>
    text
      .split(/( |\n)/)
      .filter((w) => w !== "" && w !== " ")
      .map((w) => vocabulary.get(w) ?? vocabulary.set(w, vocabulary.size + 1).get(w)!);
  const lines = (count: number, words: number) =>
    Array.from({ length: count }, (_, i) => Array.from({ length: words }, () => `w${i}`).join(" "));

  it("packs every line but the last into windows of whole lines", async () => {
    // 300 lines of 9 words and a break: 10 tokens a line, 3,000 listed tokens.
    const text = [...lines(300, 9), "Which one?"].join("\n");
    const ends = (await listWindows(text, await tokenize(text), tokenize))!;
    expect(ends.at(-1)).toBe(3000);
    expect(ends.every((end) => end % 10 === 0)).toBe(true);
    const sizes = ends.map((end, i) => end - (i === 0 ? 0 : ends[i - 1]!));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(LIST_WINDOW_TOKENS);
    expect(sizes.slice(0, -1).every((size) => size > LIST_WINDOW_TOKENS - 10)).toBe(true);
  });

  it("joins a short last window to the one before", async () => {
    // 51 lines of 10 tokens a window: 5 windows of 510 tokens and 20 left over.
    const text = [...lines(257, 9), "Which one?"].join("\n");
    const ends = (await listWindows(text, await tokenize(text), tokenize))!;
    expect(ends.at(-1)).toBe(2570);
    expect(ends.at(-1)! - ends.at(-2)!).toBe(530);
  });

  it("leaves a short list whole, and a text its lines do not tokenize to", async () => {
    const short = [...lines(100, 9), "Which one?"].join("\n");
    expect(await listWindows(short, await tokenize(short), tokenize)).toBeUndefined();
    // Past the context, or past 4,096 lines, it is not cut line by line.
    const long = [...lines(300, 9), "Which one?"].join("\n");
    expect(await listWindows(long, await tokenize(long), tokenize, 2999)).toBeUndefined();
    const many = [...lines(5000, 1), "Which one?"].join("\n");
    let calls = 0;
    const counted = (text: string) => (calls++, tokenize(text));
    expect(await listWindows(many, await tokenize(many), counted)).toBeUndefined();
    expect(calls).toBe(0);
    const text = [...lines(300, 9), "Which one?"].join("\n");
    const merged = [...(await tokenize(text))];
    merged.splice(10, 2, 999);
    expect(await listWindows(text, merged, tokenize)).toBeUndefined();
  });
});

describe("leadWindows and windowsAgree", () => {
  it("keeps the windows that end within the lead's tiled part, two or more of at least 64 tokens", () => {
    expect(leadWindows([512, 1024, 1536], { tiled: 1100 })).toEqual([512, 1024]);
    expect(leadWindows([512, 1024, 1536], { tiled: 1536 })).toEqual([512, 1024, 1536]);
    // What is left of the tiled part after the windows is a tiled call of 64 or more.
    expect(leadWindows([512, 1024, 1536], { tiled: 1560 })).toEqual([512, 1024]);
    expect(leadWindows([512, 1024], { tiled: 800 })).toBeUndefined();
    expect(leadWindows([512, 560, 1024], { tiled: 2000 })).toBeUndefined();
    expect(leadWindows(undefined, { tiled: 2000 })).toBeUndefined();
  });

  it("says how far two layouts evaluate the same cells", () => {
    expect(windowsAgree([512, 1024], [512, 1024])).toBe(Infinity);
    expect(windowsAgree(undefined, undefined)).toBe(Infinity);
    // The first window is evaluated as without windows.
    expect(windowsAgree(undefined, [512, 1024])).toBe(512);
    expect(windowsAgree([512, 1024], undefined)).toBe(512);
    // From the same start, a window is the same as far as the shorter one goes.
    expect(windowsAgree([512, 1024, 1536], [512, 1024, 1600])).toBe(1536);
    // One goes on without windows where the other has one more: they part at its start.
    expect(windowsAgree([512, 1024, 1536], [512, 1024])).toBe(1024);
  });
});

/**
 * A state file of `cells` cells (positions from `first`, in file order `order` when given), 2
 * layers, rows of 8 bytes; in stream `stream` of `streams` (default 0 of 2), the others empty.
 */
function stateFile(
  cells: number,
  first = 0,
  options: {
    version?: number;
    transposed?: number;
    stream?: number;
    streams?: number;
    order?: number[];
  } = {},
) {
  const { stream = 0, streams = 2 } = options;
  const order = options.order ?? Array.from({ length: cells }, (_, c) => c);
  const parts: Buffer[] = [];
  const u32 = (v: number) => parts.push(Buffer.from(new Uint32Array([v]).buffer));
  u32(0x67677371);
  u32(options.version ?? 3);
  u32(cells);
  for (let c = 0; c < cells; c++) u32(100 + c);
  u32(streams);
  for (let s = 0; s < stream; s++) u32(0);
  u32(cells);
  for (const c of order) [first + c, 1, 0].forEach(u32);
  u32(options.transposed ?? 0);
  u32(2);
  for (let block = 0; block < 4; block++) {
    u32(1);
    parts.push(Buffer.from(new BigUint64Array([8n]).buffer));
    const rows = Buffer.alloc(8 * cells);
    // A cell's row says which block and position it is: file order follows `order`.
    for (let i = 0; i < rows.length; i += 2)
      rows.writeUInt16LE(floatToHalf(block + order[Math.floor(i / 8)]! / 10 + (i % 8) / 100), i);
    parts.push(rows);
  }
  for (let s = stream + 1; s < streams; s++) u32(0);
  return Buffer.concat(parts);
}

describe("sequence-state files", () => {
  let folder: string;
  let made = 0;
  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), "decisiond-state-"));
  });
  afterAll(async () => {
    await rm(folder, { recursive: true, force: true });
  });

  /** A writer of a new file in the test's folder. */
  const writerOf = (header: SequenceState, tokens: readonly number[], rotate: RopeShift) =>
    StateWriter.create(join(folder, `merged-${++made}`), header, tokens, rotate);
  /** The file `writer` wrote, once finished. */
  const written = async (writer: StateWriter) => {
    await writer.finish();
    return readFile(writer.path);
  };
  /** `buffer` as a file, opened in place. */
  const opened = async (buffer: Buffer) => {
    const path = join(folder, `source-${++made}`);
    await writeFile(path, buffer);
    return openStateFile(path);
  };

  it("reads a state and writes it back byte for byte, in any stream", async () => {
    for (const [stream, streams] of [
      [0, 1],
      [0, 2],
      [1, 3],
      [3, 4],
    ] as const) {
      const buffer = stateFile(5, 0, { stream, streams });
      const state = parseSequenceState(buffer);
      expect(state.positions).toEqual(Int32Array.from([0, 1, 2, 3, 4]));
      expect(state.stream).toBe(stream);
      const writer = await writerOf(state, state.tokens, () => {});
      await writer.place(state, 0, 5, 0, 0);
      expect((await written(writer)).equals(buffer)).toBe(true);
      // The same from the file, read in place.
      const file = await opened(buffer);
      const fromFile = await writerOf(state, state.tokens, () => {});
      await fromFile.place(file, 0, 5, 0, 0);
      await file.close();
      expect((await written(fromFile)).equals(buffer)).toBe(true);
    }
  });

  it("reads a file's layout in place, and its rows block by block", async () => {
    const buffer = stateFile(6, 0, { order: [2, 0, 1, 5, 4, 3] });
    const state = parseSequenceState(buffer);
    const file = await opened(buffer);
    try {
      expect(file.positions).toEqual(state.positions);
      expect(file.tokens).toEqual(state.tokens);
      expect(file.rows).toEqual(state.rows);
      for (let k = 0; k < 4; k++)
        expect(await file.rowsOf(k, 1, 4)).toEqual(await state.rowsOf(k, 1, 4));
    } finally {
      await file.close();
    }
    await expect(opened(buffer.subarray(0, 100))).rejects.toThrow(/ends early/);
    await expect(opened(Buffer.concat([buffer, Buffer.alloc(4)]))).rejects.toThrow(/left over/);
    await expect(opened(stateFile(3, 0, { transposed: 1 }))).rejects.toThrow(/transposed/);
  });

  it("writes cells stored out of order in position order, rows with them", async () => {
    const shuffled = parseSequenceState(stateFile(5, 0, { order: [2, 0, 1, 4, 3] }));
    const sorted = parseSequenceState(stateFile(5));
    const writer = await writerOf(shuffled, sorted.tokens, () => {});
    await writer.place(shuffled, 0, 5, 0, 0);
    const state = parseSequenceState(await written(writer));
    expect([...state.positions]).toEqual([0, 1, 2, 3, 4]);
    for (let layer = 0; layer < 2; layer++) {
      expect(state.keys[layer]!.data).toEqual(sorted.keys[layer]!.data);
      expect(state.values[layer]!.data).toEqual(sorted.values[layer]!.data);
    }
  });

  it("refuses a layout it cannot merge, naming what differs", () => {
    expect(() => parseSequenceState(stateFile(3, 0, { version: 2 }))).toThrow(/version 2/);
    expect(() => parseSequenceState(stateFile(3, 0, { transposed: 1 }))).toThrow(/transposed/);
    expect(() => parseSequenceState(stateFile(3).subarray(0, 100))).toThrow(StateFormatError);
    expect(() => parseSequenceState(Buffer.concat([stateFile(3), Buffer.alloc(4)]))).toThrow(
      /left over/,
    );
  });

  it("merges cells in place, moving and turning only the keys of those shifted", async () => {
    const a = parseSequenceState(stateFile(4));
    const b = parseSequenceState(stateFile(3, 4));
    const turned: number[] = [];
    const writer = await writerOf(a, [1, 2, 3, 4, 5, 6, 7], (row, shift) => {
      turned.push(shift);
      row.fill(0);
    });
    await writer.place(a, 0, 4, 0, 0);
    await writer.place(b, 4, 7, 4, 10);
    const state = parseSequenceState(await written(writer));
    expect(state.tokens).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect([...state.positions]).toEqual([0, 1, 2, 3, 14, 15, 16]);
    // Three keys turned in each of the two layers; the values moved as they were.
    expect(turned).toEqual([10, 10, 10, 10, 10, 10]);
    expect(state.keys[0]!.data.subarray(32).every((byte) => byte === 0)).toBe(true);
    expect(state.values[1]!.data.subarray(32)).toEqual(b.values[1]!.data);
    await expect(cellsOf(a, 2, 6)).rejects.toThrow(/missing/);
  });

  it("writes windows in place as they come, and refuses a cell written twice or left out", async () => {
    const a = parseSequenceState(stateFile(6));
    const b = parseSequenceState(stateFile(6));
    const writer = await writerOf(a, [1, 2, 3, 4, 5, 6, 7, 8], (row) => row.fill(0));
    // A prefix of 2 cells, then two windows of 3 each evaluated right after it.
    await writer.place(a, 0, 2, 0, 0);
    await writer.place(a, 2, 5, 2, 0);
    await expect(writer.finish()).rejects.toThrow(/cell 5 not written/);
    await expect(writer.place(b, 2, 5, 4, 3)).rejects.toThrow(/written twice/);
    // Discarded, the file is gone.
    await writer.discard();
    await expect(stat(writer.path)).rejects.toThrow(/ENOENT/);
    // A place that fails part way leaves its cells unwritten: the file is refused, not garbage.
    const failing = await writerOf(a, [1, 2], () => {
      throw new Error("no turn");
    });
    await failing.place(a, 0, 1, 0, 0);
    await expect(failing.place(a, 1, 2, 1, 5)).rejects.toThrow("no turn");
    await expect(failing.finish()).rejects.toThrow(/cell 1 not written/);
    await failing.discard();
    const writer2 = await writerOf(a, [1, 2, 3, 4, 5, 6, 7, 8], (row) => row.fill(0));
    await writer2.place(a, 0, 2, 0, 0);
    await writer2.place(a, 2, 5, 2, 0);
    await writer2.place(b, 2, 5, 5, 3);
    const state = parseSequenceState(await written(writer2));
    expect([...state.positions]).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(state.tokens).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    // The second window's keys turned (here: zeroed), its values as evaluated.
    expect(state.keys[1]!.data.subarray(5 * 8).every((byte) => byte === 0)).toBe(true);
    expect(state.keys[1]!.data.subarray(0, 5 * 8)).toEqual(a.keys[1]!.data.subarray(0, 5 * 8));
    expect(state.values[0]!.data.subarray(5 * 8)).toEqual(b.values[0]!.data.subarray(2 * 8, 5 * 8));
    await expect(writer2.place(a, 4, 7, 0, 0)).rejects.toThrow(/missing/);
  });

  it("turns keys by RoPE: two shifts make their sum, and back is where they were", () => {
    const rotate = ropeShift({ base: 10000, ropeDims: 4, headDims: 4 });
    const values = [1, 0.5, -2, 0.25, 0.75, -1, 3, 2];
    const row = Uint16Array.from(values, floatToHalf);
    rotate(row, 7);
    // Pair (0, 1) turns by 7 radians, pair (2, 3) by 7 · 10000^(−1/2).
    const [c, s] = [Math.cos(7), Math.sin(7)];
    expect(halfToFloat(row[0]!)).toBeCloseTo(1 * c - 0.5 * s, 2);
    expect(halfToFloat(row[1]!)).toBeCloseTo(1 * s + 0.5 * c, 2);
    rotate(row, 5);
    const once = Uint16Array.from(values, floatToHalf);
    rotate(once, 12);
    [...row].forEach((h, i) => expect(halfToFloat(h)).toBeCloseTo(halfToFloat(once[i]!), 2));
    rotate(row, -12);
    [...row].forEach((h, i) => expect(halfToFloat(h)).toBeCloseTo(values[i]!, 2));
    expect(floatToHalf(65504)).toBe(0x7bff);
    expect(floatToHalf(1e6)).toBe(0x7c00);
    expect(halfToFloat(floatToHalf(-0.333))).toBeCloseTo(-0.333, 3);
  });
});

describe("ropeShiftOf", () => {
  /** A model's file info as node-llama-cpp reads it, with `llama` metadata and tensor names. */
  const model = (metadata: Record<string, unknown>, tensors: string[] | undefined) =>
    ({
      fileInfo: {
        metadata,
        ...(tensors ? { tensorInfo: tensors.map((name) => ({ name })) } : {}),
      },
    }) as unknown as Parameters<typeof ropeShiftOf>[0];
  const llama = {
    embedding_length: 576,
    attention: { head_count: 9 },
    rope: { freq_base: 100000, dimension_count: 64 },
  };
  const plain = ["token_embd.weight", "blk.0.attn_k.weight"];

  it("turns keys for a LLaMA-architecture file with plain RoPE only", () => {
    expect(ropeShiftOf(model({ general: { architecture: "llama" }, llama }, plain))).toBeTypeOf(
      "function",
    );
    // Llama 3.1 and later scale RoPE by a tensor of factors.
    const factors = [...plain, "rope_freqs.weight"];
    expect(
      ropeShiftOf(model({ general: { architecture: "llama" }, llama }, factors)),
    ).toBeUndefined();
    const scaled = { ...llama, rope: { ...llama.rope, scaling: { type: "linear" } } };
    expect(
      ropeShiftOf(model({ general: { architecture: "llama" }, llama: scaled }, plain)),
    ).toBeUndefined();
    const partial = { ...llama, rope: { ...llama.rope, dimension_count: 32 } };
    expect(
      ropeShiftOf(model({ general: { architecture: "llama" }, llama: partial }, plain)),
    ).toBeUndefined();
    expect(
      ropeShiftOf(model({ general: { architecture: "gemma3" }, gemma3: llama }, plain)),
    ).toBeUndefined();
    // Tensors not read: nothing says there are no factors.
    expect(
      ropeShiftOf(model({ general: { architecture: "llama" }, llama }, undefined)),
    ).toBeUndefined();
  });
});
