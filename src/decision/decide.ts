import { LRUCache } from "lru-cache";
import {
  branchTotalTokens,
  type ChatMessage,
  ContextOverflowError,
  type Engine,
  type PrefixMedia,
  type ScoreBranch,
  type Token,
} from "../engine/types.js";
import { temperatureFor, type CalibrationProfile } from "./calibration.js";
import {
  buildLabelTrie,
  choiceLabels,
  NOUL_LABELS,
  readTrie,
  scoreLabels,
  trieBranch,
  triePositions,
  type LabelTrie,
} from "./labels.js";
import {
  argmax,
  choiceConfidence,
  expectation,
  logSumExp,
  scoreConfidence,
  softmax,
} from "./math.js";
import {
  PROMPT_EXAMPLES,
  type PromptExample,
  renderMediaText,
  renderQuestion,
  renderStateBlock,
  SYSTEM_MESSAGE,
  TEMPLATE_MARKER,
  TUNED_SYSTEM_MESSAGE,
} from "./prompt.js";
import type {
  Answer,
  DecisionRequest,
  DecisionResult,
  Json,
  Question,
  TextValue,
  Usage,
} from "./types.js";

/**
 * Option-order debiasing: the label log-probabilities of a choice are averaged over several
 * orders of its options, all sharing one evaluated prefix. `reverse` adds the reversed order;
 * `cyclic` adds every cyclic shift (up to 8 orders in all).
 */
export type DebiasMode = "off" | "reverse" | "cyclic";

/** Options of a {@link Decider}. */
export interface DeciderOptions {
  readonly calibration?: CalibrationProfile;
  /** Default `off`. Applies to choice questions (score scales keep their natural order). */
  readonly debias?: DebiasMode;
  /**
   * `words` (default): a choice is answered with its own option ids after an "Answer:" cue
   * (falling back to letters when an id is longer than 8 tokens or the ids' tokens are not
   * prefix-free). `fixed`: letters at the start of the reply. On the fit parts of SST-2, TREC
   * and AG News with and without its option descriptions (30 items each, SmolLM2-135M, both with
   * contextual calibration) words answered 48% right against 23% for letters (below chance), but
   * an appended note naming a wrong option moved 74% of word answers against 16% of letter
   * answers: the model reads the state, including text that tries to steer it. Callers facing
   * adversarial states can choose `fixed`.
   */
  readonly labels?: "words" | "fixed";
  /**
   * Contextual calibration (Zhao et al. 2021, "Calibrate Before Use", ICML): every question's
   * label probabilities are divided by the ones the model gives the same question about
   * content-free states ({@link CONTENT_FREE_STATES}, probabilities averaged), then
   * renormalised, which removes the model's prior for a label (a favourite letter, "Yes", a
   * frequent word) and keeps what the state adds. The prior is computed once per distinct
   * question (its branch tokens) and kept in an LRU of {@link PRIOR_CACHE_ENTRIES}. Default on.
   */
  readonly contentFree?: boolean;
  /**
   * In-context examples ({@link PROMPT_EXAMPLES}) as finished chat turns before the request.
   * Default on.
   */
  readonly examples?: boolean;
  /**
   * Question contrast for yes/no questions: P(yes) is read from how much the question moves the
   * model's yes/no log-odds away from where the state alone leaves them. One more branch per
   * request (the assistant turn opened right after the state, no question: a handful of tokens)
   * gives p(label | state); each noul question's p(label | state, question) is divided by it,
   * both already divided by their content-free priors, then renormalised; in logs:
   * `log p(l|s,q) − log p(l|cf,q) − [log p(l|s) − log p(l|cf)]`. This is a pointwise mutual
   * information between the answer and the question given the state, as in domain-conditional
   * PMI (Holtzman et al. 2021, "Surface Form Competition", arXiv 2104.08315), with the state as
   * the domain premise. It removes what the state says about "Yes"/"No" whatever is asked,
   * which is what a note in the state telling the model to answer "No" does. On the fit rows of
   * SST-2, RTE, BoolQ and WikiQA as yes/no (`decisiond eval --split fit --limit 30 --no-flip
   * --calibration none --injection`, 120 questions, SmolLM2-135M-Instruct): 39% → 49% right,
   * NLL 0.744 → 0.764 before temperature calibration, injection move rate 30% → 7%, 11% more
   * time; on the test rows (docs/QUALITY.md) 50% right before and after, moved 68% → 8%.
   * The same contrast on choice questions subtracts the evidence itself (a sports report
   * makes the model say "sports" whatever is asked): 17 → 0 of bench/clear-cut.mjs's 20 right,
   * so it applies to noul only. Default on.
   */
  readonly questionContrast?: boolean;
  /** Longest option id, in tokens, answered as its own label. Default {@link MAX_WORD_LABEL_TOKENS}. */
  readonly maxWordLabelTokens?: number;
  /** The system message of every request. Default {@link SYSTEM_MESSAGE}. */
  readonly systemMessage?: string;
}

