/**
 * ggml's quantized block formats read back to float32, value by value as ggml's reference
 * `dequantize_row_*` functions (ggml-quants.c) and gguf-py's `gguf.quants.dequantize` compute them:
 * every product and sum rounded to float32 in the order those functions write it, with no fused
 * multiply-add. Used to convert a model's weights to Q8_0 (requantize.ts).
 */

/** ggml tensor types (`enum ggml_type`) decisiond's GGUF tools size, read or write. */
export const GgmlType = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q4_1: 3,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  Q4_K: 12,
  Q6_K: 14,
  BF16: 30,
} as const;

/** A block format: bytes and values per block, and its reader. */
export interface BlockFormat {
  readonly bytes: number;
  readonly values: number;
  /**
   * Writes the block at `src[at…]`'s values to `out[0…values)`.
   * @param src - the tensor's bytes
   * @param at - byte offset of the block
   * @param out - receives `values` float32 values
   */
  readonly read: (src: Uint8Array, at: number, out: Float32Array) => void;
}

const f = Math.fround;

/**
 * IEEE half (binary16) bits to the number they encode.
 * @example halfToFloat(0x3c00) // → 1
 */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1024 + mant) * 2 ** (exp - 25);
}

/** The f16 at `src[at]` (little-endian) as a number. */
function half(src: Uint8Array, at: number): number {
  return halfToFloat(src[at]! | (src[at + 1]! << 8));
}

/** The uint32 at `src[at]`, little-endian. */
function u32(src: Uint8Array, at: number): number {
  return (src[at]! | (src[at + 1]! << 8) | (src[at + 2]! << 16) | (src[at + 3]! << 24)) >>> 0;
}

/** Q4_0: f16 `d`, 16 bytes of 4-bit `q`; `x = (q − 8)·d`. */
const Q4_0: BlockFormat = {
  bytes: 18,
  values: 32,
  read(src, at, out) {
    const d = half(src, at);
    for (let j = 0; j < 16; j++) {
      const byte = src[at + 2 + j]!;
      out[j] = f(((byte & 0x0f) - 8) * d);
      out[j + 16] = f(((byte >> 4) - 8) * d);
    }
  },
};

/** Q4_1: f16 `d`, f16 `m`, 16 bytes of 4-bit `q`; `x = q·d + m`. */
const Q4_1: BlockFormat = {
  bytes: 20,
  values: 32,
  read(src, at, out) {
    const d = half(src, at);
    const m = half(src, at + 2);
    for (let j = 0; j < 16; j++) {
      const byte = src[at + 4 + j]!;
      // d·q is exact in float32 (an 11-bit d times a 4-bit q); the sum rounds as float32 does.
      out[j] = f(d * (byte & 0x0f) + m);
      out[j + 16] = f(d * (byte >> 4) + m);
    }
  },
};

/** The fifth bits of a Q5 block's 32 values, as ggml's `dequantize_row_q5_*` take them. */
function q5Values(src: Uint8Array, qh: number, qs: number, j: number): [number, number] {
  const xh0 = ((qh >>> j) << 4) & 0x10;
  const xh1 = (qh >>> (j + 12)) & 0x10;
  const byte = src[qs + j]!;
  return [(byte & 0x0f) | xh0, (byte >> 4) | xh1];
}

/** Q5_0: f16 `d`, 32 high bits, 16 bytes of low nibbles; `x = (q − 16)·d`. */
const Q5_0: BlockFormat = {
  bytes: 22,
  values: 32,
  read(src, at, out) {
    const d = half(src, at);
    const qh = u32(src, at + 2);
    for (let j = 0; j < 16; j++) {
      const [x0, x1] = q5Values(src, qh, at + 6, j);
      out[j] = f((x0 - 16) * d);
      out[j + 16] = f((x1 - 16) * d);
    }
  },
};

/** Q5_1: f16 `d`, f16 `m`, 32 high bits, 16 bytes of low nibbles; `x = q·d + m`. */
const Q5_1: BlockFormat = {
  bytes: 24,
  values: 32,
  read(src, at, out) {
    const d = half(src, at);
    const m = half(src, at + 2);
    const qh = u32(src, at + 4);
    for (let j = 0; j < 16; j++) {
      const [x0, x1] = q5Values(src, qh, at + 8, j);
      out[j] = f(f(x0 * d) + m);
      out[j + 16] = f(f(x1 * d) + m);
    }
  },
};

