import { open, unlink, type FileHandle } from "node:fs/promises";
import {
  StateFormatError,
  type RopeShift,
  type StateCells,
  type StateLayout,
} from "./sequence-state.js";

/** What a {@link StateWriter} writes of a state's header. */
type StateHeader = Pick<
  StateLayout,
  "magic" | "version" | "streams" | "stream" | "sequenceId" | "rows" | "layers"
>;

/**
 * The cell holding each position of `[from, to)` in `state`, in position order.
 * @throws {@link StateFormatError} when a position in the range is missing or held twice
 */
function cellsAt(state: StateLayout, from: number, to: number): Int32Array {
  const slot = new Int32Array(Math.max(0, to - from)).fill(-1);
  state.positions.forEach((position, cell) => {
    if (position < from || position >= to) return;
    if (slot[position - from] !== -1) throw new StateFormatError(`two cells at ${position}`);
    slot[position - from] = cell;
  });
  if (slot.includes(-1)) throw new StateFormatError(`a position in [${from}, ${to}) is missing`);
  return slot;
}

/**
 * One sequence-state file written in place on disk, cell range by cell range, so that the windows
 * of a lead go into it as each is evaluated, and nothing of them is kept in memory: the file is
 * laid out whole at once (its rows zeros until written), and each range's rows are written
 * through a buffer of one rows block. Removing the file (in `/dev/shm`, memory) frees it at once,
 * where a buffer would wait for the garbage collector.
 * @example
 * ```ts
 * const writer = await StateWriter.create(path, state, tokens, rotate);
 * await writer.place(state, 0, prefixLength, 0, 0); // the prefix's cells, where they are
 * await writer.place(window, prefixLength, prefixLength + 512, prefixLength + 512, 512); // moved and turned
 * await writer.finish(); // path now holds the whole state
 * ```
 */
export class StateWriter {
  /** Byte offset of the first cell's position. */
  private readonly cellsOffset: number;
  /** Byte offset of each layer's key rows, then each layer's value rows. */
  private readonly rowsOffset: number[] = [];
  private readonly filled: Uint8Array;
  private scratch = Buffer.alloc(0);
  private closed = false;

  /** Bytes of the whole file. */
  readonly size: number;

  private constructor(
    /** The file written. */
    readonly path: string,
    private readonly file: FileHandle,
    private readonly header: StateHeader,
    cells: number,
    private readonly rotate: RopeShift,
  ) {
    const rowsBytes = header.rows.reduce((n, r) => n + 12 + r.rowBytes * cells, 0);
    // Magic, version, token count, tokens, stream count, a cell count a stream, cells, values
    // transposed and layer count, rows.
    this.size = 16 + 4 * cells + 4 * header.streams + 12 * cells + 8 + rowsBytes;
    this.cellsOffset = 16 + 4 * cells + 4 * header.stream + 4;
    let at = this.cellsOffset + 12 * cells + 8;
    for (const r of header.rows) {
      this.rowsOffset.push(at + 12);
      at += 12 + r.rowBytes * cells;
    }
    this.filled = new Uint8Array(cells);
  }

  /**
   * Creates (or truncates) the file at `path`, laid out for `tokens`: one cell each, in order,
   * with the layout of `header` (magic, version, streams, sequence id, rows).
   * @throws what `open` and writing throw (the file is removed then)
   */
  static async create(
    path: string,
    header: StateLayout,
    tokens: readonly number[],
    rotate: RopeShift,
  ): Promise<StateWriter> {
    // A copy of what is written of the header: nothing of the state it comes from is kept.
    const { magic, version, streams, stream, sequenceId, layers } = header;
    const rows = header.rows.map(({ type, rowBytes }) => ({ type, rowBytes }));
    const layout = { magic, version, streams, stream, sequenceId, layers, rows };
    const file = await open(path, "w+");
    const writer = new StateWriter(path, file, layout, tokens.length, rotate);
    try {
      await writer.layOut(tokens);
      return writer;
    } catch (error) {
      await writer.discard();
      throw error;
    }
  }

