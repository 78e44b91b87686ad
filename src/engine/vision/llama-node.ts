import { createRequire } from "node:module";

/**
 * The part of `@fugood/llama.node` (llama.cpp with its multimodal `mtmd` library, as a Node
 * addon) that the vision engine uses, typed here because the package ships its TypeScript
 * sources without declarations. Only the vision worker process (./worker.ts) loads it.
 */

/** Options of `loadModel` (the llama.cpp context parameters used here). */
export interface LlamaNodeModelOptions {
  readonly model: string;
  readonly n_ctx: number;
  readonly n_batch: number;
  readonly n_ubatch: number;
  readonly n_threads?: number;
  readonly n_gpu_layers: number;
  readonly n_parallel: number;
  readonly ctx_shift: boolean;
}

/** One entry of a token's probability list in a queued completion's token callback. */
export interface LlamaNodeTokenProb {
  /** Token id. */
  readonly tok: number;
  /** Probability after the sampler chain (with neutral samplers: softmax of the raw logits). */
  readonly prob: number;
}

/** The token callback's payload of a queued completion. */
export interface LlamaNodeTokenData {
  readonly token: string;
  readonly probs?: readonly LlamaNodeTokenProb[];
}

/** The final result of a queued completion (fields used here). */
export interface LlamaNodeQueuedResult {
  readonly context_full: boolean;
  readonly timings: {
    /** Prompt positions reused from the slot's KV cache. */
    readonly cache_n: number;
    /** Prompt positions evaluated (text tokens and image embeddings). */
    readonly prompt_n: number;
    readonly prompt_ms: number;
  };
}

/** A llama.node context (fields used here). */
export interface LlamaNodeContext {
  initMultimodal(options: { path: string; use_gpu?: boolean }): boolean;
  getMultimodalSupport(): { vision: boolean; audio: boolean };
  tokenize(text: string, options?: { media_paths?: string[] }): Promise<{ tokens: Int32Array }>;
  /** llama.cpp's token pieces concatenated (`tokens_to_str`), special tokens as their text. */
  detokenize(tokens: number[]): Promise<string>;
  release(): Promise<void>;
  readonly parallel: {
    enable(config: { n_parallel: number; n_batch: number }): Promise<boolean>;
    disable(): void;
    completion(
      options: Record<string, unknown>,
      onToken: (requestId: number, data: LlamaNodeTokenData) => void,
    ): Promise<{ requestId: number; promise: Promise<LlamaNodeQueuedResult>; stop: () => void }>;
  };
}

/** The module's functions used here. */
export interface LlamaNodeModule {
  loadModel(options: LlamaNodeModelOptions): Promise<LlamaNodeContext>;
  loadLlamaModelInfo(path: string): Promise<Record<string, string | number | undefined>>;
}

let loaded: LlamaNodeModule | undefined;

/** Loads `@fugood/llama.node` once. @throws when the package or its native addon is missing. */
export function llamaNode(): LlamaNodeModule {
  loaded ??= createRequire(import.meta.url)("@fugood/llama.node") as LlamaNodeModule;
  return loaded;
}
