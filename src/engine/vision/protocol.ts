/**
 * Messages between the vision engine (./index.ts) and its worker process (./worker.ts),
 * sent over Node's IPC channel as JSON.
 */

/** What the worker needs to load the model. */
export interface WorkerInit {
  readonly type: "init";
  readonly modelPath: string;
  readonly mmprojPath: string;
  readonly contextSize: number;
  readonly batchSize: number;
  readonly threads?: number;
  readonly gpu: boolean;
  readonly imageSize?: number;
}

/** A branch: evaluated after the prefix (and its parent), read at its end. */
export interface WorkerBranch {
  readonly tokens: readonly number[];
  readonly candidates: readonly number[];
  readonly children?: readonly WorkerBranch[];
}

/** One engine request: the prefix in token segments with an image between each two, the branches. */
export interface WorkerScore {
  readonly type: "score";
  readonly id: number;
  /** Token segments of the prefix (without BOS): `images.length + 1` of them. */
  readonly prefix: readonly (readonly number[])[];
  /** `data:` URLs of the images, in order. */
  readonly images: readonly string[];
  readonly branches: readonly WorkerBranch[];
}

export interface WorkerClose {
  readonly type: "close";
}

export type ToWorker = WorkerInit | WorkerScore | WorkerClose;

/** The worker loaded the model. */
export interface WorkerReady {
  readonly type: "ready";
  readonly imageSize: number;
  readonly imageTokens: number;
}

/** Log-probabilities of a branch's candidates, in candidate order, and of its children. */
export interface WorkerBranchScore {
  readonly logprobs: readonly number[];
  readonly children?: readonly WorkerBranchScore[];
}

/** Work counts of one completion (llama.node's slot timings). */
export interface WorkerCompletionStats {
  /** Prompt positions reused from the KV cache. */
  readonly cached: number;
  /** Prompt positions evaluated. */
  readonly evaluated: number;
}

export interface WorkerResult {
  readonly type: "result";
  readonly id: number;
  readonly branches: readonly WorkerBranchScore[];
  /** One entry per completion, in evaluation order (depth-first over the branches). */
  readonly completions: readonly WorkerCompletionStats[];
}

export interface WorkerError {
  readonly type: "error";
  /** The request that failed; absent for a failure while loading. */
  readonly id?: number;
  readonly message: string;
  /**
   * `"context"`: the prompt did not fit the context. `"text"`: tokens of `part` do not come back
   * from their own text (`message` is the text where they differ).
   */
  readonly kind?: "context" | "text";
  readonly part?: "prefix" | "branch";
}

export type FromWorker = WorkerReady | WorkerResult | WorkerError;

/**
 * The line the worker writes to stderr after each request, so that the engine knows it has read
 * every log line of that request (native logs and this line go through the same pipe, in order).
 */
export const DONE_LINE = "decisiond-vision-worker: done";
