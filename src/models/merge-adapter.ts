import { createHash, randomBytes } from "node:crypto";
import { copyFile, mkdir, open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { BLOCK_FORMATS } from "./dequantize.js";
import { modelsDir } from "./home.js";
import {
  GgmlType,
  halfToFloat,
  floatToHalf,
  quantizeQ8_0Block,
  readGgufLayout,
  type GgufLayout,
  type GgufTensorInfo,
} from "./requantize.js";

// Why the shipped adapter is added into the weights instead of applied per token: docs/decisions/094

/**
 * A GGUF LoRA adapter added into a copy of its model's weights, so a request pays for the model
 * alone (llama.cpp applies a runtime LoRA as two extra matrix products per adapted weight per
 * token: 8.5–17% of a request on the Q8_0 default on a 2-core CPU).
 *
 * For each base weight W with a pair `<name>.lora_a` (A, r × n_in) and `<name>.lora_b`
 * (B, n_out × r) in the adapter, the merged weight is
 *
 *   W' = W + (α / r) · B · A
 *
 * with α the adapter's `adapter.lora.alpha` (r when absent) and r B's inner size: the scale
 * llama.cpp gives the same adapter at scale 1 (`llama-adapter.cpp`). W is read in float32 as
 * ggml dequantizes it and W' written back in W's own type (Q8_0 by ggml's reference quantizer,
 * as requantize.ts does; F16; F32), so the file keeps its layout, size and every other byte.
 */

/** A model weight type the merge can read and write again. */
const MERGEABLE = new Set<number>([GgmlType.F32, GgmlType.F16, GgmlType.Q8_0]);

/** Thrown when a model or adapter holds what the merge cannot add (the caller applies it at run time). */
export class UnmergeableAdapterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnmergeableAdapterError";
  }
}

/** One adapted weight: the base tensor and its two LoRA factors. */
interface LoraPair {
  readonly base: GgufTensorInfo;
  readonly a: GgufTensorInfo;
  readonly b: GgufTensorInfo;
}

/**
 * Pairs each `lora_a`/`lora_b` of the adapter with its base weight and checks their shapes.
 * @throws {@link UnmergeableAdapterError} for a factor without its pair or base weight, a shape
 *   that does not fit, or a type the merge cannot read or write
 */
function loraPairs(model: GgufLayout, adapter: GgufLayout): LoraPair[] {
  const bases = new Map(model.tensors.map((t) => [t.name, t]));
  const factors = new Map(adapter.tensors.map((t) => [t.name, t]));
  const pairs: LoraPair[] = [];
  for (const a of adapter.tensors) {
    if (!a.name.endsWith(".lora_a")) {
      if (!a.name.endsWith(".lora_b"))
        throw new UnmergeableAdapterError(`adapter tensor ${a.name} is not a LoRA factor`);
      continue;
    }
    const name = a.name.slice(0, -".lora_a".length);
    const b = factors.get(`${name}.lora_b`);
    const base = bases.get(name);
    if (!b) throw new UnmergeableAdapterError(`adapter has ${a.name} without ${name}.lora_b`);
    if (!base) throw new UnmergeableAdapterError(`the model has no weight ${name}`);
    for (const t of [a, b])
      if (t.type !== GgmlType.F32 && t.type !== GgmlType.F16)
        throw new UnmergeableAdapterError(`adapter tensor ${t.name}: ggml type ${t.type}`);
    if (!MERGEABLE.has(base.type))
      throw new UnmergeableAdapterError(`weight ${name}: ggml type ${base.type} is not merged`);
    const [nIn, nOut] = base.dims.map(Number);
    const [aIn, rank] = a.dims.map(Number);
    const [bRank, bOut] = b.dims.map(Number);
    if (base.dims.length !== 2 || aIn !== nIn || bOut !== nOut || bRank !== rank)
      throw new UnmergeableAdapterError(
        `weight ${name} [${base.dims.join(", ")}] does not fit A [${a.dims.join(", ")}] and B [${b.dims.join(", ")}]`,
      );
    pairs.push({ base, a, b });
  }
  for (const b of adapter.tensors)
    if (b.name.endsWith(".lora_b") && !factors.has(b.name.replace(/\.lora_b$/, ".lora_a")))
      throw new UnmergeableAdapterError(`adapter has ${b.name} without its lora_a`);
  return pairs;
}