/** Q8_0: f16 `d`, 32 × int8 `q`; `x = q·d`. */
const Q8_0: BlockFormat = {
  bytes: 34,
  values: 32,
  read(src, at, out) {
    const d = half(src, at);
    for (let j = 0; j < 32; j++) out[j] = f(((src[at + 2 + j]! << 24) >> 24) * d);
  },
};

/**
 * Q4_K: a super-block of 256 values in 8 sub-blocks of 32: f16 `d`, f16 `dmin`, 12 bytes packing
 * a 6-bit scale and a 6-bit min per sub-block (`get_scale_min_k4`), 128 bytes of 4-bit `q`;
 * `x = (d·scale)·q − dmin·min`.
 */
const Q4_K: BlockFormat = {
  bytes: 144,
  values: 256,
  read(src, at, out) {
    const d = half(src, at);
    const dmin = half(src, at + 2);
    const scales = at + 4;
    const scaleMin = (j: number): [number, number] => {
      if (j < 4) return [src[scales + j]! & 63, src[scales + j + 4]! & 63];
      return [
        (src[scales + j + 4]! & 0x0f) | ((src[scales + j - 4]! >> 6) << 4),
        (src[scales + j + 4]! >> 4) | ((src[scales + j]! >> 6) << 4),
      ];
    };
    let q = at + 16;
    let y = 0;
    for (let is = 0; is < 8; is += 2) {
      const [sc1, m1] = scaleMin(is);
      const [sc2, m2] = scaleMin(is + 1);
      const d1 = f(d * sc1);
      const min1 = f(dmin * m1);
      const d2 = f(d * sc2);
      const min2 = f(dmin * m2);
      for (let l = 0; l < 32; l++) out[y++] = f(f(d1 * (src[q + l]! & 0x0f)) - min1);
      for (let l = 0; l < 32; l++) out[y++] = f(f(d2 * (src[q + l]! >> 4)) - min2);
      q += 32;
    }
  },
};

/**
 * Q6_K: a super-block of 256 values in 16 sub-blocks of 16: 128 bytes of low nibbles `ql`, 64
 * bytes of high 2-bit pairs `qh`, 16 int8 scales, f16 `d`; `x = (d·scale)·(q − 32)`.
 */
const Q6_K: BlockFormat = {
  bytes: 210,
  values: 256,
  read(src, at, out) {
    const d = half(src, at + 208);
    const int8 = (i: number) => (src[i]! << 24) >> 24;
    for (let n = 0; n < 2; n++) {
      const ql = at + 64 * n;
      const qh = at + 128 + 32 * n;
      const sc = at + 192 + 8 * n;
      const y = 128 * n;
      for (let l = 0; l < 32; l++) {
        const is = l >> 4;
        const h = src[qh + l]!;
        const q1 = ((src[ql + l]! & 0x0f) | ((h & 3) << 4)) - 32;
        const q2 = ((src[ql + l + 32]! & 0x0f) | (((h >> 2) & 3) << 4)) - 32;
        const q3 = ((src[ql + l]! >> 4) | (((h >> 4) & 3) << 4)) - 32;
        const q4 = ((src[ql + l + 32]! >> 4) | (((h >> 6) & 3) << 4)) - 32;
        out[y + l] = f(f(d * int8(sc + is)) * q1);
        out[y + l + 32] = f(f(d * int8(sc + is + 2)) * q2);
        out[y + l + 64] = f(f(d * int8(sc + is + 4)) * q3);
        out[y + l + 96] = f(f(d * int8(sc + is + 6)) * q4);
      }
    }
  },
};

/** The quantized formats this module reads, by {@link GgmlType} id. */
export const BLOCK_FORMATS: ReadonlyMap<number, BlockFormat> = new Map([
  [GgmlType.Q4_0, Q4_0],
  [GgmlType.Q4_1, Q4_1],
  [GgmlType.Q5_0, Q5_0],
  [GgmlType.Q5_1, Q5_1],
  [GgmlType.Q8_0, Q8_0],
  [GgmlType.Q4_K, Q4_K],
  [GgmlType.Q6_K, Q6_K],
]);
