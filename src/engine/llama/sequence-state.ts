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

/** One layer's keys or values: a row of `rowBytes` a cell, cells in file order. */
export interface StateRows {
  /** ggml type of the rows: 1 (`GGML_TYPE_F16`) for keys. */
  readonly type: number;
  readonly rowBytes: number;
  readonly data: Buffer;
}

/** A parsed sequence-state file. */
export interface SequenceState {
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
  /** Per layer. */
  readonly keys: readonly StateRows[];
  readonly values: readonly StateRows[];
}

/** The ggml type of f16 rows. */
const GGML_TYPE_F16 = 1;

/**
 * Parses a sequence-state file.
 * @throws {@link StateFormatError} for any layout but the one described above
 */
export function parseSequenceState(buffer: Buffer): SequenceState {
  let at = 0;
  const need = (bytes: number) => {
    if (at + bytes > buffer.length) throw new StateFormatError("the state file ends early");
  };
  const u32 = () => (need(4), (at += 4), buffer.readUInt32LE(at - 4));
  const i32 = () => (need(4), (at += 4), buffer.readInt32LE(at - 4));
  const magic = u32();
  const version = u32();
  if (version !== 3) throw new StateFormatError(`state format version ${version}, not 3`);
  const tokenCount = u32();
  need(4 * tokenCount);
  const tokens = Array.from({ length: tokenCount }, () => i32());
  const streams = u32();
  let found: Omit<SequenceState, "magic" | "version" | "tokens" | "streams"> | undefined;
  for (let stream = 0; stream < streams; stream++) {
    const cells = u32();
    if (cells === 0) continue;
    if (found) throw new StateFormatError("cells in two KV streams");
    const positions = new Int32Array(cells);
    let sequenceId = -1;
    for (let c = 0; c < cells; c++) {
      positions[c] = i32();
      if (u32() !== 1) throw new StateFormatError("a cell in several sequences");
      const id = i32();
      if (c > 0 && id !== sequenceId) throw new StateFormatError("cells of two sequences");
      sequenceId = id;
    }
    if (u32() !== 0) throw new StateFormatError("transposed values (flash attention off)");
    const layers = u32();
    const rows = (): StateRows[] =>
      Array.from({ length: layers }, () => {
        const type = i32();
        need(8);
        const rowBytes = Number(buffer.readBigUInt64LE(at));
        at += 8;
        need(rowBytes * cells);
        const data = buffer.subarray(at, at + rowBytes * cells);
        at += rowBytes * cells;
        return { type, rowBytes, data };
      });
    const keys = rows();
    const values = rows();
    if (keys.some((k) => k.type !== GGML_TYPE_F16)) throw new StateFormatError("keys not f16");
    found = { stream, positions, sequenceId, keys, values };
  }
  if (!found) throw new StateFormatError("no cells");
  if (at !== buffer.length) throw new StateFormatError(`${buffer.length - at} bytes left over`);
  return { magic, version, tokens, streams, ...found };
}

/**
 * The cell holding each position of `[from, to)` in `state`, in position order.
 * @throws {@link StateFormatError} when a position in the range is missing or held twice
 */
function cellsAt(state: SequenceState, from: number, to: number): Int32Array {
  const slot = new Int32Array(Math.max(0, to - from)).fill(-1);
  state.positions.forEach((position, cell) => {
    if (position < from || position >= to) return;
    if (slot[position - from] !== -1) throw new StateFormatError(`two cells at ${position}`);
    slot[position - from] = cell;
  });
  if (slot.includes(-1)) throw new StateFormatError(`a position in [${from}, ${to}) is missing`);
  return slot;
}

/** Rotates one f16 key row in place from position p to p + shift. */
export type RopeShift = (row: Uint16Array, shift: number) => void;

/**
 * One sequence-state file written in place, cell range by cell range, so that the windows of a
 * lead go into it as each is evaluated and no copy of them is kept apart (the buffer is allocated
 * once, whole: one cell a token).
 * @example
 * ```ts
 * const writer = new StateWriter(state, tokens, rotate);
 * writer.place(state, 0, prefixLength, 0, 0); // the prefix's cells, where they are
 * writer.place(window, prefixLength, prefixLength + 512, prefixLength + 512, 512); // moved and turned
 * await writeFile(path, writer.finish());
 * ```
 */
export class StateWriter {
  private readonly out: Buffer;
  /** Byte offset of the first cell's position. */
  private readonly cellsOffset: number;
  /** Byte offset of each layer's key rows, then each layer's value rows. */
  private readonly rowsOffset: number[] = [];
  private readonly rowBytes: number[];
  private readonly filled: Uint8Array;