/** The readout settings a caller may choose (the rest of {@link DeciderOptions} is serving policy). */
export type ReadoutSettings = Pick<
  DeciderOptions,
  | "labels"
  | "contentFree"
  | "examples"
  | "questionContrast"
  | "systemMessage"
  | "maxWordLabelTokens"
>;

/**
 * The readout of a decision-tuned model (a base with its LoRA adapter, docs/TRAINING.md): option
 * ids as labels, no in-context examples, no content-free prior and no question contrast, since
 * the adapter was trained on exactly these prompts and its answers need none of them.
 */
export const TUNED_READOUT: Readonly<ReadoutSettings> = {
  labels: "words",
  contentFree: false,
  examples: false,
  questionContrast: false,
  systemMessage: TUNED_SYSTEM_MESSAGE,
  // Banking77's longest intent id is 17 tokens; the adapter names options, it does not point at numbers.
  maxWordLabelTokens: 24,
};

/** The content-free states of contextual calibration, as in Zhao et al. 2021, §4. */
export const CONTENT_FREE_STATES: readonly string[] = ["N/A", "", "[MASK]"];

/** Distinct question views whose content-free priors are kept. */
export const PRIOR_CACHE_ENTRIES = 4096;

/** One question's branches and how to read them back. */
interface QuestionPlan {
  readonly id: string;
  readonly question: Question;
  readonly labelCount: number;
  /** One entry per option order: the shown order (option index per position) and its trie. */
  readonly views: readonly { readonly order: readonly number[]; readonly trie: LabelTrie }[];
  /** Index of the first branch of this question in {@link Plan.branches}. */
  readonly firstBranch: number;
}

/** What {@link Decider.plan} produces: the engine request plus what is needed to read it. */
export interface Plan {
  readonly prefix: Token[];
  /** Images in the prefix (the request's image or video frames); empty without media. */
  readonly media: PrefixMedia[];
  /** Context positions the images take. */
  readonly mediaTokens: number;
  readonly branches: ScoreBranch[];
  readonly questions: readonly QuestionPlan[];
  /**
   * The question-contrast branch ({@link DeciderOptions.questionContrast}): its index in
   * {@link branches} and its Yes/No trie; absent when the request has no noul question or the
   * contrast is off.
   */
  readonly contrast?: { readonly branch: number; readonly trie: LabelTrie };
  /** Prefix plus the longest branch path, the most the context must hold. */
  readonly neededTokens: number;
}

/** Hooks into {@link Decider.decide}. */
export interface DecideHooks {
  /**
   * Called once the request is planned and before the model runs, with the usage the call will
   * report (it is fixed by the plan); a rejection stops the call before any model work (an
   * allowance that would be overrun).
   */
  beforeScore?(usage: Usage): Promise<void>;
}

/**
 * The usage a plan's call reports: input tokens = prefix + image positions + every branch's
 * tokens; output tokens = the label positions read out (one per label-trie position per view).
 */
export function usageOf(plan: Plan): Usage {
  let outputTokens = 0;
  for (const q of plan.questions)
    for (const view of q.views) outputTokens += triePositions(view.trie);
  return {
    input_tokens:
      plan.prefix.length +
      plan.mediaTokens +
      plan.branches.reduce((sum, b) => sum + branchTotalTokens(b), 0),
    output_tokens: outputTokens,
  };
}

/** Most characters of a long state tokenized at a time (4 Ki). */
export const STATE_SLICE_CHARS = 4 * 1024;

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

