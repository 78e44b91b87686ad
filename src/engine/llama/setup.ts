import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";

/**
 * How the in-process engine is set up: its options, and which llama.cpp build it runs on.
 */

// Why the CPU build when no GPU is usable: docs/decisions/037
/**
 * Whether a llama.cpp GPU backend has a device to run on: a GPU backend (`gpu` not `false`) with
 * at least one device and some VRAM. node-llama-cpp reports `gpu: "vulkan"` on a CPU-only machine
 * with a Vulkan loader installed (Debian's mesa-vulkan-drivers, common on desktops) though it
 * finds no device (or only a software rasterizer without VRAM), and the engine then sized itself
 * for a GPU: 16 branch sequences, gigabytes at idle for a small model (issue 31, item 4).
 * @param found - what the backend reports: `gpu`, its device names, its VRAM total in bytes.
 * @example
 * ```ts
 * gpuIsUsable({ gpu: "vulkan", devices: [], vramTotal: 0 }); // → false
 * ```
 */
export function gpuIsUsable(found: {
  gpu: string | false;
  devices: readonly string[];
  vramTotal: number;
}): boolean {
  return found.gpu !== false && found.devices.length > 0 && found.vramTotal > 0;
}

/**
 * The llama.cpp binding to use: with `"auto"`, node-llama-cpp's choice when its GPU backend has a
 * usable device ({@link gpuIsUsable}), else the CPU build.
 */
export async function usableLlama(gpu: "auto" | false): Promise<Llama> {
  const llama = await getLlama({ gpu, logLevel: LlamaLogLevel.error });
  if (llama.gpu === false) return llama;
  const [devices, vram] = await Promise.all([llama.getGpuDeviceNames(), llama.getVramState()]);
  if (gpuIsUsable({ gpu: llama.gpu, devices, vramTotal: vram.total })) return llama;
  await llama.dispose();
  return getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
}

/** Options of `openLlamaEngine` (./index.ts). */
export interface LlamaEngineOptions {
  /** Absolute path of a GGUF file. */
  readonly modelPath: string;
  /** Model id reported as the engine's `model.id`; defaults to the file name without `.gguf`. */
  readonly id?: string;
  /**
   * Tokens per KV-cache sequence, i.e. the most one request (prefix + longest branch) may use.
   * Default: the smaller of 8192 and the model's training context (room for a 255-option choice
   * with descriptions).
   */
  readonly contextSize?: number;
  // Why one sequence on a CPU: docs/decisions/055
  /**
   * Branches evaluated side by side (one KV-cache sequence each, sequence 0 included), so their
   * tokens go through the model in few `llama_decode` calls. Default: 16 (the most questions one
   * request may carry) with a GPU; 1 on a CPU, where one lane reuses the starts consecutive
   * branches share (branch-schedule.ts) and more lanes each evaluate them again and start with a
   * copy of a whole KV stream.
   */
  readonly parallelBranches?: number;
  /**
   * Absolute path of a GGUF LoRA adapter applied on top of the model at scale 1 (a
   * decision-tuned adapter, docs/TRAINING.md). Default: none.
   */
  readonly adapterPath?: string;
  /**
   * File name of a LoRA adapter already added into `modelPath`'s weights (models/merge-adapter.ts):
   * reported as {@link ModelInfo.adapter}, not applied again. Default: none.
   */
  readonly mergedAdapter?: string;
  /** CPU threads for evaluation. Default: llama.cpp's count of math cores (physical cores). */
  readonly threads?: number;
  /** Largest number of tokens one decode call takes, at least 128. Default 1024. */
  readonly batchSize?: number;
  /**
   * Time, in ms, one paced decode call aims at (call-pace.ts): a call of a prefix, a lead or a
   * one-lane plan's branch after its stretch's first, and the first of a stretch that starts
   * deep. A request that comes waits for the call in flight. Default 2,000.
   */
  readonly callBudgetMs?: number;
  /** `"auto"` offloads to a GPU when one is usable; `false` forces the CPU. Default `"auto"`. */
  readonly gpu?: "auto" | false;
  /**
   * Bytes of evaluated-prefix snapshots kept for reuse (an LRU, see `PrefixSnapshotCache`);
   * 0 turns the cache off (sequence 0 still keeps the last prefix). Default 512 MiB.
   */
  readonly prefixCacheBytes?: number;
}

/** Default of {@link LlamaEngineOptions.prefixCacheBytes}: 512 MiB. */
export const DEFAULT_PREFIX_CACHE_BYTES = 512 * 1024 * 1024;
