import { open, type FileHandle } from "node:fs/promises";
import { halfToFloat } from "../../models/dequantize.js";
import { floatToHalf } from "../../models/requantize.js";

/**
 * llama.cpp's sequence-state file (`llama_state_seq_save_file`, node-llama-cpp's
 * `LlamaContextSequence.saveStateToFile`), read and written for option lines evaluated in windows
 * (windowed-lead.ts, docs/decisions/113). Only the layout this engine's contexts write is read:
 * format version 3, the cells in one KV stream, each cell in one sequence, f16 keys, values not
 * transposed (flash attention on) and no cell extensions (a model with plain RoPE positions).
 * Anything else throws a {@link StateFormatError}, and the engine evaluates without windows.
 *
 * The layout, from llama.cpp's `llama_state_seq_save_file` and `llama_kv_cache::state_write`:
 * u32 magic, u32 version, u32 token count, i32 tokens; u32 stream count; per stream u32 cell
 * count (0: nothing more for that stream), then per cell i32 position, u32 sequence count (1),
 * i32 sequence id; u32 values transposed (0), u32 layer count; per layer the keys (i32 ggml type,
 * u64 bytes a row, one row a cell), then per layer the values, laid out alike.
 */

/** A state file this engine does not know how to merge; windows are then not used. */
export class StateFormatError extends Error {}

/** One layer's keys or values in a state file: a row of `rowBytes` a cell, cells in file order. */
export interface RowsLayout {
  /** ggml type of the rows: 1 (`GGML_TYPE_F16`) for keys. */
  readonly type: number;
  readonly rowBytes: number;
}

/** Where a state file's parts lie, and what its header says. */
export interface StateLayout {
  readonly magic: number;
  readonly version: number;
  readonly tokens: readonly number[];
  /** Streams in the file (one per sequence of the context); all but `stream` are empty. */
  readonly streams: number;
  readonly stream: number;
  /** Each cell's position, in file order. */
  readonly positions: Int32Array;
  /** Each cell's sequence id (the same for all). */
  readonly sequenceId: number;
  /** Per layer the keys, then per layer the values. */
  readonly rows: readonly RowsLayout[];
  /** Layers (`rows.length / 2`). */
  readonly layers: number;
}

/** The cells of a state, to copy from: read whole into memory, or from its file. */
export interface StateCells extends StateLayout {
  /**
   * Rows `k` (of {@link StateLayout.rows}) of the cells `[from, to)` in file order, `rowBytes`
   * each. The buffer is only valid until the next call.
   */
  rowsOf(k: number, from: number, to: number): Promise<Buffer>;
}

/** One layer's keys or values read into memory. */
export interface StateRows extends RowsLayout {
  readonly data: Buffer;
}

/** A sequence-state file read whole into memory. */
export interface SequenceState extends StateCells {
  /** Per layer. */
  readonly keys: readonly StateRows[];
  readonly values: readonly StateRows[];
}

/** The ggml type of f16 rows. */
const GGML_TYPE_F16 = 1;

/** A read the layout parser asks for: `[offset, bytes]`; it is given those bytes back. */
type Read = readonly [offset: number, bytes: number];

/**
 * The layout of a state file, parsed from the reads it asks for (so that one parser serves a
 * buffer and a file): returns the layout, each rows block's offset, and the file's length.
 * @throws {@link StateFormatError} for any layout but the one described above
 */
function* layoutOf(): Generator<
  Read,
  { layout: StateLayout; offsets: number[]; length: number },
  Buffer
