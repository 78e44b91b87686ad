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
  maxWordLabelTokens: 16,
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

/**
 * Turns decision requests into engine requests and engine log-probabilities into typed answers
 * (DESIGN.md: decision.plan → engine.score → decision.answer). The static parts of the prompt
 * (system message, chat template around the user turn, label tokens) are tokenized once.
 */
export class Decider {
  /** Template tokens before the user's content (system message, user-turn opening). */
  private readonly head: Token[];
  /** Template tokens after the user's content (user-turn close, assistant-turn opening). */
  private readonly tail: Token[];
  private readonly tailText: string;
  private readonly labelTokens = new Map<string, Token[]>();
  /** The prefix of each content-free state (tokenized once), in {@link CONTENT_FREE_STATES} order. */
  private readonly contentFreePrefixes: readonly Token[][];
  /** Content-free prior per question view: key {@link viewKey}, value log p by label position. */
  private readonly priors = new LRUCache<string, number[]>({ max: PRIOR_CACHE_ENTRIES });

  constructor(
    readonly engine: Engine,
    readonly options: DeciderOptions = {},
  ) {
    // The tail first: reading an example's reply labels needs it.
    this.tailText = splitAtMarker(
      engine.chatTemplate.render([
        { role: "system", content: options.systemMessage ?? SYSTEM_MESSAGE },
        { role: "user", content: TEMPLATE_MARKER },
      ]),
    ).after;
    this.tail = engine.tokenize(this.tailText, { special: true });
    const examples =
      options.examples === false ? [] : PROMPT_EXAMPLES.flatMap((e) => this.exampleTurns(e));
    const { before } = splitAtMarker(
      engine.chatTemplate.render([
        { role: "system", content: options.systemMessage ?? SYSTEM_MESSAGE },
        ...examples,
        { role: "user", content: TEMPLATE_MARKER },
      ]),
    );
    this.head = engine.tokenize(before, { special: true });
    this.contentFreePrefixes = CONTENT_FREE_STATES.map((state) => [
      ...this.head,
      ...engine.tokenize(renderStateBlock(state)),
    ]);
  }

