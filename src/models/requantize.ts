import { createHash } from "node:crypto";
import { open, readFile } from "node:fs/promises";
import { BLOCK_FORMATS, GgmlType, halfToFloat } from "./dequantize.js";

export { GgmlType, halfToFloat };

// Why the default model is served as Q8_0 made from the Q4_1 file: docs/decisions/092; Gemma's: 095

/**
 * Rewrites a GGUF file with every tensor of a smaller block format (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
 * Q6_K) in another one, deterministically (the same input gives the same bytes, so the output can
 * be pinned by SHA-256 in the catalogue).
 *
 * Each block is dequantized in float32 as ggml's `dequantize_row_*` functions do (dequantize.ts)
 * and quantized again as ggml's reference quantizer does (`quantize_row_q8_0_ref`; bit-exact with
 * gguf-py's `gguf.quants.quantize`, which reproduces it). Every other tensor (F32, F16, BF16, Q8_0)
 * is copied byte for byte; the key-value section is copied byte for byte except the value of
 * `general.file_type`, which names the new type. The layout is the one llama.cpp and gguf-py
 * write: tensor infos in the source's order, each tensor's data at the next multiple of the
 * alignment (`general.alignment`, else 32), zero padding between them and none after the last.
 */

/** The block formats tensors can be converted to. */
export type RequantizeTarget = "Q8_0";

/** Bytes per block and values per block of each type in {@link GgmlType}, by type id. */
const BLOCK: ReadonlyMap<number, { bytes: number; values: number }> = new Map<
  number,
  { bytes: number; values: number }
>([
  [GgmlType.F32, { bytes: 4, values: 1 }],
  [GgmlType.F16, { bytes: 2, values: 1 }],
  [GgmlType.BF16, { bytes: 2, values: 1 }],
  ...BLOCK_FORMATS,
]);

/** Whether a tensor of this type is rewritten in the target format (rather than copied). */
function converts(type: number, target: number): boolean {
  return type !== target && BLOCK_FORMATS.has(type);
}

/** `llama_ftype` (llama.h) of a file whose quantized tensors are all of the target type. */
const FILE_TYPE: Record<RequantizeTarget, number> = { Q8_0: 7 };
const TARGET_TYPE: Record<RequantizeTarget, number> = { Q8_0: GgmlType.Q8_0 };

/** One tensor as a GGUF file's tensor info describes it. */
export interface GgufTensorInfo {
  readonly name: string;
  /** Dimensions, innermost first (ggml's `ne`). */
  readonly dims: readonly bigint[];
  /** `enum ggml_type`. */
  readonly type: number;
  /** Byte offset of the data from the start of the data section. */
  readonly offset: number;
  /** Bytes of data (from the type's block size and the dimensions). */
  readonly size: number;
}

/** The parts of a GGUF file the converter needs, located in its bytes. */
export interface GgufLayout {
  /** Byte offset where the tensor infos start (the end of the key-value section). */
  readonly infoStart: number;
  /** Byte offset of the data section. */
  readonly dataStart: number;
  /** `general.alignment`, else 32. */
  readonly alignment: number;
  /** Byte offset of the `general.file_type` value (a uint32), if the file has that key. */
  readonly fileTypeOffset: number | undefined;
  /** `adapter.lora.alpha` (a float32) of a LoRA adapter file, if the file has that key. */
  readonly loraAlpha?: number;
  readonly tensors: readonly GgufTensorInfo[];
}

/**
 * Reads the header, the key-value section and the tensor infos of a GGUF file (version 2 or 3).
 * @param bytes - the file's bytes, at least through its tensor infos
 * @throws Error when the bytes are not a GGUF v2/v3 header, run out, or name a tensor type this
 *   module cannot size
 */
