/**
 * A guard in front of the zstd decoder (fzstd): it walks frame and block headers as the bytes
 * arrive, without decoding, and refuses a frame before the decoder allocates its window when the
 * window is larger than decisiond decodes, when the frame declares more content than the body
 * limit (or whose raw and RLE blocks hold more), or when the frame has more blocks than any real
 * compressor writes for a body that fits (413 when they are compressed blocks, whose compressor
 * filled them: the content is past the limit; 400 when they are small raw ones, a trick).
 * fzstd allocates the window the frame header declares (up to 2 GiB) and moves the whole window
 * once per block, so a tiny unchecked frame can cost seconds of work and gigabytes of memory.
 * Why these bounds: docs/decisions/034-zstd-window-bound.md
 */

/** Largest window of a frame that is not single-segment: 8 MiB, what zstd levels 1–19 use. */
export const MAX_ZSTD_WINDOW = 8 * 1024 * 1024;

/** zstd's largest block content (128 KiB). */
const MAX_BLOCK = 128 * 1024;

/** Why a frame was refused: `too_large` → 413, `window` / `blocks` → 400. */
export class ZstdFrameError extends Error {
  override readonly name = "ZstdFrameError";
  constructor(
    readonly kind: "too_large" | "window" | "blocks",
    message: string,
  ) {
    super(message);
  }
}

type State =
  | { at: "magic" }
  | { at: "frame-header" }
  | { at: "block-header" }
  | { at: "skip"; left: number; then: "magic" | "block-header" | "checksum" }
  | { at: "skippable-size" }
  | { at: "opaque" };

/**
 * Checks a zstd stream chunk by chunk.
 * @example
 * ```ts
 * const guard = new ZstdFrameGuard(16 << 20);
 * guard.push(chunk); // throws ZstdFrameError for a refused frame
 * ```
 */
export class ZstdFrameGuard {
  private state: State = { at: "magic" };
  private pending: number[] = [];
  private window = 0;
  private checksum = false;
  private blocks = 0;
  private maxBlocks = 0;
  /** Of this frame: content bytes its raw and RLE blocks declare, and its compressed blocks. */
  private declared = 0;
  private compressed = 0;

  /** @param bodyLimit - the largest decompressed body, in bytes */
  constructor(private readonly bodyLimit: number) {}

  /**
   * Inspects the next bytes of the stream.
   * @throws {@link ZstdFrameError} for a refused frame
   */
  push(chunk: Uint8Array): void {
    let i = 0;
    while (i < chunk.length) {
      const state = this.state;
      if (state.at === "opaque") return; // not zstd: the decoder reports it
      if (state.at === "skip") {
        const n = Math.min(state.left, chunk.length - i);
        i += n;
        state.left -= n;
        if (state.left === 0) this.after(state.then);
        continue;
      }
      this.pending.push(chunk[i++]!);
      this.step();
    }
  }

  private after(next: "magic" | "block-header" | "checksum"): void {
    if (next === "checksum")
      this.state = this.checksum ? { at: "skip", left: 4, then: "magic" } : { at: "magic" };
    else this.state = { at: next };
  }

  /** Consumes `pending` when it holds a whole header. */
  private step(): void {
    const p = this.pending;
    switch (this.state.at) {
      case "magic": {
        if (p.length < 4) return;
        const magic = (p[0]! | (p[1]! << 8) | (p[2]! << 16) | (p[3]! << 24)) >>> 0;
        this.pending = [];
        if (magic === 0xfd2fb528) this.state = { at: "frame-header" };
        else if (magic >>> 4 === 0x184d2a5) this.state = { at: "skippable-size" };
        else this.state = { at: "opaque" };
        return;
      }
      case "skippable-size": {
        if (p.length < 4) return;
        const size = (p[0]! | (p[1]! << 8) | (p[2]! << 16) | (p[3]! << 24)) >>> 0;
        this.pending = [];
        this.state = size === 0 ? { at: "magic" } : { at: "skip", left: size, then: "magic" };
        return;
      }
      case "frame-header": {
        const descriptor = p[0]!;
        const singleSegment = (descriptor >> 5) & 1;
        const fcsFlag = descriptor >> 6;
        const didBytes = [0, 1, 2, 4][descriptor & 3]!;
        const fcsBytes = fcsFlag === 0 ? singleSegment : 1 << fcsFlag;
        const length = 1 + (singleSegment ? 0 : 1) + didBytes + fcsBytes;
        if (p.length < length) return;
        this.pending = [];
        let contentSize: number | undefined;
        if (fcsBytes > 0) {
          let value = 0;
          const at = length - fcsBytes;
          for (let b = fcsBytes - 1; b >= 0; b--) value = value * 256 + p[at + b]!;
          contentSize = fcsBytes === 2 ? value + 256 : value;
        }
        if (contentSize !== undefined && contentSize > this.bodyLimit)
          throw new ZstdFrameError(
            "too_large",
            `the zstd frame declares ${contentSize} bytes of content, more than the body limit of ${this.bodyLimit}`,
          );
        if (singleSegment) this.window = contentSize!;
        else {
          const w = p[1]!;
          const base = 2 ** (10 + (w >> 3));
          this.window = base + (base / 8) * (w & 7);
          if (this.window > MAX_ZSTD_WINDOW)
            throw new ZstdFrameError(
              "window",
              `the zstd frame's window is ${this.window} bytes; decisiond decodes windows of up to ${MAX_ZSTD_WINDOW} bytes (8 MiB, zstd levels 1-19 without --long)`,
            );
        }
        this.checksum = ((descriptor >> 2) & 1) === 1;
        this.blocks = 0;
        this.declared = 0;
        this.compressed = 0;
        // A compressor fills blocks of min(window, 128 KiB); twice that many, and a few more for
        // small frames, is more than any real one writes for a body within the limit.
        const blockSize = Math.max(1, Math.min(this.window, MAX_BLOCK));
        this.maxBlocks = 2 * Math.ceil(this.bodyLimit / blockSize) + 16;
        this.state = { at: "block-header" };
        return;
      }
      case "block-header": {
        if (p.length < 3) return;
        const header = p[0]! | (p[1]! << 8) | (p[2]! << 16);
        this.pending = [];
        const last = header & 1;
        const type = (header >> 1) & 3;
        const size = header >>> 3;
        // Raw and RLE blocks say how much content they hold; compressed ones do not.
        if (type === 2) this.compressed++;
        else if ((this.declared += size) > this.bodyLimit)
          throw new ZstdFrameError(
            "too_large",
            `the zstd frame's blocks hold more than the body limit of ${this.bodyLimit} bytes`,
          );
        if (++this.blocks > this.maxBlocks)
          // A compressor fills every block but the last: that many compressed blocks hold more
          // than the limit (a 64 MiB stream of zeros, say); that many small raw ones are a trick.
          throw this.compressed * 2 > this.blocks
            ? new ZstdFrameError(
                "too_large",
                `the zstd frame has more than ${this.maxBlocks} blocks: more content than the body limit of ${this.bodyLimit} bytes`,
              )
            : new ZstdFrameError(
                "blocks",
                `the zstd frame has more than ${this.maxBlocks} blocks, more than a compressor writes for a body within the limit`,
              );
        const content = type === 1 ? 1 : size;
        const then = last ? "checksum" : "block-header";
        if (content === 0) this.after(then);
        else this.state = { at: "skip", left: content, then };
        return;
      }
    }
  }
}
