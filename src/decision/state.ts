import { ContextOverflowError, type PrefixMedia, type Token } from "../engine/types.js";
import type { PromptModel } from "./label-style.js";
import { renderMediaText, renderStateBlock } from "./prompt.js";
import type { DecisionRequest, Json } from "./types.js";

/** Most characters of a long state tokenized at a time (4 Ki). */
export const STATE_SLICE_CHARS = 4 * 1024;

/** How a message names a question by its id: `question "id"` on System One's wire. */
export type QuestionNaming = (id: string) => string;

/** System One's naming: the question's id, quoted. */
const byId: QuestionNaming = (id) => `question ${JSON.stringify(id)}`;

/** How a state found too long while it was being counted ({@link stateTokens}) was counted. */
export interface StateCount {
  /** Tokens of the prompt before the state: the state's room is the context less these. */
  readonly headLength: number;
  /** Whether `stateTokens` is the state's size, not a bound from below. */
  readonly exact: boolean;
  /** Characters counted and the state's characters, when counting stopped before its end. */
  readonly characters?: readonly [counted: number, total: number];
}

/** Thrown by the planner when a request does not fit the model's context. Nothing is truncated. */
export class StateTooLongError extends ContextOverflowError {
  constructor(
    /** Tokens of the state block (at least this many, when counting stopped early). */
    readonly stateTokens: number,
    neededTokens: number,
    contextSize: number,
    /** The question whose branch is longest; `undefined` when the prefix alone does not fit. */
    readonly longestQuestionId?: string,
    /** Context positions of the request's image or video frames. */
    readonly mediaTokens = 0,
    /** Set when the state alone was found too long while it was being counted. */
    readonly counted?: StateCount,
  ) {
    super(neededTokens, contextSize);
    this.name = "StateTooLongError";
    this.message = this.messageNaming(byId);
  }

  /** The message, with the longest question named by `naming` (another wire's words). */
  messageNaming(naming: QuestionNaming): string {
    const { stateTokens, neededTokens, contextSize, counted } = this;
    if (counted) {
      const { headLength, exact, characters } = counted;
      const size = exact ? `${stateTokens}` : `at least ${stateTokens}`;
      const part = characters
        ? ` (counted in its first ${characters[0]} of ${characters[1]} characters)`
        : "";
      return (
        `the state is ${size} tokens${part}; the model's context holds ${contextSize}, ` +
        `${contextSize - headLength} of them for the state after the prompt's ${headLength}`
      );
    }
    const media = this.mediaTokens > 0 ? `, ${this.mediaTokens} image positions` : "";
    return this.blamesQuestion
      ? `${naming(this.longestQuestionId!)} is too long for the model's context: with ` +
          `the prompt${media} and the state (${stateTokens} tokens) it needs ${neededTokens} ` +
          `tokens, but the context holds ${contextSize}; shorten its instructions or options`
      : `the state is ${stateTokens} tokens; with the prompt${media} and the longest question ` +
          `the request needs ${neededTokens} tokens, but the model's context holds ${contextSize}`;
  }

  /**
   * Whether the longest question, not the state, is what does not fit: the state and its image
   * positions take less than half the context. The 422 is placed at that question, and the
   * message names it.
   */
  get blamesQuestion(): boolean {
    return (
      this.longestQuestionId !== undefined &&
      (this.stateTokens + this.mediaTokens) * 2 < this.contextSize
    );
  }
}

/**
 * Thrown by the planner when a request would put more tokens through the model than one request
 * may (`DeciderOptions.maxRequestTokens`), e.g. sixteen questions of hundreds of long option
 * ids each. Every branch fits the context; it is the sum that is refused.
 */
export class RequestTooLargeError extends Error {
  constructor(
    /** Tokens the request would put through the model (its usage's input tokens). */
    readonly requestTokens: number,
    /** Most tokens one request may put through the model. */
    readonly maxRequestTokens: number,
    /** The question whose branches take the most tokens. */
    readonly heaviestQuestionId: string | undefined,
    /** That question's branch tokens. */
    readonly heaviestTokens: number,
  ) {
    super();
    this.name = "RequestTooLargeError";
    this.message = this.messageNaming(byId);
  }

  /** The message, with the heaviest question named by `naming` (another wire's words). */
  messageNaming(naming: QuestionNaming): string {
    const { heaviestQuestionId: id } = this;
    return (
      `the request would put ${this.requestTokens} tokens through the model, more than the ` +
      `${this.maxRequestTokens} one request may` +
      (id === undefined ? "" : ` (${naming(id)} alone takes ${this.heaviestTokens})`) +
      `; ask fewer questions or shorter options, or split the request`
    );
  }
}

/**
 * Where the slice of `text` from `at` ends: before the last space that follows a non-space in
 * the second half of the window, else at the window's end (a hard cut).
 */
function sliceEnd(text: string, at: number): number {
  const end = Math.min(text.length, at + STATE_SLICE_CHARS);
  if (end === text.length) return end;
  for (let i = end; i > at + STATE_SLICE_CHARS / 2; i--)
    if (text[i] === " " && !/\s/.test(text[i - 1]!)) return i;
  return end;
}

