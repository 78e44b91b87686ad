import {
  getLlama,
  LlamaLogLevel,
  type Llama,
  type LlamaModel,
  type Token as LlamaToken,
} from "node-llama-cpp";
import { basename } from "node:path";
import { chatTemplateOf } from "../llama/chat.js";
import { SerialQueue } from "../serial-queue.js";
import { WorkerLink } from "./link.js";
import { idefics3TemplateOf } from "./template.js";
import { type WorkerBranch, type WorkerBranchScore, type WorkerResult } from "./protocol.js";
import {
  ContextOverflowError,
  contextOverflowOf,
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
} from "../types.js";
import { PromptTextError } from "../../protocol/prompt-text.js";

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
 * A vision-language engine: a GGUF text model plus its mmproj projector, on llama.cpp's
 * multimodal library (mtmd) through `@fugood/llama.node` in a worker process (./link.ts,
 * ./worker.ts). It plans like {@link LlamaEngine}: `tokenize`, `detokenize` and the chat
 * template read the same GGUF through node-llama-cpp (vocabulary only). `score` evaluates the
 * prefix with its images once and every branch on top of it, and returns each candidate's
 * log-probability at the branch's end, read from the raw logits' softmax over the whole
 * vocabulary.
 *
 * It throws {@link ContextOverflowError} when a branch does not fit the context, and
 * {@link PromptTextError} for text that would not tokenize back to its tokens (a state holding
 * `<|im_end|>`, say), which is refused rather than sent as a control token.
 */
// Why a worker process, prompts as text, and how the readout is read: docs/decisions/053
export class VisionEngine implements Engine {
  private readonly queue = new SerialQueue();
  private closed = false;
  model!: ModelInfo;
  readonly chatTemplate: ChatTemplate;

  private constructor(
    private readonly llama: Llama,
    private readonly vocabulary: LlamaModel,
    private readonly worker: WorkerLink,
    /** Token and media counters since the engine opened; the worker link adds the encode times. */
    readonly counters: EngineCounters,
  ) {
    this.chatTemplate = idefics3TemplateOf(vocabulary) ?? chatTemplateOf(vocabulary);
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
      const counters = emptyCounters();
      const worker = WorkerLink.start((ms) => {
        counters.mediaEncoded = (counters.mediaEncoded ?? 0) + 1;
        counters.mediaEncodeMs = (counters.mediaEncodeMs ?? 0) + ms;
      });
      engine = new VisionEngine(llama, vocabulary, worker, counters);
      const ready = await worker.request(
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
        imageSize: ready.imageSize,
        imageTokens: ready.imageTokens,
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
    return this.vocabulary.tokenize(text, options.special ?? false);
  }

  async detokenize(tokens: readonly Token[], signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    return this.vocabulary.detokenize(tokens as LlamaToken[], true);
  }

  score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    const mediaTokens = (request.media?.length ?? 0) * this.model.imageTokens!;
    const overflow = contextOverflowOf(request, this.model.contextSize, mediaTokens);
    if (overflow) return Promise.reject(overflow);
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
    const reply = await this.worker.request(
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

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue.run(async () => {
      await this.worker.close();
      await this.vocabulary.dispose();
      await this.llama.dispose();
    });
  }
}

/** Opens a {@link VisionEngine}. */
export function openVisionEngine(options: VisionEngineOptions): Promise<VisionEngine> {
  return VisionEngine.open(options);
}

function emptyCounters(): EngineCounters {
  return {
    requests: 0,
    prefixTokensEvaluated: 0,
    prefixTokensCached: 0,
    branchTokensEvaluated: 0,
    mediaEncoded: 0,
    mediaEncodeMs: 0,
  };
}
