import { CodedError } from "../protocol/errors.js";

/**
 * The engine boundary (DESIGN.md, "The engine boundary"): the decision layer hands an engine
 * token sequences for a shared prefix and a set of branches, and gets back log-probabilities of
 * each branch's candidate tokens at the branch's last position. An engine knows nothing of
 * questions, labels or HTTP.
 */

/** A token id of the model's vocabulary. */
export type Token = number;

/** What the decision layer may know about the loaded model. */
export interface ModelInfo {
  /** Catalogue name, or the file name for a model served with `--model PATH`. */
  readonly id: string;
  /** Absolute path of the GGUF file. */
  readonly path: string;
  /** Tokens one request may occupy: shared prefix plus the longest branch (per KV-cache sequence). */
  readonly contextSize: number;
  /** The context length the model was trained with (GGUF metadata). */
  readonly trainContextSize: number;
  /** Whether the engine can put images or video frames into the prefix. */
  readonly vision: boolean;
  /**
   * Vision engines only: the side in pixels of the square image the engine's projector reads;
   * images given in {@link ScoreRequest.media} should be exactly this size.
   */
  readonly imageSize?: number;
  /**
   * Vision engines only: context positions one image of {@link imageSize} occupies (the image
   * embeddings plus the delimiter tokens the projector wraps them in).
   */
  readonly imageTokens?: number;
  /** File name of the LoRA adapter applied on top of the model, when one is. */
  readonly adapter?: string;
}

/**
 * One chat turn to render with the model's chat template. An `assistant` turn is a finished reply
 * (an in-context example); the template still ends with the opening of a new assistant turn.
 */
export interface ChatMessage {
  readonly role: "system" | "user" | "assistant";
  readonly content: string;
}

/** The model's chat template, rendered to text in which special tokens appear as their text. */
export interface ChatTemplate {
  /** Template family, e.g. `"ChatML"`, for logs. */
  readonly name: string;
  /**
   * Renders the messages followed by the opening of the assistant's turn (the generation prompt),
   * so that the next token the model predicts is the first token of its reply. A remote engine
   * renders with the server's template, hence a promise.
   * @param signal - aborts a remote rendering (`AbortError`).
   * @returns text to tokenize with `{ special: true }`.
   */
  render(messages: readonly ChatMessage[], signal?: AbortSignal): Promise<string>;
}

/**
 * One branch evaluated on top of the prefix (or, for a child, on top of its parent branch).
 * `tokens` must be non-empty; the log-probabilities are read after its last token.
 */
export interface ScoreBranch {
  readonly tokens: readonly Token[];
  /** Tokens whose log-probabilities are wanted at the position after `tokens`. */
  readonly candidates: readonly Token[];
  /** Branches continuing this one (used for chained multi-token labels). */
  readonly children?: readonly ScoreBranch[];
}

/** An image placed in the prefix, as encoded file bytes the engine's projector reads. */
export interface PrefixImage {
  /** PNG or JPEG bytes, normally {@link ModelInfo.imageSize} pixels square. */
  readonly data: Uint8Array;
  readonly mimeType: "image/png" | "image/jpeg";
}

/** An image inserted into the prefix before `prefix[at]` (`at` = prefix length: at the end). */
export interface PrefixMedia {
  readonly at: number;
  readonly image: PrefixImage;
}