/** A float32 or float16 tensor's values, row-major (ggml's `ne0` innermost). */
function floats(bytes: Uint8Array, at: number, t: GgufTensorInfo): Float32Array {
  const n = t.dims.reduce((x, y) => x * Number(y), 1);
  const view = new DataView(bytes.buffer, bytes.byteOffset + at, t.size);
  const out = new Float32Array(n);
  if (t.type === GgmlType.F32) for (let i = 0; i < n; i++) out[i] = view.getFloat32(4 * i, true);
  else for (let i = 0; i < n; i++) out[i] = halfToFloat(view.getUint16(2 * i, true));
  return out;
}

/** Reads row `o` of a weight (n_in values) in float32, as ggml dequantizes it. */
function readRow(data: Uint8Array, type: number, o: number, nIn: number, row: Float64Array): void {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (type === GgmlType.Q8_0) {
    const q8_0 = BLOCK_FORMATS.get(GgmlType.Q8_0)!;
    const block = new Float32Array(32);
    const blocks = nIn / 32;
    for (let k = 0; k < blocks; k++) {
      q8_0.read(data, (o * blocks + k) * 34, block);
      row.set(block, k * 32);
    }
  } else if (type === GgmlType.F16)
    for (let i = 0; i < nIn; i++) row[i] = halfToFloat(view.getUint16(2 * (o * nIn + i), true));
  else for (let i = 0; i < nIn; i++) row[i] = view.getFloat32(4 * (o * nIn + i), true);
}

/** Writes row `o` of a weight back in its type (float32 values, rounded as ggml would). */
function writeRow(data: Uint8Array, type: number, o: number, nIn: number, row: Float64Array): void {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (type === GgmlType.Q8_0) {
    const block = new Float32Array(32);
    for (let k = 0; k < nIn / 32; k++) {
      for (let j = 0; j < 32; j++) block[j] = row[k * 32 + j]!;
      quantizeQ8_0Block(block, data, (o * (nIn / 32) + k) * 34);
    }
  } else if (type === GgmlType.F16)
    for (let i = 0; i < nIn; i++) view.setUint16(2 * (o * nIn + i), floatToHalf(row[i]!), true);
  else for (let i = 0; i < nIn; i++) view.setFloat32(4 * (o * nIn + i), row[i]!, true);
}

/**
 * The layout of a GGUF file read from its first bytes only (the key-value section and tensor
 * infos), growing the read until they fit.
 */
async function readLayout(path: string): Promise<{ layout: GgufLayout; size: number }> {
  const file = await open(path, "r");
  try {
    const { size } = await file.stat();
    for (let length = Math.min(size, 1 << 20); ; length = Math.min(size, length * 2)) {
      const head = Buffer.alloc(length);
      await file.read(head, 0, length, 0);
      try {
        return { layout: readGgufLayout(head), size };
      } catch (error) {
        if (length === size || !/ends early/.test((error as Error).message)) throw error;
      }
    }
  } finally {
    await file.close();
  }
}

/**
 * Writes `destination`: the model file with the adapter added into its weights (see the module
 * comment), every byte outside the adapted weights copied. Holds one weight in memory at a time.
 * @param modelPath - a GGUF v2/v3 model
 * @param adapterPath - a GGUF LoRA adapter for that model (`general.type` adapter)
 * @param destination - the file to write (created or truncated); not one of the inputs
 * @param signal - checked between weights; the promise then rejects with its reason
 * @returns the number of weights the adapter was added into
 * @throws {@link UnmergeableAdapterError} when the adapter does not fit the model or holds types
 *   the merge cannot add; Error when a file is not a GGUF file requantize.ts can read; the `fs`
 *   error when a file cannot be read or written
 * @example
 * ```ts
 * await mergeAdapterGguf("SmolLM2-135M-Instruct.Q8_0.gguf", "decision.gguf", "merged.gguf");
 * // → { merged: 126 }
 * ```
 */