  /**
   * An in-context example as a user turn (state block and question, rendered as a request's) and
   * an assistant turn holding the reply this Decider reads: the option id after the answer cue
   * for word-labelled choices, otherwise the label of the answer.
   */
  private exampleTurns(example: PromptExample): ChatMessage[] {
    const { question, answer } = example;
    const style = this.labelStyleOf(question);
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
   * @param stateTokens the state block's tokens when already known ({@link stateTokens}).
   * @throws {StateTooLongError} when prefix + the longest branch exceeds the context; nothing is
   *   truncated.
   */
  plan(request: DecisionRequest, stateTokens?: Token[]): Plan {
    stateTokens ??= this.engine.tokenize(renderStateBlock(request.state));
    const { tokens: mediaPrefix, media } = this.mediaPart(request);
    const mediaTokens = media.length * (this.engine.model.imageTokens ?? 0);
    const prefix = [...this.head, ...mediaPrefix, ...stateTokens];
    const branches: ScoreBranch[] = [];
    const questions: QuestionPlan[] = [];
    let longest = 0;
    let longestId: string | undefined;
    for (const [id, question] of request.questions) {
      const orders = this.ordersOf(question);
      const firstBranch = branches.length;
      const style = this.labelStyleOf(question);
      const views = orders.map((order) => {
        // Position p shows option order[p] under labels[p].
        const labels = style.labelsAt(order);
        const text = renderQuestion(question, labels, order, style.words);
        const tokens = [...this.engine.tokenize(text), ...this.tail, ...style.cueTokens];
        const trie = buildLabelTrie(labels.map((label) => this.tokensOfLabel(label, style.cue)));
        const branch = trieBranch(tokens, trie);
        branches.push(branch);
        const depth = tokens.length + trieDepth(trie) - 1;
        if (depth > longest) {
          longest = depth;
          longestId = id;
        }
        return { order, trie };
      });
      questions.push({ id, question, labelCount: labelCountOf(question), views, firstBranch });
    }
    // One contrast branch serves every noul question: it has no question in it.
    const noul = questions.find((q) => q.question.type === "noul");
    let contrast: Plan["contrast"];
    if (noul && this.options.questionContrast !== false) {
      const trie = noul.views[0]!.trie;
      contrast = { branch: branches.length, trie };
      branches.push(trieBranch([...this.tail], trie));
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
  async stateTokens(state: Json, signal?: AbortSignal): Promise<Token[]> {
    const text = renderStateBlock(state);
    const room = this.engine.model.contextSize - this.head.length;
    if (Buffer.byteLength(text, "utf8") <= room) return this.engine.tokenize(text);
    const tokens: Token[] = [];
    let cuts = 0;
    for (let at = 0; at < text.length;) {
      signal?.throwIfAborted();
      const end = sliceEnd(text, at);
      for (const token of this.engine.tokenize(text.slice(at, end))) tokens.push(token);
      if (end < text.length && text[end] !== " ") cuts++;
      // A hard cut splits at most one word, whose pieces may take a few more tokens than it
      // whole; 8 per cut is far more than that.
      const atLeast = tokens.length - 8 * cuts;
      if (atLeast > room) {
        const error = new StateTooLongError(
          atLeast,
          this.head.length + atLeast,
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
  private mediaPart(request: DecisionRequest): { tokens: Token[]; media: PrefixMedia[] } {
    const tokens: Token[] = [];
    const media: PrefixMedia[] = [];
    if (!request.media || request.media.frames.length === 0) return { tokens, media };
    if (!this.engine.model.vision)
      throw new Error(`model ${this.engine.model.id} does not accept images`);
    const { before, after } = renderMediaText(request.media);
    request.media.frames.forEach((frame, i) => {
      tokens.push(...this.engine.tokenize(before[i]!));
      media.push({ at: this.head.length + tokens.length, image: frame.image });
    });
    tokens.push(...this.engine.tokenize(after));
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
    const plan = this.plan(request, await this.stateTokens(request.state, signal));
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
      for (const prefix of this.contentFreePrefixes) {
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
  private labelStyleOf(question: Question): {
    words: boolean;
    cue: string;
    cueTokens: Token[];
    labelsAt(order: readonly number[]): string[];
  } {
    const fixed = {
      words: false,
      cue: "",
      cueTokens: [] as Token[],
      labelsAt: (_order: readonly number[]) => labelsOf(question),
    };
    if (question.type !== "choice" || this.options.labels === "fixed") return fixed;
    const words = question.options.map(([id]) => ` ${id}`);
    try {
      const sequences = words.map((w) => this.tokensOfLabel(w, ANSWER_CUE));
      const longest = this.options.maxWordLabelTokens ?? MAX_WORD_LABEL_TOKENS;
      if (sequences.some((t) => t.length > longest)) return fixed;
      buildLabelTrie(sequences);
    } catch {
      return fixed;
    }
    return {
      words: true,
      cue: ANSWER_CUE,
      cueTokens: this.engine.tokenize(ANSWER_CUE),
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
  private tokensOfLabel(label: string, cue: string): Token[] {
    const key = `${cue}\u0000${label}`;
    const known = this.labelTokens.get(key);
    if (known) return known;
    const context = [...this.tail, ...this.engine.tokenize(cue)];
    const alone = this.engine.tokenize(label);
    const together = this.engine.tokenize(this.tailText + cue + label, { special: true });
    const joined = [...context, ...alone];
    let tokens = alone;
    if (!sameTokens(together, joined)) {
      const headMatches = sameTokens(together.slice(0, context.length), context);
      if (!headMatches)
        throw new Error(`label ${JSON.stringify(label)} merges with the assistant-turn opening`);
      tokens = together.slice(context.length);
    }
    this.labelTokens.set(key, tokens);
    return tokens;
  }
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