/** A request to an engine: one shared prefix and the branches evaluated on top of it. */
export interface ScoreRequest {
  readonly prefix: readonly Token[];
  readonly branches: readonly ScoreBranch[];
  /**
   * Images in the prefix, in ascending `at` order; each occupies {@link ModelInfo.imageTokens}
   * context positions. Only engines whose `model.vision` is true accept them.
   */
  readonly media?: readonly PrefixMedia[];
  // Why: docs/decisions/108-children-left-unread-within-a-bound.md
  /**
   * How much of a branch's trie an engine may leave unread, as a fraction of what it read: it may
   * skip a child (and all below it) whose first token is one of its parent's candidates, when the
   * probability of reaching it (the product of the candidates' probabilities along its path, an
   * upper bound on every label below it), added to the children of the same branch already
   * skipped, is at most `trieTolerance` times the probability of the candidates read that have
   * no child (the label ends). A skipped child's score is `undefined`. Default 0: every child is
   * read. Engines may read everything whatever it is.
   */
  readonly trieTolerance?: number;
  // Why: docs/decisions/113-option-lines-in-windows.md
  /**
   * Where the branches' common start may be cut into windows (a long list of option lines): the
   * token index, counted from the branches' start, each window ends at, increasing; the first
   * starts at the branches' start. An engine may evaluate each window seeing the prefix and
   * itself only, the tokens after the last window seeing all (decode/lead-windows.ts); one that
   * does not evaluates them as usual. Absent: no windows.
   */
  readonly windows?: readonly number[];
}

/** Log-probabilities of one branch's candidates, in the order of `ScoreBranch.candidates`. */
export interface BranchScore {
  /** Natural-log probabilities under the model's full next-token distribution (≤ 0). */
  readonly logprobs: readonly number[];
  /** One per `ScoreBranch.children`, in order; `undefined` for a child left unread. */
  readonly children?: readonly (BranchScore | undefined)[];
}

/** What an engine returns for a {@link ScoreRequest}. */
export interface ScoreResult {
  /** One entry per request branch, in request order. */
  readonly branches: readonly BranchScore[];
  /** Tokens this request put through the model (prefix tokens not already cached + branch tokens). */
  readonly evaluatedTokens: number;
  /**
   * Prefix tokens reused from the engine's prefix cache instead of being evaluated again, and the
   * branches' common lead when an earlier request with the same prefix and lead left it there.
   */
  readonly cachedPrefixTokens: number;
  /** Context positions the request's images occupy (0 or absent without media). */
  readonly mediaTokens?: number;
  /**
   * The windows the branches' common start was read in (`ScoreRequest.windows`), evaluated now
   * or kept from an earlier request; absent: it was read whole, as one list.
   */
  readonly leadWindows?: number;
  /**
   * Set when this request's windows could not be merged, and the engine stopped using windows:
   * for how long, ms.
   */
  readonly windowsOff?: number;
}

/** Cumulative work counters of an engine since it was opened (for tests and diagnostics). */
export interface EngineCounters {
  /** {@link Engine.score} calls completed. */
  requests: number;
  /** Prefix tokens put through the model (cache hits excluded). */
  prefixTokensEvaluated: number;
  /** Prefix tokens served from the prefix cache. */
  prefixTokensCached: number;
  /** Branch tokens put through the model, children included. */
  branchTokensEvaluated: number;
  /** Vision engines only: images (or video frames) put through the projector's encoder. */
  mediaEncoded?: number;
  /** Vision engines only: milliseconds spent in the projector's encoder, as llama.cpp reports. */
  mediaEncodeMs?: number;
}

/** Options of {@link Engine.tokenize}. */
export interface TokenizeOptions {
  /** Parse special-token text such as `<|im_start|>` into special tokens. Default false. */
  readonly special?: boolean;
  /** Aborts a remote call (`AbortError`). */
  readonly signal?: AbortSignal;
}

/**
 * The interface every backend implements: in-process llama.cpp (engine/llama/, engine/vision/) and
 * remote engines over HTTP (engine/remote/). Every call is async and takes an AbortSignal, so a
 * backend may live across the network.
 */