/** Thrown by {@link Decider.plan} when a request does not fit the model's context. */
export class StateTooLongError extends ContextOverflowError {
  constructor(
    readonly stateTokens: number,
    neededTokens: number,
    contextSize: number,
    /** The question whose branch is longest; `undefined` when the prefix alone does not fit. */
    readonly longestQuestionId?: string,
    /** Context positions of the request's image or video frames. */
    readonly mediaTokens = 0,
  ) {
    super(neededTokens, contextSize);
    this.name = "StateTooLongError";
    this.message =
      `the state is ${stateTokens} tokens; with the prompt` +
      (mediaTokens > 0 ? `, ${mediaTokens} image positions` : "") +
      ` and the longest question the request ` +
      `needs ${neededTokens} tokens, but the model's context holds ${contextSize}`;
  }
}

/** The static parts of the prompt, tokenized once per {@link Decider} (see {@link Decider.prepare}). */
interface PreparedPrompt {
  /** Template tokens before the user's content (system message, examples, user-turn opening). */
  readonly head: Token[];
  /** Template tokens after the user's content (user-turn close, assistant-turn opening). */
  readonly tail: Token[];
  readonly tailText: string;
  /** The prefix of each content-free state, in {@link CONTENT_FREE_STATES} order. */
  readonly contentFreePrefixes: readonly Token[][];
}

/**
 * Turns decision requests into engine requests and engine log-probabilities into typed answers
 * (DESIGN.md: decision.plan → engine.score → decision.answer). The static parts of the prompt
 * (system message, chat template around the user turn, label tokens) are tokenized once, on the
 * first request (the engine's tokenizer may be remote, so the constructor does no work).
 *
 * @example
 * const decider = new Decider(engine);
 * const result = await decider.decide({ state: "The parcel arrived crushed.", questions }, signal);
 */
export class Decider {
  private readonly labelTokens = new Map<string, Token[]>();
  /** Content-free prior per question view: key {@link viewKey}, value log p by label position. */
  private readonly priors = new LRUCache<string, number[]>({ max: PRIOR_CACHE_ENTRIES });
  /** The shared preparation, once started; reset when it fails so the next request retries. */
  private preparing: Promise<PreparedPrompt> | undefined;

  constructor(
    readonly engine: Engine,
    readonly options: DeciderOptions = {},
  ) {}

  /**
   * Tokenizes the static parts of the prompt, once: the first caller starts it and later callers
   * share it. A caller's `signal` only stops that caller's wait; the shared preparation goes on
   * (so a client that hangs up on the first request does not fail the requests behind it). A
   * preparation that fails (engine unreachable) is dropped, and the next call starts it again.
   * @throws what the engine throws while preparing; `AbortError` when `signal` aborts the wait.
   */
  prepare(signal?: AbortSignal): Promise<PreparedPrompt> {
    if (!this.preparing) {
      const started = this.prepareNow();
      this.preparing = started;
      started.catch(() => {
        if (this.preparing === started) this.preparing = undefined;
      });
    }
    return untilAborted(this.preparing, signal);
  }

  private async prepareNow(): Promise<PreparedPrompt> {
    const { engine, options } = this;
    const system = options.systemMessage ?? SYSTEM_MESSAGE;
    // The tail first: reading an example's reply labels needs it.
    const tailText = splitAtMarker(
      await engine.chatTemplate.render([
        { role: "system", content: system },
        { role: "user", content: TEMPLATE_MARKER },
      ]),
    ).after;
    const tail = await engine.tokenize(tailText, { special: true });
    const partial = { tail, tailText };
    const examples: ChatMessage[] = [];
    if (options.examples !== false)
      for (const example of PROMPT_EXAMPLES)
        examples.push(...(await this.exampleTurns(example, partial)));
    const { before } = splitAtMarker(
      await engine.chatTemplate.render([
        { role: "system", content: system },
        ...examples,
        { role: "user", content: TEMPLATE_MARKER },
      ]),
    );
    const head = await engine.tokenize(before, { special: true });
    const contentFreePrefixes: Token[][] = [];
    for (const state of CONTENT_FREE_STATES)
      contentFreePrefixes.push([...head, ...(await engine.tokenize(renderStateBlock(state)))]);
    return { head, tail, tailText, contentFreePrefixes };
  }

  /**
   * An in-context example as a user turn (state block and question, rendered as a request's) and
   * an assistant turn holding the reply this Decider reads: the option id after the answer cue
   * for word-labelled choices, otherwise the label of the answer.
   */
  private async exampleTurns(example: PromptExample, tail: TailPrompt): Promise<ChatMessage[]> {
    const { question, answer } = example;
    const style = await this.labelStyleOf(question, tail);
    const order = Array.from({ length: labelCountOf(question) }, (_, i) => i);
    const labels = style.labelsAt(order);
    const user =
      renderStateBlock(example.state) + renderQuestion(question, labels, order, style.words);
    return [
      { role: "user", content: user },
      { role: "assistant", content: `${style.cue}${labels[answer]!}` },
    ];
  }