  /**
   * @param header - a state of the layout to write (magic, version, streams, sequence id, rows)
   * @param tokens - the file's tokens: one cell each, in order
   * @param rotate - turns a key row from one position to another (`ropeShift`)
   */
  constructor(
    private readonly header: SequenceState,
    tokens: readonly number[],
    private readonly rotate: RopeShift,
  ) {
    const cells = tokens.length;
    const rows = [...header.keys, ...header.values];
    this.rowBytes = rows.map((r) => r.rowBytes);
    const rowsBytes = rows.reduce((n, r) => n + 12 + r.rowBytes * cells, 0);
    // Magic, version, token count, tokens, stream count, a cell count a stream, cells, values
    // transposed and layer count, rows.
    const size = 16 + 4 * cells + 4 * header.streams + 12 * cells + 8 + rowsBytes;
    // Zeroed: a cell never written holds zeros, not what the process had in that memory.
    const out = (this.out = Buffer.alloc(size));
    this.filled = new Uint8Array(cells);
    let at = 0;
    const u32 = (v: number) => (at = out.writeUInt32LE(v, at));
    u32(header.magic);
    u32(header.version);
    u32(cells);
    for (const token of tokens) at = out.writeInt32LE(token, at);
    u32(header.streams);
    for (let stream = 0; stream < header.stream; stream++) u32(0);
    u32(cells);
    this.cellsOffset = at;
    at += 12 * cells;
    u32(0);
    u32(header.keys.length);
    for (const r of rows) {
      at = out.writeInt32LE(r.type, at);
      at = out.writeBigUInt64LE(BigInt(r.rowBytes), at);
      this.rowsOffset.push(at);
      at += r.rowBytes * cells;
    }
    for (let stream = header.stream + 1; stream < header.streams; stream++) u32(0);
    if (at !== size) throw new RangeError(`laid out ${at} of ${size} bytes`);
  }

  /**
   * Copies the cells of `state` at positions `[from, to)`, in position order, to cells `at`, `at + 1`,
   * …, at their positions plus `shift`, their keys turned by as much.
   * Cells count as written only once their rows are in: a call that throws leaves its cells
   * unwritten, and {@link finish} refuses the file.
   * @throws {@link StateFormatError} when a position in the range is missing or held twice, when
   *   the rows differ in layout from the header's, or when one of the cells is written already;
   *   `RangeError` for cells past the file's; what `rotate` throws
   */
  place(state: SequenceState, from: number, to: number, at: number, shift: number): void {
    const count = Math.max(0, to - from);
    if (at < 0 || at + count > this.filled.length)
      throw new RangeError(`cells [${at}, ${at + count}) of ${this.filled.length}`);
    const rows = [...state.keys, ...state.values];
    if (
      rows.length !== this.rowBytes.length ||
      rows.some((r, i) => r.rowBytes !== this.rowBytes[i] || r.type !== this.typeOf(i))
    )
      throw new StateFormatError("rows of two layouts");
    if (rows.some((r) => r.data.length !== r.rowBytes * state.positions.length))
      throw new StateFormatError("rows not one a cell");
    const slot = cellsAt(state, from, to);
    const taken = this.filled.subarray(at, at + count).indexOf(1);
    if (taken !== -1) throw new StateFormatError(`cell ${at + taken} written twice`);
    for (let i = 0; i < count; i++) {
      let cellAt = this.cellsOffset + 12 * (at + i);
      cellAt = this.out.writeInt32LE(from + i + shift, cellAt);
      cellAt = this.out.writeUInt32LE(1, cellAt);
      this.out.writeInt32LE(this.header.sequenceId, cellAt);
    }
    const keys = state.keys.length;
    rows.forEach((r, k) => {
      const bytes = r.rowBytes;
      const base = this.rowsOffset[k]! + at * bytes;
      slot.forEach((cell, i) =>
        r.data.copy(this.out, base + i * bytes, cell * bytes, (cell + 1) * bytes),
      );
      if (k < keys && shift !== 0)
        for (let i = 0; i < count; i++)
          this.rotate(
            new Uint16Array(this.out.buffer, this.out.byteOffset + base + i * bytes, bytes / 2),
            shift,
          );
    });
    this.filled.fill(1, at, at + count);
  }

  /**
   * The file, once every cell is written.
   * @throws {@link StateFormatError} naming the first cell not written
   */
  finish(): Buffer {
    const missing = this.filled.indexOf(0);
    if (missing !== -1) throw new StateFormatError(`cell ${missing} not written`);
    return this.out;
  }

  /** The ggml type of rows `i` (keys, then values) in the header. */
  private typeOf(i: number): number {
    const keys = this.header.keys.length;
    return (i < keys ? this.header.keys[i] : this.header.values[i - keys])!.type;
  }
}

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