export interface Engine {
  readonly model: ModelInfo;
  readonly chatTemplate: ChatTemplate;
  readonly counters: Readonly<EngineCounters>;
  /**
   * Tokenizes text with the model's tokenizer. No BOS token is added.
   * @throws {@link EngineUnavailableError} when a remote engine cannot be reached.
   */
  tokenize(text: string, options?: TokenizeOptions): Promise<Token[]>;
  /** Decodes tokens back to text (for checks and diagnostics). */
  detokenize(tokens: readonly Token[], signal?: AbortSignal): Promise<string>;
  /**
   * Evaluates the prefix once and every branch on top of it.
   * @throws {@link ContextOverflowError} when prefix + a branch path exceeds `model.contextSize`.
   * @throws `Error` with name `AbortError` when `signal` aborts.
   * @throws {@link EngineUnavailableError} when a remote engine cannot be reached in time.
   */
  score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult>;
  /**
   * Whether `score` evaluates `ScoreRequest.windows` as windows now; absent or false: they are
   * evaluated as usual, and the Decider does not cut a question into them.
   */
  readonly evaluatesWindows?: boolean;
  /**
   * Tokens the engine would evaluate for `request` if it ran now: its prefix past what the KV
   * cache or a snapshot would give it, and its branches. An estimate (what the caches hold may
   * change before it runs), for how long a call in flight has left. Optional: without it, every
   * token of the request counts.
   */
  workOf?(request: ScoreRequest): number;
  /**
   * Whether the engine answers now (a remote engine's health endpoint; in-process: not closed).
   * Optional: an engine without it counts as ready.
   */
  ready?(signal?: AbortSignal): Promise<boolean>;
  /** Why {@link ready} answered false, in words (a pool: each engine's state). Optional. */
  notReadyReason?(): string;
  /** Releases the model and its context (a remote engine: its connections). */
  close(): Promise<void>;
}

/**
 * Thrown when no engine answered: a remote engine refused the connection, failed, or did not
 * answer within the request's deadline, and no other engine of the pool could take the request.
 * Its code says which (`engineUnreachable`: each engine and its error; `engineDeadline`: the
 * deadline, ms); the API answers 503 with `Retry-After` ({@link retryAfterSeconds}).
 * @example throw new EngineUnavailableError("engineDeadline", 30_000, 1);
 */
export class EngineUnavailableError extends CodedError<"engineUnreachable" | "engineDeadline"> {
  constructor(
    code: "engineUnreachable" | "engineDeadline",
    detail: string | number,
    /** Seconds after which a retry may find an engine back (the pool's probe interval). */
    readonly retryAfterSeconds: number,
  ) {
    super(code, [detail], { retryAfterMs: retryAfterSeconds * 1000 });
  }
}

/** Thrown when a request does not fit into the model's context. Nothing is ever truncated. */
export class ContextOverflowError extends Error {
  constructor(
    /** Tokens the request needs (prefix + its longest branch path). */
    readonly neededTokens: number,
    /** Tokens the context holds per request. */
    readonly contextSize: number,
  ) {
    super(`the request needs ${neededTokens} tokens but the model's context holds ${contextSize}`);
    this.name = "ContextOverflowError";
  }
}

/**
 * The overflow of a request on a context of `contextSize` tokens per request: the first branch
 * whose prefix + media positions + branch path (`branchDepthTokens`) exceeds it.
 * @returns the error to throw, or `undefined` when every branch fits.
 */
export function contextOverflowOf(
  request: ScoreRequest,
  contextSize: number,
  mediaTokens = 0,
): ContextOverflowError | undefined {
  for (const branch of request.branches) {
    const needed = request.prefix.length + mediaTokens + branchDepthTokens(branch);
    if (needed > contextSize) return new ContextOverflowError(needed, contextSize);
  }
  return undefined;
}

/** Longest path of tokens in a branch tree (the branch plus its deepest child chain). */
export function branchDepthTokens(branch: ScoreBranch): number {
  let deepest = 0;
  for (const child of branch.children ?? []) deepest = Math.max(deepest, branchDepthTokens(child));
  return branch.tokens.length + deepest;
}

/** Number of tokens a branch tree puts through the model (every branch and child once). */
export function branchTotalTokens(branch: ScoreBranch): number {
  let total = branch.tokens.length;
  for (const child of branch.children ?? []) total += branchTotalTokens(child);
  return total;
}