  /**
   * Builds the engine request.
   * @param signal aborts the wait for the tokenizer (`AbortError`).
   * @throws {StateTooLongError} when prefix + the longest branch exceeds the context; nothing is
   *   truncated.
   */
  async plan(request: DecisionRequest, signal?: AbortSignal): Promise<Plan> {
    const prepared = await this.prepare(signal);
    const { head, tail } = prepared;
    const stateTokens = await this.stateTokens(request.state, head.length, signal);
    const { tokens: mediaPrefix, media } = await this.mediaPart(request, head.length, signal);
    const mediaTokens = media.length * (this.engine.model.imageTokens ?? 0);
    const tokenize = (text: string) => this.engine.tokenize(text, signal ? { signal } : {});
    const prefix = [...head, ...mediaPrefix, ...stateTokens];
    const branches: ScoreBranch[] = [];
    const questions: QuestionPlan[] = [];
    let longest = 0;
    let longestId: string | undefined;
    for (const [id, question] of request.questions) {
      const orders = this.ordersOf(question);
      const firstBranch = branches.length;
      const style = await this.labelStyleOf(question, prepared, signal);
      const views: QuestionPlan["views"][number][] = [];
      for (const order of orders) {
        // Position p shows option order[p] under labels[p].
        const labels = style.labelsAt(order);
        const text = renderQuestion(question, labels, order, style.words);
        const tokens = [...(await tokenize(text)), ...tail, ...style.cueTokens];
        const labelTokens: Token[][] = [];
        for (const label of labels)
          labelTokens.push(await this.tokensOfLabel(label, style.cue, prepared, signal));
        const trie = buildLabelTrie(labelTokens);
        const branch = trieBranch(tokens, trie);
        branches.push(branch);
        const depth = tokens.length + trieDepth(trie) - 1;
        if (depth > longest) {
          longest = depth;
          longestId = id;
        }
        views.push({ order, trie });
      }
      questions.push({ id, question, labelCount: labelCountOf(question), views, firstBranch });
    }
    // One contrast branch serves every noul question: it has no question in it.
    const noul = questions.find((q) => q.question.type === "noul");
    let contrast: Plan["contrast"];
    if (noul && this.options.questionContrast !== false) {
      const trie = noul.views[0]!.trie;
      contrast = { branch: branches.length, trie };
      branches.push(trieBranch([...tail], trie));
    }
    const neededTokens = prefix.length + mediaTokens + longest;
    if (neededTokens > this.engine.model.contextSize)
      throw new StateTooLongError(
        stateTokens.length,
        neededTokens,
        this.engine.model.contextSize,
        prefix.length + mediaTokens < this.engine.model.contextSize ? longestId : undefined,
        mediaTokens,
      );
    return {
      prefix,
      media,
      mediaTokens,
      branches,
      questions,
      ...(contrast ? { contrast } : {}),
      neededTokens,
    };
  }

  /**
   * The tokens of a request's state block. A block of at most as many bytes as the context has
   * room for is tokenized whole (a token covers at least one byte, so it cannot be refused on
   * length); a longer one in slices of at most {@link STATE_SLICE_CHARS}, cut before a space
   * that follows a non-space (a boundary the tokenizer's pre-tokenizer splits at anyway, so the
   * tokens are those of the whole), yielding to the event loop between slices, and refused as
   * soon as it cannot fit. A 15 MiB state was tokenized whole on the event loop before it was
   * refused, and the tokenizer's time grows faster than linearly on long runs of whitespace
   * (issue 31, item 2). Why: docs/decisions/036-long-states.md
   * @throws {StateTooLongError} when the state alone cannot fit; the signal's reason when aborted.
   */
  async stateTokens(state: Json, headLength: number, signal?: AbortSignal): Promise<Token[]> {
    const text = renderStateBlock(state);
    const options = signal ? { signal } : {};
    const room = this.engine.model.contextSize - headLength;
    if (Buffer.byteLength(text, "utf8") <= room) return this.engine.tokenize(text, options);
    const tokens: Token[] = [];
    let cuts = 0;
    for (let at = 0; at < text.length;) {
      signal?.throwIfAborted();
      const end = sliceEnd(text, at);
      for (const token of await this.engine.tokenize(text.slice(at, end), options))
        tokens.push(token);
      if (end < text.length && text[end] !== " ") cuts++;
      // A hard cut splits at most one word, whose pieces may take a few more tokens than it
      // whole; 8 per cut is far more than that.
      const atLeast = tokens.length - 8 * cuts;
      if (atLeast > room) {
        const error = new StateTooLongError(
          atLeast,
          headLength + atLeast,
          this.engine.model.contextSize,
        );
        error.message =
          `the state is more than ${atLeast} tokens (counted in its first ${end} of ${text.length} characters); ` +
          `the model's context holds ${this.engine.model.contextSize}`;
        throw error;
      }
      at = end;
      if (at < text.length) await new Promise((resolve) => setImmediate(resolve));
    }
    return tokens;
  }