// Why a long state is tokenized in slices: docs/decisions/036
/**
 * The tokens of a request's state block. A block of at most as many bytes as the context has
 * room for is tokenized whole (a token covers at least one byte, so it cannot be refused on
 * length); a longer one in slices of at most {@link STATE_SLICE_CHARS}, cut before a space that
 * follows a non-space (a boundary the tokenizer's pre-tokenizer splits at anyway, so the tokens
 * are those of the whole), yielding to the event loop between slices, and refused as soon as it
 * cannot fit.
 * @param headLength - tokens of the prompt head before the state (they take context room too)
 * @returns the state block's tokens
 * @throws {@link StateTooLongError} when the state alone cannot fit; the signal's reason when
 *   aborted
 */
export async function stateTokens(
  model: PromptModel,
  state: Json,
  headLength: number,
  signal?: AbortSignal,
): Promise<Token[]> {
  const text = renderStateBlock(state);
  const options = signal ? { signal } : {};
  const { contextSize } = model.model;
  const room = contextSize - headLength;
  if (Buffer.byteLength(text, "utf8") <= room) return model.tokenize(text, options);
  const tokens: Token[] = [];
  let cuts = 0;
  for (let at = 0; at < text.length;) {
    signal?.throwIfAborted();
    const end = sliceEnd(text, at);
    for (const token of await model.tokenize(text.slice(at, end), options)) tokens.push(token);
    if (end < text.length && text[end] !== " ") cuts++;
    // A hard cut splits at most one word, whose pieces may take a few more tokens than it
    // whole; 8 per cut is far more than that.
    const atLeast = tokens.length - 8 * cuts;
    if (atLeast > room) {
      // Exact when counted whole without a hard cut; else a bound from below.
      const whole = end === text.length;
      throw new StateTooLongError(atLeast, headLength + atLeast, contextSize, undefined, 0, {
        headLength,
        exact: whole && cuts === 0,
        ...(whole ? {} : { characters: [end, text.length] as const }),
      });
    }
    at = end;
    if (at < text.length) await new Promise((resolve) => setImmediate(resolve));
  }
  return tokens;
}

/** Texts up to this many characters are tokenized in one call (a few milliseconds). */
export const WHOLE_TEXT_CHARS = 64 * 1024;

/**
 * The tokens of a prompt text (a question with its options), on a bounded prefix: a text of at
 * most {@link WHOLE_TEXT_CHARS} characters is tokenized whole; a longer one in slices cut as the
 * state's are (see {@link stateTokens}), yielding to the event loop between slices and stopping
 * as soon as more than `limit` tokens are counted; a long text that turns out to fit is then
 * tokenized whole, so what is returned for a text that fits is always its exact tokens.
 * @param limit - the most tokens the caller can use (the context size): past it, counting stops
 * @returns the text's tokens when they are at most `limit`; else the tokens of its first slices,
 *   of which more than `limit` stand for the text's own (the caller refuses it as too long)
 * @throws the signal's reason when aborted
 * @example
 * ```ts
 * const tokens = await boundedTokens(model, questionText, contextSize);
 * if (tokens.length > contextSize) throw … // the question alone cannot fit
 * ```
 */
export async function boundedTokens(
  model: PromptModel,
  text: string,
  limit: number,
  signal?: AbortSignal,
): Promise<Token[]> {
  const options = signal ? { signal } : {};
  if (text.length <= WHOLE_TEXT_CHARS) return model.tokenize(text, options);
  const tokens: Token[] = [];
  let cuts = 0;
  for (let at = 0; at < text.length;) {
    await new Promise((resolve) => setImmediate(resolve));
    signal?.throwIfAborted();
    const end = sliceEnd(text, at);
    for (const token of await model.tokenize(text.slice(at, end), options)) tokens.push(token);
    if (end < text.length && text[end] !== " ") cuts++;
    // A hard cut splits at most one word, whose pieces may take a few more tokens than it whole.
    if (tokens.length - 8 * cuts > limit) return tokens;
    at = end;
  }
  await new Promise((resolve) => setImmediate(resolve));
  return model.tokenize(text, options);
}

/**
 * The request's media in the prefix, right after the user turn opens: caption text tokens, and
 * each image's position among the prefix tokens.
 * @param headLength - tokens of the prompt head, which the media follow
 * @throws `Error` when the request has media and the model cannot take images
 */
export async function mediaTokensOf(
  model: PromptModel,
  request: Pick<DecisionRequest, "media">,
  headLength: number,
  signal?: AbortSignal,
): Promise<{ tokens: Token[]; media: PrefixMedia[] }> {
  const tokens: Token[] = [];
  const media: PrefixMedia[] = [];
  if (!request.media || request.media.frames.length === 0) return { tokens, media };
  if (!model.model.vision) throw new Error(`model ${model.model.id} does not accept images`);
  const { before, after } = renderMediaText(request.media);
  const options = signal ? { signal } : {};
  for (const [i, frame] of request.media.frames.entries()) {
    tokens.push(...(await model.tokenize(before[i]!, options)));
    media.push({ at: headLength + tokens.length, image: frame.image });
  }
  tokens.push(...(await model.tokenize(after, options)));
  return { tokens, media };
}