export function readGgufLayout(bytes: Uint8Array): GgufLayout {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const need = (n: number) => {
    if (at + n > bytes.byteLength) throw new Error("GGUF header ends early");
  };
  const u32 = () => (need(4), (at += 4), view.getUint32(at - 4, true));
  const u64 = () => (need(8), (at += 8), view.getBigUint64(at - 8, true));
  const count = () => {
    const n = u64();
    if (n > BigInt(bytes.byteLength)) throw new Error("GGUF count larger than the file");
    return Number(n);
  };
  const str = () => {
    const n = count();
    need(n);
    at += n;
    return Buffer.from(bytes.buffer, bytes.byteOffset + at - n, n).toString("utf8");
  };
  // Sizes of the fixed-size value types (enum gguf_type), by id; 8 is a string, 9 an array.
  const SCALAR = [1, 1, 2, 2, 4, 4, 4, 1, -1, -1, 8, 8, 8];
  const skipValue = (type: number): void => {
    if (type === 8) void str();
    else if (type === 9) {
      const inner = u32();
      const n = count();
      if (inner === 8 || inner === 9) for (let i = 0; i < n; i++) skipValue(inner);
      else {
        const size = SCALAR[inner];
        if (size === undefined || size < 0) throw new Error(`GGUF value type ${inner} unknown`);
        need(size * n);
        at += size * n;
      }
    } else {
      const size = SCALAR[type];
      if (size === undefined || size < 0) throw new Error(`GGUF value type ${type} unknown`);
      need(size);
      at += size;
    }
  };

  if (u32() !== 0x46554747) throw new Error("not a GGUF file (no GGUF magic)");
  const version = u32();
  if (version !== 2 && version !== 3) throw new Error(`GGUF version ${version} not supported`);
  const tensorCount = count();
  const kvCount = count();
  let alignment = 32;
  let fileTypeOffset: number | undefined;
  let loraAlpha: number | undefined;
  for (let i = 0; i < kvCount; i++) {
    const key = str();
    const type = u32();
    if (key === "general.alignment" && type === 4) alignment = view.getUint32(at, true);
    if (key === "general.file_type" && type === 4) fileTypeOffset = at;
    if (key === "adapter.lora.alpha" && type === 6) loraAlpha = view.getFloat32(at, true);
    skipValue(type);
  }
  if (!(alignment > 0 && alignment % 8 === 0)) throw new Error(`GGUF alignment ${alignment}`);
  const infoStart = at;
  const tensors: GgufTensorInfo[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = str();
    const nDims = u32();
    if (nDims > 4) throw new Error(`tensor ${name}: ${nDims} dimensions`);
    const dims = Array.from({ length: nDims }, () => u64());
    const type = u32();
    const offset = Number(u64());
    tensors.push({ name, dims, type, offset, size: tensorBytes(name, type, dims) });
  }
  return {
    infoStart,
    dataStart: alignUp(at, alignment),
    alignment,
    fileTypeOffset,
    ...(loraAlpha !== undefined ? { loraAlpha } : {}),
    tensors,
  };
}

function tensorBytes(name: string, type: number, dims: readonly bigint[]): number {
  const block = BLOCK.get(type);
  if (!block) throw new Error(`tensor ${name}: ggml type ${type} not supported`);
  const values = Number(dims.reduce((a, b) => a * b, 1n));
  if (Number(dims[0] ?? 1n) % block.values !== 0)
    throw new Error(`tensor ${name}: rows of ${dims[0]} are not whole blocks`);
  return (values / block.values) * block.bytes;
}

function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

/**
 * Converts a GGUF file's Q4_0, Q4_1, Q5_0, Q5_1, Q4_K and Q6_K tensors to `target` and writes
 * the result to `destination` (created or truncated), one tensor at a time.
 * @param source - path of a GGUF v2/v3 file
 * @param destination - path to write; not the same file as `source`
 * @param signal - checked between tensors; the promise then rejects with its reason
 * @returns the written file's lower-case hex SHA-256 and its size in bytes
 * @throws Error when the source is not a GGUF file this module can read (see
 *   {@link readGgufLayout}) or its tensors lie outside the file; the `fs` error when a file
 *   cannot be read or written
 * @example
 * ```ts
 * await requantizeGguf("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q8_0.gguf", "Q8_0");
 * // → { sha256: "…", sizeBytes: 144811072 }
 * ```
 */
export async function requantizeGguf(
  source: string,
  destination: string,
  target: RequantizeTarget,
  signal?: AbortSignal,
): Promise<{ sha256: string; sizeBytes: number }> {
  const bytes = await readFile(source);
  const layout = readGgufLayout(bytes);
  const hash = createHash("sha256");
  const out = await open(destination, "w");
  let written = 0;
  const write = async (chunk: Uint8Array) => {
    hash.update(chunk);
    await out.write(chunk, 0, chunk.byteLength, written);
    written += chunk.byteLength;
  };
  try {
    const head = Buffer.from(bytes.subarray(0, layout.infoStart));
    if (layout.fileTypeOffset !== undefined)
      head.writeUInt32LE(FILE_TYPE[target], layout.fileTypeOffset);
    await write(head);
    const to = TARGET_TYPE[target];
    const converted = layout.tensors.map((t) => {
      if (!converts(t.type, to)) return t;
      const from = BLOCK.get(t.type)!;
      const into = BLOCK.get(to)!;
      return {
        ...t,
        type: to,
        size: ((t.size / from.bytes) * from.values * into.bytes) / into.values,
      };
    });
    let offset = 0;
    const infos: Buffer[] = [];
    for (const t of converted) {
      const name = Buffer.from(t.name, "utf8");
      const info = Buffer.alloc(8 + name.length + 4 + 8 * t.dims.length + 4 + 8);
      let at = info.writeBigUInt64LE(BigInt(name.length), 0);
      at += name.copy(info, at);
      at = info.writeUInt32LE(t.dims.length, at);
      for (const d of t.dims) at = info.writeBigUInt64LE(d, at);
      at = info.writeUInt32LE(t.type, at);
      info.writeBigUInt64LE(BigInt(offset), at);
      infos.push(info);
      offset = alignUp(offset + t.size, layout.alignment);
    }
    const infoBytes = Buffer.concat(infos);
    await write(infoBytes);
    await write(padding(layout.infoStart + infoBytes.length, layout.alignment));
    for (const [i, t] of layout.tensors.entries()) {
      signal?.throwIfAborted();
      const start = layout.dataStart + t.offset;
      if (start + t.size > bytes.byteLength) throw new Error(`tensor ${t.name} ends past the file`);
      const data = bytes.subarray(start, start + t.size);
      await write(converts(t.type, to) ? toQ8_0(t.type, data) : data);
      if (i + 1 < layout.tensors.length) await write(padding(converted[i]!.size, layout.alignment));
    }
  } finally {
    await out.close();
  }
  return { sha256: hash.digest("hex"), sizeBytes: written };
}