export async function mergeAdapterGguf(
  modelPath: string,
  adapterPath: string,
  destination: string,
  signal?: AbortSignal,
): Promise<{ merged: number }> {
  return mergeAdapterBytes(modelPath, await readFile(adapterPath), destination, signal);
}

/** {@link mergeAdapterGguf} with the adapter file's bytes already read. */
async function mergeAdapterBytes(
  modelPath: string,
  adapterBytes: Uint8Array,
  destination: string,
  signal?: AbortSignal,
): Promise<{ merged: number }> {
  const { layout: model, size } = await readLayout(modelPath);
  const adapter = readGgufLayout(adapterBytes);
  const pairs = loraPairs(model, adapter);
  for (const t of model.tensors)
    if (model.dataStart + t.offset + t.size > size)
      throw new Error(`tensor ${t.name} ends past the file`);
  for (const t of adapter.tensors)
    if (adapter.dataStart + t.offset + t.size > adapterBytes.byteLength)
      throw new Error(`adapter tensor ${t.name} ends past the file`);
  await copyFile(modelPath, destination);
  const out = await open(destination, "r+");
  try {
    for (const { base, a, b } of pairs) {
      signal?.throwIfAborted();
      const [nIn, nOut] = base.dims.map(Number) as [number, number];
      const rank = Number(a.dims[1]);
      const scale = (adapter.loraAlpha ?? rank) / rank;
      const A = floats(adapterBytes, adapter.dataStart + a.offset, a);
      const B = floats(adapterBytes, adapter.dataStart + b.offset, b);
      const data = Buffer.alloc(base.size);
      const at = model.dataStart + base.offset;
      await out.read(data, 0, base.size, at);
      const row = new Float64Array(nIn);
      for (let o = 0; o < nOut; o++) {
        readRow(data, base.type, o, nIn, row);
        for (let k = 0; k < rank; k++) {
          const coefficient = scale * B[o * rank + k]!;
          const offset = k * nIn;
          for (let i = 0; i < nIn; i++) row[i] = row[i]! + coefficient * A[offset + i]!;
        }
        writeRow(data, base.type, o, nIn, row);
      }
      await out.write(data, 0, base.size, at);
    }
  } finally {
    await out.close();
  }
  return { merged: pairs.length };
}

/**
 * The model with the adapter added into its weights, made once and kept in
 * `<home>/models/merged/` as `<model>+<adapter>-<key>.gguf`, the key hashing the model's path,
 * size and modification time and the adapter's bytes: a changed file makes a new one, and the
 * older files of the same two names are then removed.
 * @returns the merged file's absolute path
 * @throws {@link UnmergeableAdapterError} and what {@link mergeAdapterGguf} throws
 * @example `const path = await mergedModelFile(modelPath, adapterPath);`
 */
export async function mergedModelFile(
  modelPath: string,
  adapterPath: string,
  directory: string = join(modelsDir(), "merged"),
): Promise<string> {
  const [model, adapterBytes] = await Promise.all([stat(modelPath), readFile(adapterPath)]);
  const key = createHash("sha256")
    .update(JSON.stringify([modelPath, model.size, model.mtimeMs]))
    .update(adapterBytes)
    .digest("hex")
    .slice(0, 16);
  const stem = (path: string) => basename(path).replace(/\.gguf$/i, "");
  const name = `${stem(modelPath)}+${stem(adapterPath)}-`;
  const path = join(directory, `${name}${key}.gguf`);
  try {
    await stat(path);
    return path;
  } catch {
    // not made yet
  }
  await mkdir(directory, { recursive: true });
  const part = `${path}.${process.pid}-${randomBytes(4).toString("hex")}.part`;
  try {
    await mergeAdapterBytes(modelPath, adapterBytes, part);
    await rename(part, path);
  } finally {
    await rm(part, { force: true });
  }
  for (const file of await readdir(directory))
    if (file.startsWith(name) && file.endsWith(".gguf") && join(directory, file) !== path)
      await rm(join(directory, file), { force: true });
  return path;
}
