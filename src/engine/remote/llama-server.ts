import { planDecode } from "../decode/index.js";
import {
  branchTotalTokens,
  contextOverflowOf,
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
import {
  baseUrl,
  DEFAULT_ENGINE_DEADLINE_MS,
  EngineCallError,
  EngineConnection,
  EngineRequestError,
} from "./http.js";
import { completeOnSlot, modelOf, type Completion, type LoraScales } from "./completion-answer.js";
import type { Models, Props } from "./completion-answer.js";
import { checkLoadedAdapter } from "./llama-server-adapter.js";
import { openServerSlots, type ServerSlots } from "./llama-server-slots.js";
import { SlotTurn } from "./slot-pool.js";

export { topLogprobs, type CompletionAnswer } from "./completion-answer.js";
export { SlotPool, SlotTurn } from "./slot-pool.js";

/**
 * An engine served by llama.cpp's `llama-server` over its native HTTP API, any GGUF:
 * `/tokenize`, `/detokenize`, `/apply-template` (the server's chat template), and `/completion`
 * with token ids as the prompt, `n_predict: 0`, `n_probs` and `post_sampling_probs: false` (the
 * full-vocabulary probabilities at the answer position, before any sampler) and
 * `cache_prompt: true`, so that the server keeps the prefix in the slot's KV cache and evaluates
 * only what a call adds to the previous one.
 *
 * A request holds one slot and is sent as the embedded engine evaluates it: the prefix in calls
 * of its own, then each branch on top of it (in token order, starting from what it shares with
 * the previous one) and each chained child on top of its branch, every call cut where the
 * embedded engine cuts its decode calls ({@link LlamaServerEngine.scoreOnSlot}). Each call
 * evaluates only its new tokens (`timings.prompt_n`): the state once per request. Between two
 * calls it gives its slot up to a waiting request with less work left, on a server that restores
 * the displaced prompt from its host-memory cache, and goes on in its next turn ({@link SlotTurn});
 * where the server did not keep that prompt, the request evaluates the lost part again. A slot
 * whose call went unanswered goes to the next request once the server is done with it
 * ({@link ServerSlots.release}). Why the calls are cut so: docs/decisions/047; why requests take
 * turns: docs/decisions/106.
 */

/** Options of {@link LlamaServerEngine.open}. */
export interface LlamaServerOptions {
  /** Base URL, e.g. `http://127.0.0.1:8081`. */
  readonly url: string;
  /**
   * The LoRA adapter the server must have loaded (a file path, or `"none"`); absent: not checked.
   * Every call then names it at scale 1 and every other loaded adapter at 0
   * ({@link checkLoadedAdapter}), so that the server's own scales change no answer.
   */
  readonly adapter?: string | undefined;
  /**
   * Milliseconds one HTTP call may take before the engine counts as unanswering. Default
   * {@link DEFAULT_ENGINE_DEADLINE_MS}.
   */
  readonly timeoutMs?: number;
  /**
   * Top probabilities asked per answer position first; candidates outside them are asked again
   * with `n_probs` = the vocabulary size. Default 64.
   */
  readonly topProbs?: number;
  /**
   * Most tokens one call evaluates, at most the server's `--ubatch-size` (default 512), at least
   * 128. Default 512.
   */
  readonly batchSize?: number;
  /** Told what decisiond does differently from what the server offers (e.g. fewer slots). */
  readonly onNotice?: ((message: string) => void) | undefined;
  /**
   * The engine this one replaces on the same server (a pool opens an engine again after an
   * outage): its slots are taken over ({@link openServerSlots}).
   */
  readonly replaces?: LlamaServerEngine | undefined;
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
  private constructor(
    private readonly http: EngineConnection,
    readonly model: ModelInfo,
    /** Tokens in the vocabulary, the largest `n_probs` worth asking. */
    readonly vocabularySize: number,
    /**
     * The server's slots: a request holds one for its calls (`id_slot`), so they follow each
     * other in that slot's KV cache, until it gives the slot up between two calls ({@link SlotTurn}).
     */
    private readonly slots: ServerSlots,
    /** Every call's adapter scales ({@link checkLoadedAdapter}); `undefined`: the server's own. */
    private readonly lora: LoraScales | undefined,
    private readonly topProbs: number,
    /** Largest call, at most the server's `--ubatch-size`. */
    private readonly batchSize: number,
  ) {
    this.chatTemplate = {
      name: "llama-server",
      render: async (messages: readonly ChatMessage[], signal?: AbortSignal) => {
        const answer = await this.http.call<{ prompt: string }>(
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
   * @throws {@link EngineCallError} when the server does not answer, or applies another adapter.
   * @example
   * ```ts
   * const engine = await LlamaServerEngine.open({ url: "http://127.0.0.1:8081" });
   * ```
   */
  static async open(options: LlamaServerOptions, signal?: AbortSignal): Promise<LlamaServerEngine> {
    const url = baseUrl(options.url);
    const http = new EngineConnection(url, options.timeoutMs ?? DEFAULT_ENGINE_DEADLINE_MS);
    const props = await http.call<Props>("/props", undefined, signal);
    const lora = options.adapter
      ? await checkLoadedAdapter(http, options.adapter, signal)
      : undefined;
    const models = await http.call<Models>("/v1/models", undefined, signal);
    const { model, vocabularySize } = modelOf(url, props, models);
    const total = props.total_slots ?? 1;
    const server = { http, total, vocabularySize, lora };
    const slots = await openServerSlots(server, options.replaces?.slots, options.onNotice, signal);
    const [topProbs, batchSize] = [options.topProbs ?? 64, options.batchSize ?? 512];
    return new LlamaServerEngine(http, model, vocabularySize, slots, lora, topProbs, batchSize);
  }

  /** Slots of the server in use: its `--parallel`, or 1 ({@link openServerSlots}). */
  get slotCount(): number {
    return this.slots.count;
  }

  /** The server's base URL. */
  get url(): string {
    return this.http.url;
  }

  async tokenize(text: string, options: TokenizeOptions = {}): Promise<Token[]> {
    const answer = await this.http.call<{ tokens: unknown }>(
      "/tokenize",
      { content: text, add_special: false, parse_special: options.special ?? false },
      options.signal,
    );
    const { tokens } = answer;
    const valid =
      Array.isArray(tokens) &&
      (tokens.length > 0 || text === "") &&
      tokens.every(
        (t) => Number.isInteger(t) && (t as number) >= 0 && (t as number) < this.vocabularySize,
      );
    if (!valid)
      throw new EngineCallError(this.url, `/tokenize answered tokens that are not this model's`);
    return tokens as Token[];
  }

  async detokenize(tokens: readonly Token[], signal?: AbortSignal): Promise<string> {
    const answer = await this.http.call<{ content: string }>("/detokenize", { tokens }, signal);
    return answer.content;
  }

  /** `GET /health`: 200 once the model is loaded. Never throws. */
  async ready(signal?: AbortSignal): Promise<boolean> {
    try {
      await this.http.call("/health", undefined, signal);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Scores a request: the prefix in one `/completion` call, then each branch on top of it (in
   * token order) and each chained child on top of its branch. See the class comment.
   * @throws {@link ContextOverflowError} when prefix + a branch path exceeds the slot's context.
   * @throws {@link EngineCallError} when the server does not answer; the signal's reason on abort.
   */
  async score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    if (request.media?.length) throw new Error(`model ${this.model.id} does not accept images`);
    const overflow = contextOverflowOf(request, this.model.contextSize);
    if (overflow) throw overflow;
    const work = request.branches.reduce((n, b) => n + branchTotalTokens(b), request.prefix.length);
    const turn = await SlotTurn.take(this.slots.pool, work, signal);
    try {
      return await this.scoreOnSlot(turn, request, signal);
    } finally {
      void this.slots.release(this.http, turn);
    }
  }

  /**
   * The request's calls on one slot, cut as the embedded engine cuts its decode calls (its
   * decode plan, engine/decode/): the prefix resumes after what the slot holds of the
   * previous prefix only where the embedded engine would take it over, and is evaluated in calls
   * of at least 64 tokens; the branches follow the embedded engine's one-lane schedule (common
   * lead, then each branch from the start it may take over from the previous one) and its call
   * sizes; chained children are one call each. Every token thus goes through the attention kernel
   * it goes through in-process, which is what makes the answers match (decisions/047).
   */
  private async scoreOnSlot(
    turn: SlotTurn,
    request: ScoreRequest,
    signal?: AbortSignal,
  ): Promise<ScoreResult> {
    const timings: { prompt_n: number; cache_n: number }[] = [];
    const prefix = request.prefix;
    const length = prefix.length;
    // The embedded engine's plan on a CPU: one lane (decisions/047).
    const plan = planDecode(request, this.slots.held.heldPrefix(turn.slot, prefix), {
      lanes: 1,
      batchSize: this.batchSize,
    });
    const { resume, calls } = plan.prefix;
    if (resume < length) {
      const last = calls.at(-1)!;
      await this.evaluate(turn, prefix, resume, calls.slice(0, -1), 0, timings, signal);
      turn.prefixLength = length; // recorded with the call that ends the prefix
      await this.evaluate(turn, prefix, length - last, [last], 0, timings, signal);
    }
    turn.prefixLength = length;
    const prefixEvaluated = timings.reduce((sum, t) => sum + t.prompt_n, 0);
    const cachedPrefixTokens = length - Math.min(length, prefixEvaluated);

    const first = request.branches[0];
    if (first && plan.lead.length > 0) {
      const withLead = [...prefix, ...first.tokens.slice(0, plan.lead.length)];
      await this.evaluate(turn, withLead, length, plan.lead.calls, 0, timings, signal);
    }
    const scores: BranchScore[] = new Array<BranchScore>(request.branches.length);
    const read = async (
      branch: ScoreBranch,
      before: readonly Token[],
      from: number,
      calls: readonly number[],
    ): Promise<BranchScore> => {
      if (branch.tokens.length === 0) throw new Error("a branch must have at least one token");
      const tokens = [...before, ...branch.tokens];
      const top = await this.evaluate(turn, tokens, from, calls, this.topProbs, timings, signal);
      const logprobs = await this.candidateLogprobs(turn, tokens, top, branch.candidates, signal);
      if (!branch.children) return { logprobs };
      const children: BranchScore[] = [];
      for (const child of branch.children)
        children.push(await read(child, tokens, tokens.length, [child.tokens.length]));
      return { logprobs, children };
    };
    for (const { index, shared: start, calls } of plan.lanes[0] ?? [])
      scores[index] = await read(request.branches[index]!, prefix, length + start, calls);
    const evaluatedTokens = timings.reduce((sum, t) => sum + t.prompt_n, 0);
    this.counters.requests++;
    this.counters.prefixTokensEvaluated += prefixEvaluated;
    this.counters.prefixTokensCached += cachedPrefixTokens;
    this.counters.branchTokensEvaluated += evaluatedTokens - prefixEvaluated;
    this.lastTimings = timings;
    return { branches: scores, evaluatedTokens, cachedPrefixTokens };
  }

  /**
   * Evaluates `target[from…]` on the slot in calls of `calls` tokens (the last one reads the top
   * `nProbs` log-probabilities), giving the slot up between calls when a shorter request waits.
   * Before a call from `at`, a slot that holds more of `target` than `at`, or holds what is unknown
   * (after a move: the server brings the request's prompt back), is cut back to `target[0…at)`:
   * a call of `target[0…at)` and a token other than `target[at]`, so that the server's prompt
   * cache keeps exactly `at` tokens and evaluates the rest in the given calls. A call from the
   * start reuses no token the slot holds (`cache_prompt: false`): after a cut to nothing, the
   * server would restore into the slot whichever cached prompt shares most with the call, whose
   * first tokens another request may have evaluated in calls cut otherwise.
   */
  private async evaluate(
    turn: SlotTurn,
    target: readonly Token[],
    from: number,
    calls: readonly number[],
    nProbs: number,
    timings: { prompt_n: number; cache_n: number }[],
    signal?: AbortSignal,
  ): Promise<Map<Token, number>> {
    let at = from;
    let top = new Map<Token, number>();
    for (const [i, size] of calls.entries()) {
      if (await turn.beforeCall(this.slots.turns, signal)) this.slots.held.forget(turn.slot);
      const whole = at === 0;
      if (!whole && this.slots.held.mustCut(turn.slot, target, at)) {
        const other = ((target[at] ?? 0) + 1) % this.vocabularySize;
        const cut = await this.complete(turn, [...target.slice(0, at), other], 0, signal);
        timings.push(cut.timings);
      }
      at += size;
      const nTop = i === calls.length - 1 ? nProbs : 0;
      const answer = await this.complete(turn, target.slice(0, at), nTop, signal, whole);
      timings.push(answer.timings);
      top = answer.top;
    }
    return top;
  }

  /**
   * One `/completion` call on the turn's slot ({@link completeOnSlot}), with what decisiond keeps
   * of it: what the slot holds, the turn's work left, the counters.
   */
  private async complete(
    turn: SlotTurn,
    tokens: readonly Token[],
    nProbs: number,
    signal?: AbortSignal,
    whole = false,
  ): Promise<Completion> {
    const slot = turn.slot;
    this.slots.held.forget(slot);
    const { lora, vocabularySize } = this;
    const call = { tokens, nProbs, slot, lora, vocabularySize, whole };
    const answer = await completeOnSlot(this.http, call, signal).catch((error: unknown) => {
      // Only a refusal (4xx) says the server is done with the call.
      turn.unanswered ||= !(error instanceof EngineRequestError);
      throw error;
    });
    this.counters.completionCalls++;
    this.slots.held.called(slot, tokens, turn.prefixLength);
    turn.afterCall(answer.timings.prompt_n);
    this.counters.promptTokensEvaluated += answer.timings.prompt_n;
    this.counters.promptTokensCached += answer.timings.cache_n;
    return answer;
  }

  /**
   * The candidates' log-probabilities from a call's top entries; those outside them from a second
   * call asking for the whole vocabulary (the position evaluated once more, alone: those are below
   * every top entry, so the difference is far below what a readout can show).
   */
  private async candidateLogprobs(
    turn: SlotTurn,
    tokens: readonly Token[],
    top: ReadonlyMap<Token, number>,
    candidates: readonly Token[],
    signal?: AbortSignal,
  ): Promise<number[]> {
    let all: ReadonlyMap<Token, number> | undefined;
    if (candidates.some((c) => !top.has(c)))
      all = (await this.complete(turn, tokens, this.vocabularySize, signal)).top;
    return candidates.map((candidate) => {
      const value = top.get(candidate) ?? all?.get(candidate);
      if (value === undefined)
        throw new EngineCallError(this.url, `no probability for token ${candidate}`);
      return value;
    });
  }

  async close(): Promise<void> {
    this.http.close();
  }
}
