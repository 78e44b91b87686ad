import type { ModelInfo, Token } from "../types.js";
import { EngineCallError } from "./http.js";

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