> {
  let at = 0;
  const read = function* (bytes: number): Generator<Read, Buffer, Buffer> {
    const buffer = yield [at, bytes];
    at += bytes;
    return buffer;
  };
  const u32 = function* () {
    return (yield* read(4)).readUInt32LE(0);
  };
  const magic = yield* u32();
  const version = yield* u32();
  if (version !== 3) throw new StateFormatError(`state format version ${version}, not 3`);
  const tokenCount = yield* u32();
  const tokenBytes = yield* read(4 * tokenCount);
  const tokens = Array.from({ length: tokenCount }, (_, i) => tokenBytes.readInt32LE(4 * i));
  const streams = yield* u32();
  let found: Omit<StateLayout, "magic" | "version" | "tokens" | "streams"> | undefined;
  const offsets: number[] = [];
  for (let stream = 0; stream < streams; stream++) {
    const cells = yield* u32();
    if (cells === 0) continue;
    if (found) throw new StateFormatError("cells in two KV streams");
    const cellBytes = yield* read(12 * cells);
    const positions = new Int32Array(cells);
    let sequenceId = -1;
    for (let c = 0; c < cells; c++) {
      positions[c] = cellBytes.readInt32LE(12 * c);
      if (cellBytes.readUInt32LE(12 * c + 4) !== 1)
        throw new StateFormatError("a cell in several sequences");
      const id = cellBytes.readInt32LE(12 * c + 8);
      if (c > 0 && id !== sequenceId) throw new StateFormatError("cells of two sequences");
      sequenceId = id;
    }
    if ((yield* u32()) !== 0) throw new StateFormatError("transposed values (flash attention off)");
    const layers = yield* u32();
    const rows: RowsLayout[] = [];
    for (let k = 0; k < 2 * layers; k++) {
      const head = yield* read(12);
      const rowBytes = Number(head.readBigUInt64LE(4));
      rows.push({ type: head.readInt32LE(0), rowBytes });
      offsets.push(at);
      at += rowBytes * cells;
    }
    if (rows.slice(0, layers).some((k) => k.type !== GGML_TYPE_F16))
      throw new StateFormatError("keys not f16");
    found = { stream, positions, sequenceId, rows, layers };
  }
  if (!found) throw new StateFormatError("no cells");
  return { layout: { magic, version, tokens, streams, ...found }, offsets, length: at };
}

/**
 * Parses a sequence-state file read whole into memory.
 * @throws {@link StateFormatError} for any layout but the one described above
 */
export function parseSequenceState(buffer: Buffer): SequenceState {
  const parser = layoutOf();
  let step = parser.next(Buffer.alloc(0));
  while (!step.done) {
    const [at, bytes] = step.value;
    if (at + bytes > buffer.length) throw new StateFormatError("the state file ends early");
    step = parser.next(buffer.subarray(at, at + bytes));
  }
  const { layout, offsets, length } = step.value;
  if (length > buffer.length) throw new StateFormatError("the state file ends early");
  if (length < buffer.length)
    throw new StateFormatError(`${buffer.length - length} bytes left over`);
  const cells = layout.positions.length;
  const rows = layout.rows.map((r, k) => ({
    ...r,
    data: buffer.subarray(offsets[k], offsets[k]! + r.rowBytes * cells),
  }));
  return {
    ...layout,
    keys: rows.slice(0, layout.layers),
    values: rows.slice(layout.layers),
    rowsOf: async (k, from, to) =>
      rows[k]!.data.subarray(from * rows[k]!.rowBytes, to * rows[k]!.rowBytes),
  };
}

/**
 * A sequence-state file read in place ({@link openStateFile}); its `rowsOf` throws a
 * {@link StateFormatError} when the file ends early, and what reading it throws.
 */
export interface StateFile extends StateCells {
  /** Closes the file. */
  close(): Promise<void>;
}

/**
 * Opens a state file and reads its layout; its rows are read block by block as they are copied,
 * so that no more than one block of rows (a window's cells of one layer) is in memory at a time.
 * @throws {@link StateFormatError} for any layout but the one described above, or a file of
 *   another length than it says; what opening, `stat` and reading the file throw
 * @example
 * ```ts
 * const state = await openStateFile(path);
 * try { await writer.place(state, 0, prefixLength, 0, 0); } finally { await state.close(); }
 * ```
 */
