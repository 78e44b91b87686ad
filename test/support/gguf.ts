/** A key-value of a test GGUF file: its key, its type and its value. */
export type GgufKv =
  | readonly [key: string, type: "string", value: string]
  | readonly [key: string, type: "u32" | "f32", value: number]
  | readonly [key: string, type: "string[]", value: readonly string[]]
  | readonly [key: string, type: "f32[]", value: readonly number[]];

/** A tensor of a test GGUF file. */
export interface GgufTensor {
  readonly name: string;
  /** ggml's `ne`, innermost first. */
  readonly dims: readonly number[];
  /** `enum ggml_type`: 0 F32, 1 F16, 3 Q4_1, 8 Q8_0, … */
  readonly type: number;
  readonly data: Uint8Array;
}

/**
 * A GGUF v3 file with these key-values and tensors, laid out as llama.cpp writes one: tensor data
 * at multiples of 32 bytes from the aligned data section, zero padding between tensors and none
 * after the last.
 * @example writeGguf([["general.architecture", "string", "llama"]], [])
 */
export function writeGguf(kvs: readonly GgufKv[], tensors: readonly GgufTensor[]): Uint8Array {
  const parts: Buffer[] = [];
  const u32 = (v: number) => parts.push(Buffer.from(new Uint32Array([v]).buffer));
  const u64 = (v: number) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    parts.push(b);
  };
  const str = (s: string) => {
    u64(Buffer.byteLength(s));
    parts.push(Buffer.from(s));
  };
  const f32 = (values: readonly number[]) =>
    parts.push(Buffer.from(new Float32Array(values).buffer));
  parts.push(Buffer.from("GGUF"));
  u32(3);
  u64(tensors.length);
  u64(kvs.length);
  for (const kv of kvs) {
    str(kv[0]);
    switch (kv[1]) {
      case "string":
        u32(8);
        str(kv[2]);
        break;
      case "u32":
        u32(4);
        u32(kv[2]);
        break;
      case "f32":
        u32(6);
        f32([kv[2]]);
        break;
      case "string[]":
        u32(9);
        u32(8);
        u64(kv[2].length);
        for (const s of kv[2]) str(s);
        break;
      case "f32[]":
        u32(9);
        u32(6);
        u64(kv[2].length);
        f32(kv[2]);
        break;
    }
  }
  let offset = 0;
  for (const t of tensors) {
    str(t.name);
    u32(t.dims.length);
    for (const d of t.dims) u64(d);
    u32(t.type);
    u64(offset);
    offset = Math.ceil((offset + t.data.length) / 32) * 32;
  }
  const head = Buffer.concat(parts);
  const out: Buffer[] = [head, Buffer.alloc(Math.ceil(head.length / 32) * 32 - head.length)];
  for (const [i, t] of tensors.entries()) {
    out.push(Buffer.from(t.data));
    if (i + 1 < tensors.length)
      out.push(Buffer.alloc(Math.ceil(t.data.length / 32) * 32 - t.data.length));
  }
  return Buffer.concat(out);
}
