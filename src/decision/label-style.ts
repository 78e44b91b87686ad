import type { Engine, Token } from "../engine/types.js";
import { buildLabelTrie } from "./labels.js";
import type { DeciderOptions } from "./options.js";
import type { AnyQuestionType } from "./questions/question-type.js";
import type { QuestionShape } from "./types.js";

/**
 * What planning asks of an engine: its model's context and vision, its tokenizer and its chat
 * template. No scoring: the plan is made without running the model.
 */
export type PromptModel = Pick<Engine, "model" | "tokenize" | "chatTemplate" | "evaluatesWindows">;

/** The assistant-turn opening a label follows, as tokens and as the text they were read from. */
export interface TailPrompt {
  /** Template tokens after the user's content (user-turn close, assistant-turn opening). */
  readonly tail: Token[];
  /** The text of {@link TailPrompt.tail}. */
  readonly tailText: string;
}

/** The cue that opens the reply before a word label. */
export const ANSWER_CUE = "Answer:";

/** Longest option id (in tokens) used as its own label by default; longer ids get letter labels. */
export const MAX_WORD_LABEL_TOKENS = 8;

/** How a question's options are labelled in its branch and read back. */
export interface LabelStyle {
  /**
   * Whether the labels are the question's own words (a choice's ids, a score's level texts),
   * asked in its inline form.
   */
  readonly words: boolean;
  /** Text between the assistant-turn opening and the label: `Answer:` for words, else empty. */
  readonly cue: string;
  /** The tokens of {@link LabelStyle.cue}. */
  readonly cueTokens: Token[];
  /**
   * Tokens every label is read with after its own: empty, or the end-of-turn token when one word
   * label's tokens begin another's (`email_query`, `email_querycontact`), so the labels' token
   * sequences are prefix-free and each is read to its end, as the model ends its reply.
   */
  readonly end: Token[];
  /**
   * The label of each shown position.
   * @param order - option indices in the order they are shown
   * @returns one label per position
   */
  labelsAt(order: readonly number[]): string[];
}

/** A label whose tokens are not what the model would write after the cue. */
export class LabelTokensError extends Error {
  override name = "LabelTokensError";
}

/**
 * Label tokens as the model writes them after the assistant-turn opening and a cue, checked
 * against the tokenizer and kept once known (one instance per tokenizer).
 */
export class LabelTokenizer {
  private readonly known = new Map<string, Token[]>();

  constructor(readonly model: PromptModel) {}

  /**
   * Tokens of a label as it follows the assistant-turn opening and `cue`: tokenizing the opening,
   * the cue and the label together must give the opening's and the cue's tokens followed by the
   * label's, otherwise the label would not be what the model writes there.
   * @param label - the label text, with its leading space when it has one
   * @param cue - text between the opening and the label (`""` or {@link ANSWER_CUE})
   * @returns the label's tokens (those of the label tokenized together with the opening when
   *   they differ from the label's alone)
   * @throws {@link LabelTokensError} when the label merges with the opening or the cue
   * @throws what the engine's tokenizer throws; the signal's reason when aborted
   */
  async tokensOf(
    label: string,
    cue: string,
    tail: TailPrompt,
    signal?: AbortSignal,
  ): Promise<Token[]> {
    const key = `${cue}\u0000${label}`;
    const known = this.known.get(key);
    if (known) return known;
    const options = signal ? { signal } : {};
    const context = [...tail.tail, ...(await this.model.tokenize(cue, options))];
    const alone = await this.model.tokenize(label, options);
    const together = await this.model.tokenize(tail.tailText + cue + label, {
      ...options,
      special: true,
    });
    const joined = [...context, ...alone];
    let tokens = alone;
    if (!sameTokens(together, joined)) {
      const headMatches = sameTokens(together.slice(0, context.length), context);
      if (!headMatches)
        throw new LabelTokensError(
          `label ${JSON.stringify(label)} merges with the assistant-turn opening`,
        );
      tokens = together.slice(context.length);
    }
    this.known.set(key, tokens);
    return tokens;
  }
}

/**
 * How a question's options are labelled: with its type's word labels after {@link ANSWER_CUE}
 * (a choice's option ids; a score's level texts when `scoreLabels` is `levels`; none unless
 * `labels` is `words`, the default), when every label is at most `maxWordLabelTokens` tokens and
 * the labels' token sequences are prefix-free; otherwise, and for a type without word labels
 * (noul), its fixed labels at the start of the reply.
 * @param kind - the question's type (questions/index.ts `questionTypeOf`)
 * @throws what the engine's tokenizer throws; the signal's reason when aborted
 * @example
 * ```ts
 * const style = await labelStyleOf(choice, question, tail, labelTokenizer, { labels: "words" });
 * style.labelsAt([1, 0]); // → [" dog", " cat"] for options cat, dog
 * ```
 */
export async function labelStyleOf(
  kind: AnyQuestionType,
  question: QuestionShape,
  tail: TailPrompt,
  labels: LabelTokenizer,
  settings: Pick<DeciderOptions, "labels" | "scoreLabels" | "maxWordLabelTokens">,
  signal?: AbortSignal,
): Promise<LabelStyle> {
  const fixed: LabelStyle = {
    words: false,
    cue: "",
    cueTokens: [],
    end: [],
    labelsAt: (_order: readonly number[]) => kind.fixedLabels(question),
  };
  const texts = settings.labels === "fixed" ? undefined : kind.words?.texts(question, settings);
  if (!texts) return fixed;
  const words = texts.map((text) => ` ${text}`);
  const sequences: Token[][] = [];
  try {
    for (const w of words) sequences.push(await labels.tokensOf(w, ANSWER_CUE, tail, signal));
  } catch (error) {
    // An engine failure or an abort is not a reason to change labels.
    if (!(error instanceof LabelTokensError)) throw error;
    return fixed;
  }
  const longest = settings.maxWordLabelTokens ?? MAX_WORD_LABEL_TOKENS;
  if (sequences.some((t) => t.length > longest)) return fixed;
  const end = prefixFree(sequences) ? [] : tail.tail.slice(0, 1);
  if (end.length > 0 && !prefixFree(sequences.map((t) => [...t, ...end]))) return fixed;
  return {
    words: true,
    cue: ANSWER_CUE,
    cueTokens: await labels.model.tokenize(ANSWER_CUE, signal ? { signal } : {}),
    end,
    labelsAt: (order) => order.map((i) => words[i]!),
  };
}

/** Whether token sequences form a label trie (none empty, none the start of another). */
function prefixFree(sequences: readonly Token[][]): boolean {
  try {
    buildLabelTrie(sequences);
    return true;
  } catch {
    return false;
  }
}

function sameTokens(a: readonly Token[], b: readonly Token[]): boolean {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}