  /** Writes everything but the cells and rows, which stay zeros: a cell never written holds zeros. */
  private async layOut(tokens: readonly number[]): Promise<void> {
    const { header } = this;
    const cells = tokens.length;
    await this.file.truncate(this.size);
    const head = Buffer.alloc(this.cellsOffset);
    let at = 0;
    const u32 = (v: number) => (at = head.writeUInt32LE(v, at));
    u32(header.magic);
    u32(header.version);
    u32(cells);
    for (const token of tokens) at = head.writeInt32LE(token, at);
    u32(header.streams);
    for (let stream = 0; stream < header.stream; stream++) u32(0);
    u32(cells);
    await this.write(head, 0);
    const counts = Buffer.alloc(8);
    counts.writeUInt32LE(0, 0);
    counts.writeUInt32LE(header.layers, 4);
    await this.write(counts, this.cellsOffset + 12 * cells);
    for (const [k, r] of header.rows.entries()) {
      const rowHead = Buffer.alloc(12);
      rowHead.writeInt32LE(r.type, 0);
      rowHead.writeBigUInt64LE(BigInt(r.rowBytes), 4);
      await this.write(rowHead, this.rowsOffset[k]! - 12);
    }
  }

  /**
   * Copies the cells of `state` at positions `[from, to)`, in position order, to cells `at`, `at + 1`,
   * …, at their positions plus `shift`, their keys turned by as much.
   * Cells count as written only once their rows are in: a call that throws leaves its cells
   * unwritten, and {@link finish} refuses the file.
   * @throws {@link StateFormatError} when a position in the range is missing or held twice, when
   *   the rows differ in layout from the header's, or when one of the cells is written already;
   *   `RangeError` for cells past the file's; what `rotate`, reading and writing throw
   */
  async place(
    state: StateCells,
    from: number,
    to: number,
    at: number,
    shift: number,
  ): Promise<void> {
    const count = Math.max(0, to - from);
    if (at < 0 || at + count > this.filled.length)
      throw new RangeError(`cells [${at}, ${at + count}) of ${this.filled.length}`);
    const rows = this.header.rows;
    if (
      state.rows.length !== rows.length ||
      state.rows.some((r, i) => r.rowBytes !== rows[i]!.rowBytes || r.type !== rows[i]!.type)
    )
      throw new StateFormatError("rows of two layouts");
    const slot = cellsAt(state, from, to);
    const taken = this.filled.subarray(at, at + count).indexOf(1);
    if (taken !== -1) throw new StateFormatError(`cell ${at + taken} written twice`);
    if (count === 0) return;
    const cellBytes = Buffer.alloc(12 * count);
    for (let i = 0; i < count; i++) {
      cellBytes.writeInt32LE(from + i + shift, 12 * i);
      cellBytes.writeUInt32LE(1, 12 * i + 4);
      cellBytes.writeInt32LE(this.header.sequenceId, 12 * i + 8);
    }
    await this.write(cellBytes, this.cellsOffset + 12 * at);
    // The rows of the cells between the first and the last one the range takes, in file order.
    let first = Infinity;
    let last = 0;
    for (const cell of slot) {
      first = Math.min(first, cell);
      last = Math.max(last, cell + 1);
    }
    for (const [k, r] of rows.entries()) {
      const bytes = r.rowBytes;
      const block = await state.rowsOf(k, first, last);
      if (this.scratch.length < count * bytes) this.scratch = Buffer.alloc(count * bytes);
      const out = this.scratch.subarray(0, count * bytes);
      slot.forEach((cell, i) =>
        block.copy(out, i * bytes, (cell - first) * bytes, (cell - first + 1) * bytes),
      );
      if (k < this.header.layers && shift !== 0)
        for (let i = 0; i < count; i++)
          this.rotate(new Uint16Array(out.buffer, out.byteOffset + i * bytes, bytes / 2), shift);
      await this.write(out, this.rowsOffset[k]! + at * bytes);
    }
    this.filled.fill(1, at, at + count);
  }

  /**
   * Closes the file once every cell is written; {@link path} then holds the whole state.
   * @throws {@link StateFormatError} naming the first cell not written (the file stays open:
   *   {@link discard} it)
   */
  async finish(): Promise<void> {
    const missing = this.filled.indexOf(0);
    if (missing !== -1) throw new StateFormatError(`cell ${missing} not written`);
    await this.close();
  }

  /** Closes the file, if open, and removes it; never throws. */
  async discard(): Promise<void> {
    await this.close().catch(() => undefined);
    await unlink(this.path).catch(() => undefined);
  }

  private async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.file.close();
  }

  /** Writes all of `buffer` at `position`. */
  private async write(buffer: Buffer, position: number): Promise<void> {
    let done = 0;
    while (done < buffer.length) {
      const { bytesWritten } = await this.file.write(
        buffer,
        done,
        buffer.length - done,
        position + done,
      );
      done += bytesWritten;
    }
  }
}