export async function openStateFile(path: string): Promise<StateFile> {
  const file = await open(path, "r");
  try {
    const { size } = await file.stat();
    const parser = layoutOf();
    let step = parser.next(Buffer.alloc(0));
    while (!step.done) {
      const [at, bytes] = step.value;
      if (at + bytes > size) throw new StateFormatError("the state file ends early");
      const buffer = Buffer.alloc(bytes);
      await readFully(file, buffer, at);
      step = parser.next(buffer);
    }
    const { layout, offsets, length } = step.value;
    if (length !== size)
      throw new StateFormatError(
        length > size ? "the state file ends early" : `${size - length} bytes left over`,
      );
    let scratch = Buffer.alloc(0);
    return {
      ...layout,
      rowsOf: async (k, from, to) => {
        const { rowBytes } = layout.rows[k]!;
        const bytes = (to - from) * rowBytes;
        if (scratch.length < bytes) scratch = Buffer.alloc(bytes);
        const block = scratch.subarray(0, bytes);
        await readFully(file, block, offsets[k]! + from * rowBytes);
        return block;
      },
      close: () => file.close(),
    };
  } catch (error) {
    await file.close().catch(() => undefined);
    throw error;
  }
}

/**
 * Fills `buffer` from `file` at `position`, read after read.
 * @throws {@link StateFormatError} when the file ends first; what reading it throws
 */
async function readFully(file: FileHandle, buffer: Buffer, position: number): Promise<void> {
  for (let done = 0; done < buffer.length;) {
    const { bytesRead } = await file.read(buffer, done, buffer.length - done, position + done);
    if (bytesRead === 0) throw new StateFormatError("the state file ends early");
    done += bytesRead;
  }
}

/** Rotates one f16 key row in place from position p to p + shift. */
export type RopeShift = (row: Uint16Array, shift: number) => void;

/**
 * The key rotation of llama.cpp's `LLAMA_ROPE_TYPE_NORM` (LLaMA's RoPE): in each head of
 * `headDims` values, pairs (2i, 2i + 1) below `ropeDims` turn by the angle
 * p · base^(−2i / ropeDims); moving a key from position p to p + s is the turn by s · θᵢ
 * (Su et al. 2021, "RoFormer": the rotations compose), rounded back to f16 as ggml rounds.
 * @example
 * ```ts
 * const rotate = ropeShift({ base: 100000, ropeDims: 64, headDims: 64 });
 * rotate(row, 512); // the row's keys now stand 512 positions later
 * ```
 */
export function ropeShift(rope: {
  readonly base: number;
  readonly ropeDims: number;
  readonly headDims: number;
}): RopeShift {
  const { base, ropeDims, headDims } = rope;
  const theta = Float64Array.from(
    { length: ropeDims / 2 },
    (_, i) => base ** ((-2 * i) / ropeDims),
  );
  const turns = new Map<number, Float32Array>();
  return (row, shift) => {
    let turn = turns.get(shift);
    if (!turn) {
      turn = new Float32Array(ropeDims);
      for (let i = 0; i < ropeDims / 2; i++) {
        turn[2 * i] = Math.cos(shift * theta[i]!);
        turn[2 * i + 1] = Math.sin(shift * theta[i]!);
      }
      if (turns.size > 4096) turns.clear();
      turns.set(shift, turn);
    }
    for (let head = 0; head < row.length; head += headDims)
      for (let j = 0; j < ropeDims; j += 2) {
        const x0 = F16_TO_F32[row[head + j]!]!;
        const x1 = F16_TO_F32[row[head + j + 1]!]!;
        const c = turn[j]!;
        const s = turn[j + 1]!;
        row[head + j] = floatToHalf(x0 * c - x1 * s);
        row[head + j + 1] = floatToHalf(x0 * s + x1 * c);
      }
  };
}

/** Every f16 bit pattern as a number, for the rotation's inner loop. */
const F16_TO_F32 = Float32Array.from({ length: 65536 }, (_, h) => halfToFloat(h));