  /**
   * The request's media in the prefix, right after the user turn opens: caption text tokens, and
   * each image's position among the prefix tokens.
   * @throws {Error} when the request has media and the engine cannot take images.
   */
  private async mediaPart(
    request: DecisionRequest,
    headLength: number,
    signal?: AbortSignal,
  ): Promise<{ tokens: Token[]; media: PrefixMedia[] }> {
    const tokens: Token[] = [];
    const media: PrefixMedia[] = [];
    if (!request.media || request.media.frames.length === 0) return { tokens, media };
    if (!this.engine.model.vision)
      throw new Error(`model ${this.engine.model.id} does not accept images`);
    const { before, after } = renderMediaText(request.media);
    const options = signal ? { signal } : {};
    for (const [i, frame] of request.media.frames.entries()) {
      tokens.push(...(await this.engine.tokenize(before[i]!, options)));
      media.push({ at: headLength + tokens.length, image: frame.image });
    }
    tokens.push(...(await this.engine.tokenize(after, options)));
    return { tokens, media };
  }

  /**
   * Answers every question of a request, reading the state once.
   * @throws {StateTooLongError} see {@link plan}; engine errors pass through.
   */
  async decide(
    request: DecisionRequest,
    signal?: AbortSignal,
    hooks?: DecideHooks,
  ): Promise<DecisionResult> {
    const plan = await this.plan(request, signal);
    const usage = usageOf(plan);
    // The request's usage is known from its plan: the caller may refuse it before the model runs.
    await hooks?.beforeScore?.(usage);
    // Priors first, so the engine's last prefix is this request's state (a repeat reuses it).
    const priors =
      this.options.contentFree === false ? undefined : await this.priorsOf(plan, signal);
    const result = await this.engine.score(
      {
        prefix: plan.prefix,
        branches: plan.branches,
        ...(plan.media.length > 0 ? { media: plan.media } : {}),
      },
      signal,
    );
    const answers: Record<string, Answer> = {};
    // What the state alone says about Yes/No, less the content-free prior (question contrast).
    const statePush = plan.contrast
      ? normalised(readTrie(plan.contrast.trie, result.branches[plan.contrast.branch]!, 2)).map(
          (lp, j) => lp - (priors?.[plan.contrast!.branch]?.[j] ?? 0),
        )
      : undefined;
    for (const q of plan.questions) {
      const perOrder = q.views.map((view, v) => {
        const score = result.branches[q.firstBranch + v]!;
        const byPosition = normalised(readTrie(view.trie, score, q.labelCount));
        const prior = priors?.[q.firstBranch + v];
        // Map positions back to option indices, less the content-free prior of each position.
        const byOption = new Array<number>(q.labelCount);
        const push = q.question.type === "noul" ? statePush : undefined;
        view.order.forEach((optionIndex, position) => {
          byOption[optionIndex] =
            byPosition[position]! - (prior?.[position] ?? 0) - (push?.[position] ?? 0);
        });
        return byOption;
      });
      const averaged = perOrder[0]!.map(
        (_, i) => perOrder.reduce((sum, lp) => sum + lp[i]!, 0) / perOrder.length,
      );
      const temperature = temperatureFor(this.options.calibration, q.question.type, q.labelCount);
      answers[q.id] = assemble(q.question, softmax(averaged, temperature));
    }
    return {
      answers,
      usage,
      stats: {
        evaluatedTokens: result.evaluatedTokens,
        cachedPrefixTokens: result.cachedPrefixTokens,
      },
    };
  }