function padding(length: number, alignment: number): Uint8Array {
  return new Uint8Array(alignUp(length, alignment) - length);
}

/**
 * Q4_1 blocks (20 bytes: f16 `d`, f16 `m`, 16 bytes of 4-bit `q`, the first 16 values in the
 * low nibbles) to Q8_0 blocks (34 bytes: f16 `d`, 32 × int8), value by value as ggml's
 * `dequantize_row_q4_1` then `quantize_row_q8_0_ref` compute them in float32.
 * @param q4_1 - whole blocks (a multiple of 20 bytes)
 * @returns the Q8_0 blocks, 34 bytes per source block
 * @throws RangeError when the length is not a multiple of 20
 * @example q4_1ToQ8_0(new Uint8Array(20)).length // → 34 (a zero block stays zero)
 */
export function q4_1ToQ8_0(q4_1: Uint8Array): Uint8Array {
  return toQ8_0(GgmlType.Q4_1, q4_1);
}

/**
 * Blocks of a format dequantize.ts reads to Q8_0 blocks (34 bytes: f16 `d`, 32 × int8), value by
 * value as ggml's `dequantize_row_*` then `quantize_row_q8_0_ref` compute them in float32.
 * @param type - the source's `enum ggml_type` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K or Q6_K)
 * @param data - whole blocks of that type
 * @returns the Q8_0 blocks, 34 bytes per 32 values
 * @throws RangeError when the type is not one of those or the data is not whole blocks
 * @example toQ8_0(GgmlType.Q4_K, new Uint8Array(144)).length // → 272 (8 zero blocks)
 */
export function toQ8_0(type: number, data: Uint8Array): Uint8Array {
  const format = BLOCK_FORMATS.get(type);
  if (!format) throw new RangeError(`ggml type ${type} cannot be converted to Q8_0`);
  if (data.length % format.bytes !== 0)
    throw new RangeError(`data must be whole ${format.bytes}-byte blocks of type ${type}`);
  const blocks = data.length / format.bytes;
  const per = format.values / 32;
  const out = new Uint8Array(blocks * per * 34);
  const values = new Float32Array(format.values);
  for (let b = 0; b < blocks; b++) {
    format.read(data, b * format.bytes, values);
    for (let k = 0; k < per; k++)
      quantizeQ8_0Block(values.subarray(32 * k, 32 * k + 32), out, (b * per + k) * 34);
  }
  return out;
}

/**
 * One Q8_0 block as `quantize_row_q8_0_ref` makes it: `d = max|x| / 127`, `q = roundf(x / d)`
 * (computed as `x · (1/d)`, halves away from zero), all in float32; `d` stored as f16.
 * @param values - 32 float32 values
 * @param out - receives 34 bytes at `at`
 */
export function quantizeQ8_0Block(values: Float32Array, out: Uint8Array, at: number): void {
  let amax = 0;
  for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(values[j]!));
  const d = Math.fround(amax / 127);
  const id = d === 0 ? 0 : Math.fround(1 / d);
  const h = floatToHalf(d);
  out[at] = h & 0xff;
  out[at + 1] = h >> 8;
  for (let j = 0; j < 32; j++) {
    const x = Math.fround(values[j]! * id);
    // roundf: |x| + 0.5 is exact in double (|x| ≤ 127.5, 24 bits)
    const q = Math.sign(x) * Math.floor(Math.abs(x) + 0.5);
    out[at + 2 + j] = q & 0xff;
  }
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/**
 * A number rounded to float32, then to the nearest IEEE half (ties to even), as bits: what
 * numpy's `astype(np.float16)` and ggml's `GGML_FP32_TO_FP16` give. Overflow goes to ±infinity;
 * NaN stays NaN.
 * @example floatToHalf(1) // → 0x3c00
 */
export function floatToHalf(x: number): number {
  f32[0] = x;
  const bits = u32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 112; // the half's biased exponent
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // A half subnormal (or zero): the value in units of 2^-24, rounded.
    if (e < -10) return sign;
    const shift = 14 - e;
    const full = mant | 0x800000;
    return sign | roundShift(full, shift);
  }
  // Rounding up may carry into the exponent, up to infinity: that is the right result.
  return sign | ((e << 10) + roundShift(mant, 13));
}

/** `value >> shift`, rounded to nearest, ties to even (value below 2^24, shift from 1 to 24). */
function roundShift(value: number, shift: number): number {
  const kept = value >>> shift;
  const rest = value - kept * 2 ** shift;
  const half = 2 ** (shift - 1);
  return rest > half || (rest === half && kept & 1) ? kept + 1 : kept;
}
