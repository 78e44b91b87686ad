import type { ModelInfo, Token } from "../types.js";
import { EngineCallError, type EngineConnection } from "./http.js";

/** What `GET /props` answers (the fields read). */
export interface Props {
  default_generation_settings?: { n_ctx?: number };
  model_path?: string;
  model_alias?: string;
  chat_template?: string;
  total_slots?: number;
  modalities?: { vision?: boolean };
  build_info?: string;
}

/** What `GET /v1/models` answers (the fields read). */
export interface Models {
  data?: { id?: string; meta?: { n_vocab?: number; n_ctx_train?: number; n_ctx?: number } }[];
}

/**
 * The model a llama-server serves, from its `/props` (slot context size, model path) and
 * `/v1/models` (vocabulary, training context).
 * @throws {@link EngineCallError} when they do not say the context or vocabulary.
 */
export function modelOf(
  url: string,
  props: Props,
  models: Models,
): { model: ModelInfo; vocabularySize: number } {
  const meta = models.data?.[0]?.meta ?? {};
  const contextSize = props.default_generation_settings?.n_ctx ?? meta.n_ctx;
  if (!contextSize || !meta.n_vocab)
    throw new EngineCallError(url, "/props and /v1/models do not say the context or vocabulary");
  const path = props.model_path ?? url;
  // The alias is the model path unless the server was started with `--alias`.
  const id = (fileName(props.model_alias || path) || url).replace(/\.gguf$/i, "");
  const trainContextSize = meta.n_ctx_train ?? contextSize;
  return {
    model: { id, path, contextSize, trainContextSize, vision: false },
    vocabularySize: meta.n_vocab,
  };
}

/** A path's last part, whichever the separator (the server may run on another system). */
export function fileName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

/** One probability entry of `/completion`'s `completion_probabilities[i].top_logprobs`. */
interface TopLogprob {
  id: number;
  logprob: number;
}

/** What llama-server's `/completion` answers (the fields read). */
export interface CompletionAnswer {
  completion_probabilities?: { top_logprobs?: TopLogprob[] }[];
  tokens_cached?: number;
  timings?: { prompt_n?: number; cache_n?: number };
}

/**
 * The top log-probabilities of a `/completion` answer by token, or `undefined` when they cannot
 * be a distribution's: an id outside the vocabulary, a log-probability that is not a number or is
 * above 0, probabilities that sum past 1, or a most likely token less likely than 1 in the
 * vocabulary's size (every distribution has one at least that likely). Tolerances cover the
 * server's rounding.
 */
export function topLogprobs(
  answer: CompletionAnswer,
  vocabularySize: number,
): Map<Token, number> | undefined {
  const top = new Map<Token, number>();
  let sum = 0;
  let best = -Infinity;
  for (const { id, logprob } of answer.completion_probabilities?.[0]?.top_logprobs ?? []) {
    if (!Number.isInteger(id) || id < 0 || id >= vocabularySize) return undefined;
    if (typeof logprob !== "number" || !(logprob <= 1e-3)) return undefined;
    top.set(id, logprob);
    sum += Math.exp(logprob);
    best = Math.max(best, logprob);
  }
  // llama-server normalises in 32-bit floats: over a whole vocabulary the probabilities it
  // returns sum past 1 by up to about the vocabulary's size in float steps (2⁻²⁴ each).
  if (sum > 1 + 1e-3 + vocabularySize * 2 ** -24) return undefined;
  if (top.size > 0 && best < -Math.log(vocabularySize) - 1e-3) return undefined;
  return top;
}

/** What one `/completion` call read ({@link completeOnSlot}). */
export interface Completion {
  /** The top log-probabilities at the position after the prompt, by token. */
  readonly top: Map<Token, number>;
  /** Tokens the server evaluated (`prompt_n`) and took from the slot's cache (`cache_n`). */
  readonly timings: { readonly prompt_n: number; readonly cache_n: number };
}

/** A `/completion` call's `lora` field: each loaded adapter's scale for that call. */
export type LoraScales = readonly { readonly id: number; readonly scale: number }[];

/** One call of {@link completeOnSlot}. */
export interface SlotCall {
  /** The whole prompt: the server takes what the slot shares with it from its cache. */
  readonly tokens: readonly Token[];
  /** Top log-probabilities to read (0: none, the call only evaluates). */
  readonly nProbs: number;
  /** `id_slot`. */
  readonly slot: number;
  /** Every loaded adapter's scale for the call; `undefined`: the server's own. */
  readonly lora: LoraScales | undefined;
  readonly vocabularySize: number;
  /**
   * Whether the server evaluates every token of the call (`cache_prompt: false`) instead of
   * taking what the slot shares with it from its cache. Default false.
   */
  readonly whole?: boolean;
}

/**
 * The body of a `/completion` call that generates nothing (`n_predict: 0`): it evaluates
 * `call.tokens` on `call.slot` and asks the top `call.nProbs` log-probabilities of the full
 * distribution at the position after them, before any sampler (`post_sampling_probs: false`).
 */
export function completionBody(call: Omit<SlotCall, "vocabularySize">): Record<string, unknown> {
  return {
    prompt: call.tokens,
    n_predict: 0,
    n_probs: call.nProbs,
    post_sampling_probs: false,
    cache_prompt: !call.whole,
    temperature: 0,
    id_slot: call.slot,
    ...(call.lora && { lora: call.lora }),
  };
}

/**
 * One llama-server `/completion` call ({@link completionBody}) and what it read: the top
 * `call.nProbs` log-probabilities, checked to be a distribution's, and the call's timings.
 * @throws {@link EngineCallError} when the server does not answer, or answers numbers that are no
 *   distribution's log-probabilities; `EngineRequestError` when it refuses the call; the signal's
 *   reason on abort.
 */
export async function completeOnSlot(
  http: EngineConnection,
  call: SlotCall,
  signal?: AbortSignal,
): Promise<Completion> {
  const answer = await http.call<CompletionAnswer>("/completion", completionBody(call), signal);
  const timings = {
    prompt_n: answer.timings?.prompt_n ?? call.tokens.length,
    cache_n: answer.timings?.cache_n ?? answer.tokens_cached ?? 0,
  };
  const top = topLogprobs(answer, call.vocabularySize);
  if (top === undefined)
    throw new EngineCallError(
      http.url,
      "/completion answered numbers that are no distribution's log-probabilities",
    );
  if (call.nProbs > 0 && top.size === 0)
    throw new EngineCallError(http.url, "/completion returned no probabilities (n_probs)");
  return { top, timings };
}
