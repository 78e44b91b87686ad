import {
  getLlama,
  LlamaLogLevel,
  type Llama,
  type LlamaModel,
  type Token as LlamaToken,
} from "node-llama-cpp";
import { fork, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { chatTemplateOf, SerialQueue } from "./llama.js";
import {
  DONE_LINE,
  type FromWorker,
  type ToWorker,
  type WorkerBranch,
  type WorkerBranchScore,
  type WorkerReady,
  type WorkerResult,
} from "./vision-protocol.js";
import {
  branchDepthTokens,
  ContextOverflowError,
  PromptTextError,
  type BranchScore,
  type ChatTemplate,
  type Engine,
  type EngineCounters,
  type ModelInfo,
  type ScoreBranch,
  type ScoreRequest,
  type ScoreResult,
  type Token,
  type TokenizeOptions,
} from "./types.js";

/** Options of {@link VisionEngine.open}. */
export interface VisionEngineOptions {
  /** Absolute path of the text model's GGUF file. */
  readonly modelPath: string;
  /** Absolute path of the matching multimodal projector (mmproj) GGUF file. */
  readonly mmprojPath: string;
  /** Model id reported in {@link ModelInfo.id}; defaults to the file name without `.gguf`. */
  readonly id?: string;
  /** Tokens one request may occupy, image positions included. Default: min(8192, training context). */
  readonly contextSize?: number;
  /** CPU threads. Default: llama.node's (half the math cores). */
  readonly threads?: number;
  /** Largest decode batch; also the micro-batch, which must hold one image's embeddings. Default 1024. */
  readonly batchSize?: number;
  /** `false` keeps the model and the projector on the CPU. Default `"auto"`. */
  readonly gpu?: "auto" | false;
  /** Side of the square images fed to the projector. Default: the projector's `clip.vision.image_size`. */
  readonly imageSize?: number;
}

/** The text mtmd replaces with an image (`mtmd_default_marker()`). */
export const MEDIA_MARKER = "<__media__>";

/**
 * A vision-language engine on llama.cpp's multimodal library (mtmd) through
 * `@fugood/llama.node`: a GGUF text model plus its mmproj projector (node-llama-cpp 3.x has no
 * multimodal API). It differs from {@link LlamaEngine} in how it reaches llama.cpp:
 *
 * - **A worker process.** llama.node runs in ./vision-worker.ts, driven over IPC, because it
 *   prints its log (prompts included) to stdout and stderr. The worker's stdout is discarded and
 *   its stderr read only for llama.cpp's `image slice encoded in N ms` lines, which feed
 *   {@link EngineCounters.mediaEncoded}; states never reach the service's logs.
 * - **Prompt as text.** llama.node takes a prompt string (special tokens parsed) with
 *   `<__media__>` markers where images go. The worker turns the planned tokens back into text
 *   (llama.cpp's token pieces) and checks that each piece tokenizes back to the same tokens; text
 *   that would not (a state holding `<|im_end|>`, say) is refused with a {@link PromptTextError}
 *   rather than sent as a control token. The engine's own `tokenize`, `detokenize` and chat
 *   template use the same GGUF through node-llama-cpp (vocabulary only, no weights), so the
 *   decision layer plans exactly as for text.
 * - **Prefix once.** Every branch is one completion of `prefix + branch` on a single llama.node
 *   slot, which keeps its KV cache and reuses the longest common prefix, media chunks included
 *   (mtmd identifies an image by a hash of its pixels). The image is encoded once per request, and
 *   not at all when the next request shows the same image and state. Each completion's
 *   `timings.cache_n` and `prompt_n` feed the token counters.
 * - **Readout.** A completion predicts one token with neutral sampling (see
 *   `NEUTRAL_SAMPLING` in ./vision-worker.ts) and `n_probs` covering the whole vocabulary; its
 *   token callback carries `(token id, probability)` for every token: the softmax of the raw
 *   logits, read before any token is chosen. The log-probabilities of the candidates are the
 *   logarithms of those probabilities (floored at the smallest double, as float32 probabilities
 *   far in the tail underflow to 0).
 */
export class VisionEngine implements Engine {
  private readonly queue = new SerialQueue();
  private closed = false;
  private exited: Error | undefined;
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { result?: FromWorker; logDone: boolean; settle: (message: FromWorker) => void }
  >();
  private readyWaiter: ((message: FromWorker) => void) | undefined;
  readonly counters: EngineCounters = {
    requests: 0,
    prefixTokensEvaluated: 0,
    prefixTokensCached: 0,
    branchTokensEvaluated: 0,
    mediaEncoded: 0,
    mediaEncodeMs: 0,
  };
  model!: ModelInfo;
  readonly chatTemplate: ChatTemplate;

  private constructor(
    private readonly llama: Llama,
    private readonly vocabulary: LlamaModel,
    private readonly worker: ChildProcess,
  ) {
    this.chatTemplate = idefics3TemplateOf(vocabulary) ?? chatTemplateOf(vocabulary);
    worker.on("message", (message: FromWorker) => this.onMessage(message));
    worker.on("exit", (code, signal) => this.onExit(code, signal));
    const lines = createInterface({ input: worker.stderr! });
    lines.on("line", (line) => this.onLogLine(line));
  }

  /**
   * Starts the worker, loads the model and its projector, and measures the context positions one
   * image takes.
   * @throws when a file is missing or not a GGUF, when the projector does not match the model or
   *   has no vision encoder, or when the projector declares no image size and none is given.
   */
  static async open(options: VisionEngineOptions): Promise<VisionEngine> {
    const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
    let vocabulary: LlamaModel | undefined;
    let engine: VisionEngine | undefined;
    try {
      vocabulary = await llama.loadModel({ modelPath: options.modelPath, vocabOnly: true });
      // A vocabulary-only model reports no training context; the GGUF metadata has it.
      const trainContextSize =
        vocabulary.fileInsights.trainContextSize ?? vocabulary.trainContextSize;
      const contextSize = options.contextSize ?? Math.min(8192, trainContextSize);
      const worker = fork(workerScript(), [], {
        stdio: ["ignore", "ignore", "pipe", "ipc"],
        serialization: "json",
      });
      engine = new VisionEngine(llama, vocabulary, worker);
      const ready = await engine.request(
        {
          type: "init",
          modelPath: options.modelPath,
          mmprojPath: options.mmprojPath,
          contextSize,
          batchSize: options.batchSize ?? 1024,
          ...(options.threads ? { threads: options.threads } : {}),
          gpu: options.gpu !== false,
          ...(options.imageSize ? { imageSize: options.imageSize } : {}),
        },
        undefined,
      );
      if (ready.type !== "ready") throw new Error((ready as { message: string }).message);
      engine.model = {
        id: options.id ?? basename(options.modelPath).replace(/\.gguf$/i, ""),
        path: options.modelPath,
        contextSize,
        trainContextSize,
        vision: true,
        imageSize: (ready as WorkerReady).imageSize,
        imageTokens: (ready as WorkerReady).imageTokens,
      };
      return engine;
    } catch (error) {
      if (engine) await engine.close().catch(() => undefined);
      else {
        await vocabulary?.dispose().catch(() => undefined);
        await llama.dispose().catch(() => undefined);
      }
      throw error;
    }
  }

  async tokenize(text: string, options: TokenizeOptions = {}): Promise<Token[]> {
    options.signal?.throwIfAborted();
    return this.vocabulary.tokenize(text, options.special ?? false) as Token[];
  }

  async detokenize(tokens: readonly Token[], signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    return this.vocabulary.detokenize(tokens as LlamaToken[], true);
  }

  score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    const mediaTokens = (request.media?.length ?? 0) * this.model.imageTokens!;
    for (const branch of request.branches) {
      const needed = request.prefix.length + mediaTokens + branchDepthTokens(branch);
      if (needed > this.model.contextSize)
        return Promise.reject(new ContextOverflowError(needed, this.model.contextSize));
    }
    let previous = -1;
    for (const item of request.media ?? []) {
      if (item.at < previous || item.at > request.prefix.length)
        return Promise.reject(new RangeError("media positions must ascend within the prefix"));
      previous = item.at;
    }
    return this.queue.run(() => this.scoreNow(request, mediaTokens, signal));
  }

  private async scoreNow(
    request: ScoreRequest,
    mediaTokens: number,
    signal?: AbortSignal,
  ): Promise<ScoreResult> {
    if (this.closed) throw new Error("the engine is closed");
    signal?.throwIfAborted();
    const media = request.media ?? [];
    // llama.node adds the BOS token itself when the vocabulary asks for one.
    const bos = this.vocabulary.tokens.bos;
    const skip =
      bos !== null && this.vocabulary.tokens.shouldPrependBosToken && request.prefix[0] === bos
        ? 1
        : 0;
    const segments: number[][] = [];
    let from = skip;
    for (const item of media) {
      const at = Math.max(from, item.at);
      segments.push(request.prefix.slice(from, at));
      from = at;
    }
    segments.push(request.prefix.slice(from));
    const toWorker = (branch: ScoreBranch): WorkerBranch => {
      if (branch.tokens.length === 0) throw new Error("a branch must have at least one token");
      return branch.children
        ? {
            tokens: branch.tokens,
            candidates: branch.candidates,
            children: branch.children.map(toWorker),
          }
        : { tokens: branch.tokens, candidates: branch.candidates };
    };
    const branches = request.branches.map(toWorker);
    const images = media.map(
      (item) =>
        `data:${item.image.mimeType};base64,${Buffer.from(item.image.data).toString("base64")}`,
    );
    const reply = await this.request(
      { type: "score", id: 0, prefix: segments, images, branches },
      signal,
    );
    if (reply.type === "error") {
      if (reply.kind === "context")
        throw new ContextOverflowError(this.model.contextSize + 1, this.model.contextSize);
      if (reply.kind === "text") throw new PromptTextError(reply.part ?? "prefix", reply.message);
      throw new Error(`vision engine: ${reply.message}`);
    }
    const result = reply as WorkerResult;
    // The first completion evaluates whatever of the prefix is not cached; the others find the
    // prefix in the KV cache and evaluate their branch.
    const prefixPositions = request.prefix.length + mediaTokens;
    let evaluatedTokens = 0;
    let cachedPrefixTokens = 0;
    result.completions.forEach((c, i) => {
      const cached = Math.min(c.cached, prefixPositions);
      const prefixEvaluated = Math.max(0, Math.min(c.evaluated, prefixPositions - c.cached));
      if (i === 0) {
        cachedPrefixTokens = cached;
        this.counters.prefixTokensCached += cached;
      }
      this.counters.prefixTokensEvaluated += prefixEvaluated;
      this.counters.branchTokensEvaluated += c.evaluated - prefixEvaluated;
      evaluatedTokens += c.evaluated;
    });
    this.counters.requests++;
    const toScore = (s: WorkerBranchScore): BranchScore =>
      s.children ? { logprobs: s.logprobs, children: s.children.map(toScore) } : s;
    return {
      branches: result.branches.map(toScore),
      evaluatedTokens,
      cachedPrefixTokens,
      mediaTokens,
    };
  }

  /**
   * Sends a message and waits for its answer and for the end of its log lines. An aborted request
   * still runs to its end in the worker (the next one queues behind it); its answer is dropped.
   */
  private request(message: ToWorker, signal: AbortSignal | undefined): Promise<FromWorker> {
    if (this.exited) return Promise.reject(this.exited);
    return new Promise<FromWorker>((resolve, reject) => {
      const onAbort = () => reject(signal!.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      const settle = (reply: FromWorker) => {
        signal?.removeEventListener("abort", onAbort);
        if (reply.type === "error" && reply.message === EXITED) reject(this.exited);
        else resolve(reply);
      };
      if (message.type === "score") {
        const id = this.nextId++;
        this.pending.set(id, { logDone: false, settle });
        this.worker.send({ ...message, id });
      } else {
        this.readyWaiter = settle;
        this.worker.send(message);
      }
    });
  }

  private onMessage(message: FromWorker): void {
    if (message.type === "ready" || message.id === undefined) {
      const waiter = this.readyWaiter;
      this.readyWaiter = undefined;
      waiter?.(message);
      return;
    }
    const entry = this.pending.get(message.id);
    if (!entry) return;
    entry.result = message;
    this.finish(message.id);
  }

  private onLogLine(line: string): void {
    const encoded = /image slice encoded in (\d+) ms/.exec(line);
    if (encoded) {
      this.counters.mediaEncoded = (this.counters.mediaEncoded ?? 0) + 1;
      this.counters.mediaEncodeMs = (this.counters.mediaEncodeMs ?? 0) + Number(encoded[1]);
      return;
    }
    if (line.startsWith(DONE_LINE)) {
      const id = Number(line.slice(DONE_LINE.length));
      const entry = this.pending.get(id);
      if (entry) {
        entry.logDone = true;
        this.finish(id);
      }
    }
  }

  /** Settles a request once both its answer and its last log line have arrived. */
  private finish(id: number): void {
    const entry = this.pending.get(id);
    if (!entry?.result || !entry.logDone) return;
    this.pending.delete(id);
    entry.settle(entry.result);
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.exited = new Error(
      `the vision worker exited (${signal ?? `code ${code}`})` +
        (this.closed ? "" : "; restart the service"),
    );
    const failed: FromWorker = { type: "error", message: EXITED };
    for (const [id, entry] of this.pending) {
      this.pending.delete(id);
      entry.settle(failed);
    }
    this.readyWaiter?.(failed);
    this.readyWaiter = undefined;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue.run(async () => {
      if (!this.exited) {
        const exited = new Promise<void>((resolve) => this.worker.once("exit", () => resolve()));
        this.worker.send({ type: "close" } satisfies ToWorker);
        const timer = setTimeout(() => this.worker.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(timer);
      }
      await this.vocabulary.dispose();
      await this.llama.dispose();
    });
  }
}

/**
 * The chat format of Idefics3-family models (SmolVLM): `<|im_start|>User: …<end_of_utterance>\n`
 * … `Assistant:`. Their Jinja template iterates over typed content parts, which node-llama-cpp's
 * Jinja wrapper (plain-string content) cannot render, so it would fall back to ChatML, a format
 * these models were not trained on. Recognised by `<end_of_utterance>` in the GGUF's template.
 * @returns `undefined` for other templates.
 */
export function idefics3TemplateOf(model: LlamaModel): ChatTemplate | undefined {
  const template = (model.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } })
    .tokenizer?.chat_template;
  if (typeof template !== "string" || !template.includes("<end_of_utterance>")) return undefined;
  const role = (r: string) => r.charAt(0).toUpperCase() + r.slice(1);
  return {
    name: "Idefics3",
    render: async (messages) =>
      "<|im_start|>" +
      messages.map((m) => `${role(m.role)}: ${m.content}<end_of_utterance>\n`).join("") +
      "Assistant:",
  };
}

/** Marks a reply that stands for the worker's exit. */
const EXITED = "\u0000exited";

/** Opens a {@link VisionEngine}. */
export function openVisionEngine(options: VisionEngineOptions): Promise<VisionEngine> {
  return VisionEngine.open(options);
}

/**
 * The worker script: the compiled ./vision-worker.js beside this module, or, when this module
 * runs from its TypeScript source (the tests), the build's copy in dist/ (`npm test` builds first).
 */
function workerScript(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const sibling = join(here, "vision-worker.js");
  if (existsSync(sibling)) return sibling;
  const built = join(here, "..", "..", "dist", "engine", "vision-worker.js");
  if (existsSync(built)) return built;
  throw new Error(`the vision worker is not built (${built}); run npm run build`);
}
