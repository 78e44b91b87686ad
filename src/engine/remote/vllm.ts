import {
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
import { PromptTextError } from "../../protocol/prompt-text.js";
import { baseUrl, DEFAULT_ENGINE_DEADLINE_MS, EngineCallError, EngineConnection } from "./http.js";

/**
 * An engine served by vLLM's OpenAI-compatible server (`vllm serve MODEL`, prefix caching on,
 * which is vLLM's default), built against its documented API: `GET /v1/models`, `POST /tokenize`
 * (text, or chat `messages` with `add_generation_prompt`), `POST /detokenize`, and
 * `POST /v1/completions` with token-id prompts.
 *
 * A request is two completion calls, or three:
 * 1. the prefix alone (`max_tokens: 1`), so that it is in vLLM's prefix cache before its branches;
 * 2. every answer position at once (one token-id prompt per branch and per chained child, all
 *    starting with the prefix, which vLLM takes from its cache), `max_tokens: 1`, `logprobs: K`
 *    and `return_tokens_as_token_ids: true`: the top-K log-probabilities of the full vocabulary
 *    at the end of each prompt, keyed `token_id:<id>` (vLLM's default
 *    `--logprobs-mode raw_logprobs`: before temperature or any logits processor);
 * 3. only when a candidate is outside the top K: one prompt per missing candidate, the answer
 *    position's tokens followed by the candidate, with `prompt_logprobs: 0`, which gives the
 *    log-probability of every prompt token, the candidate's last.
 *
 * Not run against a real vLLM here (no GPU): tested on recorded exchanges (test/fixtures/vllm/).
 */

/** Options of {@link VllmEngine.open}. */
export interface VllmOptions {
  /** Base URL of the OpenAI-compatible server, e.g. `http://gpu-box:8000` (without `/v1`). */
  readonly url: string;
  /** Milliseconds one HTTP call may take. Default {@link DEFAULT_ENGINE_DEADLINE_MS}. */
  readonly timeoutMs?: number;
  /** `logprobs` asked per answer position: at most the server's `--max-logprobs` (default 20). */
  readonly topLogprobs?: number;
  /**
   * API key of a server started with `--api-key`, sent as `Authorization: Bearer`; none sends no
   * header. (`serve` takes it from `VLLM_API_KEY`: src/cli/serve-config.ts.)
   */
  readonly apiKey?: string | undefined;
}

/** `GET /v1/models` (the fields read). */
interface Models {
  data?: { id: string; max_model_len?: number }[];
}

/** `POST /tokenize` (the fields read). */
interface Tokenized {
  tokens: number[];
  token_strs?: string[] | null;
  max_model_len?: number;
}

/** One choice of `POST /v1/completions` (the fields read). */
export interface VllmChoice {
  index: number;
  logprobs?: { top_logprobs?: (Record<string, number> | null)[] | null } | null;
  prompt_logprobs?: (Record<string, { logprob: number }> | null)[] | null;
}

/** `POST /v1/completions` (the fields read). */
export interface VllmCompletion {
  choices: VllmChoice[];
  usage?: { prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null };
}

/** One answer position: the tokens after which it is read and the candidates wanted there. */
interface Position {
  readonly tokens: Token[];
  readonly candidates: readonly Token[];
  logprobs?: number[];
}

export class VllmEngine implements Engine {
  readonly counters: EngineCounters = {
    requests: 0,
    prefixTokensEvaluated: 0,
    prefixTokensCached: 0,
    branchTokensEvaluated: 0,
  };
  readonly chatTemplate: ChatTemplate;

  private constructor(
    private readonly http: EngineConnection,
    readonly model: ModelInfo,
    private readonly topLogprobs: number,
  ) {
    this.chatTemplate = {
      name: "vllm",
      // vLLM renders chat templates only into tokens; the text back from /detokenize keeps the
      // special tokens as text, which the Decider tokenizes with `special: true`.
      render: async (messages: readonly ChatMessage[], signal?: AbortSignal) => {
        const { tokens } = await this.http.call<Tokenized>(
          "/tokenize",
          {
            model: this.model.id,
            messages,
            add_generation_prompt: true,
            add_special_tokens: false,
          },
          signal,
        );
        return this.detokenize(tokens, signal);
      },
    };
  }

  /**
   * Connects to a vLLM server and reads its model (`/v1/models`: name and `max_model_len`).
   * @throws {@link EngineCallError} when it does not answer or serves no model.
   * @example
   * ```ts
   * const engine = await VllmEngine.open({ url: "http://gpu-box:8000" });
   * ```
   */
  static async open(options: VllmOptions, signal?: AbortSignal): Promise<VllmEngine> {
    const url = baseUrl(options.url).replace(/\/v1$/, "");
    const http = new EngineConnection(
      url,
      options.timeoutMs ?? DEFAULT_ENGINE_DEADLINE_MS,
      options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
    );
    const models = await http.call<Models>("/v1/models", undefined, signal);
    const served = Array.isArray(models.data) ? models.data[0] : undefined;
    if (typeof served?.id !== "string" || served.id === "")
      throw new EngineCallError(url, "/v1/models lists no model (an entry with an id)");
    const length = served.max_model_len;
    const contextSize = Number.isInteger(length) && length! > 0 ? length! : 4096;
    const model: ModelInfo = {
      id: served.id,
      path: `${url}/v1/models/${served.id}`,
      contextSize,
      trainContextSize: contextSize,
      vision: false,
    };
    return new VllmEngine(http, model, options.topLogprobs ?? 20);
  }

  /** The server's base URL (without `/v1`). */
  get url(): string {
    return this.http.url;
  }

  /**
   * Tokenizes with the served model's tokenizer (`/tokenize`, no special tokens added).
   * vLLM's tokenizer always reads special-token text as special tokens; with `special: false`
   * a token that is a whole `<…>` special token whose text is in `text` is refused with
   * {@link PromptTextError}, so a state cannot smuggle in a control token.
   */
  async tokenize(text: string, options: TokenizeOptions = {}): Promise<Token[]> {
    const answer = await this.http.call<Tokenized>(
      "/tokenize",
      {
        model: this.model.id,
        prompt: text,
        add_special_tokens: false,
        return_token_strs: !options.special,
      },
      options.signal,
    );
    if (!options.special)
      for (const piece of answer.token_strs ?? [])
        if (/^<[^\s<>]+>$/.test(piece) && piece.length > 2 && text.includes(piece))
          throw new PromptTextError("prefix", piece);
    return answer.tokens;
  }

  async detokenize(tokens: readonly Token[], signal?: AbortSignal): Promise<string> {
    const answer = await this.http.call<{ prompt: string }>(
      "/detokenize",
      { model: this.model.id, tokens },
      signal,
    );
    return answer.prompt;
  }

  /** `GET /health`: 200 when the engine runs. Never throws. */
  async ready(signal?: AbortSignal): Promise<boolean> {
    try {
      await this.http.call("/health", undefined, signal).catch((error: unknown) => {
        // /health answers 200 with an empty body.
        if (error instanceof EngineCallError && error.message.includes("not JSON")) return;
        throw error;
      });
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Scores a request in two or three completion calls (see the class comment).
   * @throws {@link ContextOverflowError} when prefix + a branch path exceeds `max_model_len`.
   * @throws {@link EngineCallError} when the server does not answer; the signal's reason on abort.
   */
  async score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    if (request.media?.length) throw new Error(`model ${this.model.id} does not accept images`);
    const overflow = contextOverflowOf(request, this.model.contextSize);
    if (overflow) throw overflow;
    const prefix = [...request.prefix];
    const first = await this.complete({ prompt: prefix, max_tokens: 1 }, signal);
    const prefixCached = first.usage?.prompt_tokens_details?.cached_tokens ?? 0;

    const positions: Position[] = [];
    const layout = request.branches.map((branch) => collect(branch, prefix, positions));
    const answer = await this.complete(
      {
        prompt: positions.map((p) => p.tokens),
        max_tokens: 1,
        logprobs: this.topLogprobs,
        return_tokens_as_token_ids: true,
      },
      signal,
    );
    const byIndex = new Map(answer.choices.map((c) => [c.index, c]));
    const missing: { position: Position; at: number }[] = [];
    positions.forEach((position, i) => {
      const top = byIndex.get(i)?.logprobs?.top_logprobs?.[0];
      if (!top)
        throw new EngineCallError(this.url, `/v1/completions gave no logprobs for prompt ${i}`);
      position.logprobs = position.candidates.map((candidate, at) => {
        const value = top[`token_id:${candidate}`];
        if (value === undefined) {
          missing.push({ position, at });
          return NaN;
        }
        return value;
      });
    });
    if (missing.length > 0) {
      const exact = await this.complete(
        {
          prompt: missing.map(({ position, at }) => [...position.tokens, position.candidates[at]!]),
          max_tokens: 1,
          prompt_logprobs: 0,
        },
        signal,
      );
      const exactByIndex = new Map(exact.choices.map((c) => [c.index, c]));
      missing.forEach(({ position, at }, i) => {
        const candidate = position.candidates[at]!;
        const entry = exactByIndex.get(i)?.prompt_logprobs?.at(-1)?.[String(candidate)];
        if (!entry) throw new EngineCallError(this.url, `no prompt logprob for token ${candidate}`);
        position.logprobs![at] = entry.logprob;
      });
    }
    const branchTokens = answer.usage?.prompt_tokens ?? 0;
    const branchCached = answer.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    const prefixEvaluated = prefix.length - prefixCached;
    this.counters.requests++;
    this.counters.prefixTokensEvaluated += prefixEvaluated;
    this.counters.prefixTokensCached += prefixCached;
    this.counters.branchTokensEvaluated += Math.max(0, branchTokens - branchCached);
    return {
      branches: layout.map((node) => node.read()),
      evaluatedTokens: prefixEvaluated + Math.max(0, branchTokens - branchCached),
      cachedPrefixTokens: prefixCached,
    };
  }

  private complete(body: Record<string, unknown>, signal?: AbortSignal): Promise<VllmCompletion> {
    return this.http.call<VllmCompletion>(
      "/v1/completions",
      { model: this.model.id, temperature: 0, ...body },
      signal,
    );
  }

  async close(): Promise<void> {
    this.http.close();
  }
}

/** A branch's answer positions (its own, then its children's), to read back as a BranchScore. */
interface Node {
  read(): BranchScore;
}

function collect(branch: ScoreBranch, before: readonly Token[], positions: Position[]): Node {
  if (branch.tokens.length === 0) throw new Error("a branch must have at least one token");
  const tokens = [...before, ...branch.tokens];
  const position: Position = { tokens, candidates: branch.candidates };
  positions.push(position);
  const children = branch.children?.map((child) => collect(child, tokens, positions));
  return {
    read: () =>
      children
        ? { logprobs: position.logprobs!, children: children.map((c) => c.read()) }
        : { logprobs: position.logprobs! },
  };
}