  /**
   * The content-free prior of every branch of a plan (log p by label position, normalised over
   * the labels; probabilities averaged over {@link CONTENT_FREE_STATES}), from the cache or by
   * scoring the uncached branches on top of each content-free prefix (same system message, state
   * block and media-free user turn). These evaluations are not counted in the request's usage.
   */
  private async priorsOf(plan: Plan, signal?: AbortSignal): Promise<number[][]> {
    const keys = plan.branches.map(viewKey);
    const missing = [...new Set(keys.filter((key) => !this.priors.has(key)))];
    if (missing.length > 0) {
      const at = new Map(missing.map((key) => [key, keys.indexOf(key)]));
      const branches = missing.map((key) => plan.branches[at.get(key)!]!);
      const tries = missing.map((key) => this.trieOfBranch(plan, at.get(key)!));
      const sums = missing.map((_, i) => new Array<number>(tries[i]!.count).fill(0));
      const { contentFreePrefixes } = await this.prepare(signal);
      for (const prefix of contentFreePrefixes) {
        const result = await this.engine.score({ prefix, branches }, signal);
        missing.forEach((_, i) => {
          const lp = normalised(readTrie(tries[i]!.trie, result.branches[i]!, tries[i]!.count));
          lp.forEach((x, j) => (sums[i]![j]! += Math.exp(x) / CONTENT_FREE_STATES.length));
        });
      }
      missing.forEach((key, i) => this.priors.set(key, sums[i]!.map(Math.log)));
    }
    return keys.map((key) => this.priors.get(key)!);
  }

  /** The label trie and label count of the question view that produced branch `index`. */
  private trieOfBranch(plan: Plan, index: number): { trie: LabelTrie; count: number } {
    if (plan.contrast?.branch === index) return { trie: plan.contrast.trie, count: 2 };
    for (const q of plan.questions) {
      const v = index - q.firstBranch;
      if (v >= 0 && v < q.views.length) return { trie: q.views[v]!.trie, count: q.labelCount };
    }
    throw new Error(`no question owns branch ${index}`);
  }

  /**
   * How a question's options are labelled: choice questions are answered with their own option
   * ids after an "Answer:" cue when every id is short and the ids' token sequences are
   * prefix-free (unless `labels: "fixed"`); otherwise, and for noul and score, the fixed labels
   * of {@link labelsOf} at the start of the reply.
   */
  private async labelStyleOf(
    question: Question,
    tail: TailPrompt,
    signal?: AbortSignal,
  ): Promise<{
    words: boolean;
    cue: string;
    cueTokens: Token[];
    labelsAt(order: readonly number[]): string[];
  }> {
    const fixed = {
      words: false,
      cue: "",
      cueTokens: [] as Token[],
      labelsAt: (_order: readonly number[]) => labelsOf(question),
    };
    if (question.type !== "choice" || this.options.labels === "fixed") return fixed;
    const words = question.options.map(([id]) => ` ${id}`);
    const sequences: Token[][] = [];
    try {
      for (const w of words) sequences.push(await this.tokensOfLabel(w, ANSWER_CUE, tail, signal));
    } catch (error) {
      // An engine failure or an abort is not a reason to change labels.
      if (!(error instanceof LabelTokensError)) throw error;
      return fixed;
    }
    const longest = this.options.maxWordLabelTokens ?? MAX_WORD_LABEL_TOKENS;
    if (sequences.some((t) => t.length > longest)) return fixed;
    try {
      buildLabelTrie(sequences);
    } catch {
      return fixed;
    }
    return {
      words: true,
      cue: ANSWER_CUE,
      cueTokens: await this.engine.tokenize(ANSWER_CUE, signal ? { signal } : {}),
      labelsAt: (order) => order.map((i) => words[i]!),
    };
  }

  /** Option orders shown for a question: identity first, then the debiasing orders. */
  private ordersOf(question: Question): number[][] {
    const n = labelCountOf(question);
    const identity = Array.from({ length: n }, (_, i) => i);
    const mode = question.type === "choice" ? (this.options.debias ?? "off") : "off";
    if (mode === "off") return [identity];
    if (mode === "reverse") return [identity, [...identity].reverse()];
    const shifts = Math.min(n, 8);
    return Array.from({ length: shifts }, (_, s) => {
      const shift = Math.round((s * n) / shifts);
      return identity.map((i) => (i + shift) % n);
    });
  }

