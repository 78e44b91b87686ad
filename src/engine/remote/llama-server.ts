import { sharedStart } from "../branch-schedule.js";
import {
  branchDepthTokens,
  ContextOverflowError,
  type BranchScore,
  type ChatMessage,
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
import { baseUrl, callJson, EngineCallError } from "./http.js";

/**
 * An engine served by llama.cpp's `llama-server` over its native HTTP API, any GGUF:
 * `/tokenize`, `/detokenize`, `/apply-template` (the server's chat template), and `/completion`
 * with token ids as the prompt, `n_predict: 0`, `n_probs` and `post_sampling_probs: false` (the
 * full-vocabulary probabilities at the answer position, before any sampler) and
 * `cache_prompt: true`, so that the server keeps the prefix in the slot's KV cache and evaluates
 * only what a call adds to the previous one.
 *
 * A request is sent as one call for the prefix, then one call per branch (in token order, so a
 * branch starts from what it shares with the previous one) and one per chained child; each call
 * evaluates only its new tokens (`timings.prompt_n`), the state once per request. The prefix has
 * a call of its own so that its tokens and the branch's go through llama.cpp's kernels as in the
 * embedded engine (decisions/047).
 */

/** Options of {@link LlamaServerEngine.open}. */
export interface LlamaServerOptions {
  /** Base URL, e.g. `http://127.0.0.1:8081`. */
  readonly url: string;
  /** Milliseconds one HTTP call may take before the engine counts as unanswering. Default 30 000. */
  readonly timeoutMs?: number;
  /**
   * Top probabilities asked per answer position first; candidates outside them are asked again
   * with `n_probs` = the vocabulary size. Default 64.
   */
  readonly topProbs?: number;
}

/** What `GET /props` answers (the fields read). */
interface Props {
  default_generation_settings?: { n_ctx?: number };
  model_path?: string;
  model_alias?: string;
  chat_template?: string;
  total_slots?: number;
  modalities?: { vision?: boolean };
  build_info?: string;
}

/** What `GET /v1/models` answers (the fields read). */
interface Models {
  data?: { id?: string; meta?: { n_vocab?: number; n_ctx_train?: number; n_ctx?: number } }[];
}

/** One probability entry of `/completion`'s `completion_probabilities[i].top_logprobs`. */
interface TopLogprob {
  id: number;
  logprob: number;
}

/** What `/completion` answers (the fields read). */
export interface CompletionAnswer {
  completion_probabilities?: { top_logprobs?: TopLogprob[] }[];
  tokens_cached?: number;
  timings?: { prompt_n?: number; cache_n?: number };
}

/** The counters of a remote llama-server, with what its `timings` report. */
export interface LlamaServerCounters extends EngineCounters {
  /** `/completion` calls made. */
  completionCalls: number;
  /** Sum of `timings.prompt_n`: tokens the server evaluated. */
  promptTokensEvaluated: number;
  /** Sum of `timings.cache_n`: tokens the server took from its KV cache. */
  promptTokensCached: number;
}

export class LlamaServerEngine implements Engine {
  readonly counters: LlamaServerCounters = {
    requests: 0,
    prefixTokensEvaluated: 0,
    prefixTokensCached: 0,
    branchTokensEvaluated: 0,
    completionCalls: 0,
    promptTokensEvaluated: 0,
    promptTokensCached: 0,
  };
  readonly chatTemplate: ChatTemplate;
  /** The `timings` of each `/completion` call of the last {@link score} (for tests and the bench). */
  lastTimings: { prompt_n: number; cache_n: number }[] = [];
  private closed = false;
  /**
   * The server's slots: one request holds one slot for all its calls (`id_slot`), so its calls
   * follow each other in that slot's KV cache and no other request's prompt comes between them.
   */
  private readonly slots: SlotPool;

  private constructor(
    readonly url: string,
    readonly model: ModelInfo,
    /** Tokens in the vocabulary, the largest `n_probs` worth asking. */
    readonly vocabularySize: number,
    /** Slots the server runs side by side (`--parallel`). */
    readonly slotCount: number,
    private readonly timeoutMs: number,
    private readonly topProbs: number,
  ) {
    this.slots = new SlotPool(slotCount);
    this.chatTemplate = {
      name: "llama-server",
      render: async (messages: readonly ChatMessage[], signal?: AbortSignal) => {
        const answer = await this.call<{ prompt: string }>(
          "/apply-template",
          { messages, add_generation_prompt: true },
          signal,
        );
        return answer.prompt;
      },
    };
  }

  /**
   * Connects to a running llama-server and reads its model: `/props` (slot context size, model
   * path) and `/v1/models` (vocabulary, training context).
   * @throws {EngineCallError} when the server does not answer.
   * @example const engine = await LlamaServerEngine.open({ url: "http://127.0.0.1:8081" });
   */
  static async open(options: LlamaServerOptions, signal?: AbortSignal): Promise<LlamaServerEngine> {
    const url = baseUrl(options.url);
    const timeoutMs = options.timeoutMs ?? 30_000;
    const call = { timeoutMs, ...(signal ? { signal } : {}) };
    const props = await callJson<Props>(url, "/props", undefined, call);
    const models = await callJson<Models>(url, "/v1/models", undefined, call);
    const meta = models.data?.[0]?.meta ?? {};
    const contextSize = props.default_generation_settings?.n_ctx ?? meta.n_ctx;
    if (!contextSize || !meta.n_vocab)
      throw new EngineCallError(url, "/props and /v1/models do not say the context or vocabulary");
    const path = props.model_path ?? url;
    // The alias is the model path unless the server was started with `--alias`.
    const id = ((props.model_alias || path).split(/[\\/]/).pop() || url).replace(/\.gguf$/i, "");
    const model: ModelInfo = {
      id,
      path,
      contextSize,
      trainContextSize: meta.n_ctx_train ?? contextSize,
      vision: false,
    };
    return new LlamaServerEngine(
      url,
      model,
      meta.n_vocab,
      props.total_slots ?? 1,
      timeoutMs,
      options.topProbs ?? 64,
    );
  }

  private call<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    if (this.closed) return Promise.reject(new Error("the engine is closed"));
    return callJson<T>(this.url, path, body, {
      timeoutMs: this.timeoutMs,
      ...(signal ? { signal } : {}),
    });
  }

  async tokenize(text: string, options: TokenizeOptions = {}): Promise<Token[]> {
    const answer = await this.call<{ tokens: number[] }>(
      "/tokenize",
      { content: text, add_special: false, parse_special: options.special ?? false },
      options.signal,
    );
    return answer.tokens;
  }

  async detokenize(tokens: readonly Token[], signal?: AbortSignal): Promise<string> {
    const answer = await this.call<{ content: string }>("/detokenize", { tokens }, signal);
    return answer.content;
  }

  /** `GET /health`: 200 once the model is loaded. Never throws. */
  async ready(signal?: AbortSignal): Promise<boolean> {
    try {
      await this.call("/health", undefined, signal);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Scores a request: the prefix in one `/completion` call, then each branch on top of it (in
   * token order) and each chained child on top of its branch. See the class comment.
   * @throws {ContextOverflowError} when prefix + a branch path exceeds the slot's context.
   * @throws {EngineCallError} when the server does not answer; the signal's reason on abort.
   */
  async score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    if (request.media?.length) throw new Error(`model ${this.model.id} does not accept images`);
    for (const branch of request.branches) {
      const needed = request.prefix.length + branchDepthTokens(branch);
      if (needed > this.model.contextSize)
        throw new ContextOverflowError(needed, this.model.contextSize);
    }
    const slot = await this.slots.acquire(signal);
    try {
      return await this.scoreOnSlot(slot, request, signal);
    } finally {
      this.slots.release(slot);
    }
  }

  private async scoreOnSlot(
    slot: number,
    request: ScoreRequest,
    signal?: AbortSignal,
  ): Promise<ScoreResult> {
    const timings: { prompt_n: number; cache_n: number }[] = [];
    const prefix = request.prefix;
    const first = await this.complete(slot, prefix, 0, signal);
    timings.push(first.timings);
    const cachedPrefixTokens = Math.min(first.timings.cache_n, prefix.length);
    // Branches in token order: each starts from the tokens it shares with the previous one,
    // which the server keeps in the slot's cache.
    const order = request.branches
      .map((branch, index) => ({ branch, index }))
      .sort((a, b) => compareTokens(a.branch.tokens, b.branch.tokens));
    const scores: BranchScore[] = new Array(request.branches.length);
    const read = async (branch: ScoreBranch, before: readonly Token[]): Promise<BranchScore> => {
      if (branch.tokens.length === 0) throw new Error("a branch must have at least one token");
      const tokens = [...before, ...branch.tokens];
      const answer = await this.complete(slot, tokens, this.topProbs, signal);
      timings.push(answer.timings);
      const logprobs = await this.candidateLogprobs(
        slot,
        tokens,
        answer.top,
        branch.candidates,
        signal,
      );
      if (!branch.children) return { logprobs };
      const children: BranchScore[] = [];
      for (const child of branch.children) children.push(await read(child, tokens));
      return { logprobs, children };
    };
    for (const { branch, index } of order) scores[index] = await read(branch, prefix);
    const evaluatedTokens = timings.reduce((sum, t) => sum + t.prompt_n, 0);
    this.counters.requests++;
    this.counters.prefixTokensEvaluated += first.timings.prompt_n;
    this.counters.prefixTokensCached += cachedPrefixTokens;
    this.counters.branchTokensEvaluated += evaluatedTokens - first.timings.prompt_n;
    this.lastTimings = timings;
    return { branches: scores, evaluatedTokens, cachedPrefixTokens };
  }

  /**
   * One `/completion` call: evaluates `tokens` (the server takes what its slot shares with them
   * from its cache) and returns the top `nProbs` log-probabilities at the position after them.
   */
  private async complete(
    slot: number,
    tokens: readonly Token[],
    nProbs: number,
    signal?: AbortSignal,
  ): Promise<{ top: Map<Token, number>; timings: { prompt_n: number; cache_n: number } }> {
    const answer = await this.call<CompletionAnswer>(
      "/completion",
      {
        prompt: tokens,
        n_predict: 0,
        n_probs: nProbs,
        post_sampling_probs: false,
        cache_prompt: true,
        temperature: 0,
        id_slot: slot,
      },
      signal,
    );
    this.counters.completionCalls++;
    const timings = {
      prompt_n: answer.timings?.prompt_n ?? tokens.length,
      cache_n: answer.timings?.cache_n ?? answer.tokens_cached ?? 0,
    };
    this.counters.promptTokensEvaluated += timings.prompt_n;
    this.counters.promptTokensCached += timings.cache_n;
    const top = new Map<Token, number>();
    for (const entry of answer.completion_probabilities?.[0]?.top_logprobs ?? [])
      top.set(entry.id, entry.logprob);
    if (nProbs > 0 && top.size === 0)
      throw new EngineCallError(this.url, "/completion returned no probabilities (n_probs)");
    return { top, timings };
  }

  /**
   * The candidates' log-probabilities from a call's top entries; candidates outside them are read
   * from a second call asking for the whole vocabulary (the position's logits are evaluated once
   * more, alone: those candidates are below every top entry, so the difference is far below
   * what a readout can show).
   */
  private async candidateLogprobs(
    slot: number,
    tokens: readonly Token[],
    top: ReadonlyMap<Token, number>,
    candidates: readonly Token[],
    signal?: AbortSignal,
  ): Promise<number[]> {
    let all: ReadonlyMap<Token, number> | undefined;
    if (candidates.some((c) => !top.has(c)))
      all = (await this.complete(slot, tokens, this.vocabularySize, signal)).top;
    return candidates.map((candidate) => {
      const value = top.get(candidate) ?? all?.get(candidate);
      if (value === undefined)
        throw new EngineCallError(this.url, `no probability for token ${candidate}`);
      return value;
    });
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/** Element-wise order of token arrays (a shorter array first when it starts the other). */
export function compareTokens(a: readonly Token[], b: readonly Token[]): number {
  const n = sharedStart(a, b);
  if (n < a.length && n < b.length) return a[n]! - b[n]!;
  return a.length - b.length;
}

/** Slot ids 0…n−1 handed out one request at a time, waiters served first come, first served. */
export class SlotPool {
  private readonly free: number[];
  private readonly waiting: { resolve: (slot: number) => void; reject: (e: unknown) => void }[] =
    [];

  constructor(count: number) {
    this.free = Array.from({ length: Math.max(1, count) }, (_, i) => i);
  }

  /** Requests waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  /** A free slot id, now or when one is released. @throws the signal's reason on abort. */
  acquire(signal?: AbortSignal): Promise<number> {
    signal?.throwIfAborted();
    const slot = this.free.shift();
    if (slot !== undefined) return Promise.resolve(slot);
    return new Promise<number>((resolve, reject) => {
      const waiter = {
        resolve: (s: number) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(s);
        },
        reject,
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  release(slot: number): void {
    const next = this.waiting.shift();
    if (next) next.resolve(slot);
    else this.free.push(slot);
  }
}