  /**
   * Tokens of a label as it follows the assistant-turn opening, checked against the tokenizer:
   * tokenizing the opening and the label together must give the opening's tokens followed by the
   * label's own, otherwise the label would not be what the model writes there.
   */
  private async tokensOfLabel(
    label: string,
    cue: string,
    tail: TailPrompt,
    signal?: AbortSignal,
  ): Promise<Token[]> {
    const key = `${cue}\u0000${label}`;
    const known = this.labelTokens.get(key);
    if (known) return known;
    const options = signal ? { signal } : {};
    const context = [...tail.tail, ...(await this.engine.tokenize(cue, options))];
    const alone = await this.engine.tokenize(label, options);
    const together = await this.engine.tokenize(tail.tailText + cue + label, {
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
    this.labelTokens.set(key, tokens);
    return tokens;
  }
}

/** The assistant-turn opening, what label tokens are checked against. */
type TailPrompt = Pick<PreparedPrompt, "tail" | "tailText">;

/** A label whose tokens are not what the model would write after the cue (see tokensOfLabel). */
class LabelTokensError extends Error {
  override name = "LabelTokensError";
}

/**
 * Waits for `promise`, or rejects with the signal's reason as soon as `signal` aborts; the
 * promise itself is not cancelled (it may be shared).
 */
function untilAborted<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error as Error);
      },
    );
  });
}

/** A rendered chat split around {@link TEMPLATE_MARKER}. @throws {Error} without the marker. */
function splitAtMarker(rendered: string): { before: string; after: string } {
  const at = rendered.indexOf(TEMPLATE_MARKER);
  if (at < 0) throw new Error("the chat template dropped the user message");
  return { before: rendered.slice(0, at), after: rendered.slice(at + TEMPLATE_MARKER.length) };
}

/** The cue that opens the reply before a word label. */
const ANSWER_CUE = "Answer:";
/** Longest option id (in tokens) used as its own label; longer ids get letter labels. */
const MAX_WORD_LABEL_TOKENS = 8;

/** The labels a question is answered with, one per option / level / side. */
function labelsOf(question: Question): string[] {
  switch (question.type) {
    case "choice":
      return choiceLabels(question.options.length);
    case "noul":
      return [...NOUL_LABELS];
    case "score":
      return scoreLabels(question.levels.length);
  }
}

function labelCountOf(question: Question): number {
  return question.type === "choice"
    ? question.options.length
    : question.type === "score"
      ? question.levels.length
      : 2;
}

function trieDepth(trie: LabelTrie): number {
  let deepest = 0;
  for (const next of trie.next)
    if (typeof next !== "number") deepest = Math.max(deepest, trieDepth(next));
  return 1 + deepest;
}

/** Log-probabilities normalised over exactly the given labels. */
function normalised(logprobs: number[]): number[] {
  const norm = logSumExp(logprobs);
  return logprobs.map((x) => x - norm);
}

/** A question view's identity for the prior cache: its branch tokens and candidate tree. */
function viewKey(branch: ScoreBranch): string {
  return JSON.stringify(branch);
}

function sameTokens(a: readonly Token[], b: readonly Token[]): boolean {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}

/** The typed answer of a question from its probabilities (option / level / [true, false] order). */
export function assemble(question: Question, probabilities: number[]): Answer {
  switch (question.type) {
    case "choice": {
      const record: Record<string, number> = {};
      question.options.forEach(([id], i) => {
        record[id] = probabilities[i]!;
      });
      return {
        type: "choice",
        choice: question.options[argmax(probabilities)]![0],
        probabilities: record,
        confidence: choiceConfidence(probabilities),
      };
    }
    case "noul":
      return { type: "noul", noul: probabilities[0]! };
    case "score": {
      const record: Record<string, number> = {};
      // The level as the request gave it (structured text stays structured, as the official
      // clients type it); an undescribed (null) level as "", since the clients want no null here.
      const legend: Record<string, TextValue> = {};
      question.levels.forEach((level, i) => {
        record[String(i)] = probabilities[i]!;
        legend[String(i)] = level ?? "";
      });
      return {
        type: "score",
        score: expectation(probabilities),
        legend,
        probabilities: record,
        confidence: scoreConfidence(probabilities),
      };
    }
  }
}
