import {
  branchTotalTokens,
  type PrefixMedia,
  type ScoreBranch,
  type ScoreRequest,
  type Token,
} from "../engine/types.js";
import { labelStyleOf, type LabelTokenizer, type PromptModel } from "./label-style.js";
import {
  buildLabelTrie,
  toPartingTokens,
  trieBranch,
  triePositions,
  type LabelTrie,
} from "./labels.js";
import { listWindows } from "./list-windows.js";
import type { DeciderOptions } from "./options.js";
import type { PreparedPrompt } from "./prepare.js";
import { renderQuestion } from "./prompt.js";
import { questionTypeOf, type AnyQuestionType, type QuestionTypes } from "./questions/index.js";
import {
  boundedTokens,
  mediaTokensOf,
  RequestTooLargeError,
  stateTokens,
  StateTooLongError,
} from "./state.js";
import type { DecisionRequest, Question, QuestionShape, Usage } from "./types.js";

/** One option order of a question: the order its options are shown in, and its label trie. */
export interface QuestionView {
  /** The option index shown at each position. */
  readonly order: readonly number[];
  /** The trie of the labels' tokens, by position. */
  readonly trie: LabelTrie;
}

/** One question's branches and how to read them back. */
export interface QuestionPlan<Q extends QuestionShape = Question> {
  readonly id: string;
  readonly question: Q;
  /** The question's type, looked up once by the planner: the readout and the answer use it. */
  readonly kind: AnyQuestionType;
  readonly labelCount: number;
  /** One entry per option order (the shown order first, then the debiasing orders). */
  readonly views: readonly QuestionView[];
  /** Index of the first branch of this question in {@link Plan.branches}; one per view. */
  readonly firstBranch: number;
}

/**
 * What {@link planRequest} produces: the engine request plus what is needed to read it. `Q` is
 * the built-in {@link Question} unless the planner was given a registry of its own.
 */
export interface Plan<Q extends QuestionShape = Question> {
  readonly prefix: Token[];
  /** Images in the prefix (the request's image or video frames); empty without media. */
  readonly media: PrefixMedia[];
  /** Context positions the images take. */
  readonly mediaTokens: number;
  readonly branches: ScoreBranch[];
  readonly questions: readonly QuestionPlan<Q>[];
  /**
   * The question-contrast branch ({@link DeciderOptions.questionContrast}): its index in
   * {@link Plan.branches} and its Yes/No trie; absent when the request has no noul question or
   * the contrast is off.
   */
  readonly contrast?: { readonly branch: number; readonly trie: LabelTrie };
  /** Prefix plus the longest branch path, the most the context must hold. */
  readonly neededTokens: number;
  /** Prefix, image positions and every branch: what the call puts through the model. */
  readonly inputTokens: number;
  /** Ids of the questions left out because they cannot fit ({@link DecisionRequest.unfit}). */
  readonly refused?: readonly string[];
  /**
   * Where the question stands: `state-first` (the state in the prefix, each question in its
   * branch) or `question-first` (one question, written before the state in the prefix; its
   * branch holds only the assistant-turn opening and the cue).
   */
  readonly layout: PromptLayout;
  /** Where its lone question's lines are cut into windows (`ScoreRequest.windows`), if they are. */
  readonly windows?: readonly number[];
}

/** Where a request's question is written: behind the state, or before it. */
export type PromptLayout = "state-first" | "question-first";

/** What {@link planRequest} plans with: the model, the prepared prompt and the settings. */
export interface Planner {
  readonly model: PromptModel;
  readonly prepared: PreparedPrompt;
  readonly labels: LabelTokenizer;
  /** The question types planned, by name. Default: questions/index.ts `QUESTION_TYPES`. */
  readonly types?: QuestionTypes;
  readonly options: Pick<
    DeciderOptions,
    | "debias"
    | "labels"
    | "maxWordLabelTokens"
    | "questionContrast"
    | "maxRequestTokens"
    | "layout"
    | "labelChain"
    | "listWindows"
  >;
}

/**
 * Plans a request: the shared prefix (prompt head, media captions, state block), one branch per
 * question and option order (question text, user-turn close, assistant opening, answer cue, with
 * the label trie's tokens as candidates), and the question-contrast branch. Runs no model: only
 * the tokenizer, so a fake tokenizer plans as well.
 * @param signal - aborts the wait for the tokenizer (`AbortError`)
 * @returns the plan; its {@link Plan.branches} are in question order, views in order
 * @throws {@link StateTooLongError} when prefix + the longest branch exceeds the context;
 *   nothing is truncated (with `request.unfit: "refuse"`, only when the prefix alone does not
 *   fit: a question that does not is left out and listed in {@link Plan.refused})
 * @throws {@link RequestTooLargeError} when prefix + image positions + every branch exceed
 *   `options.maxRequestTokens` (default twice the context size)
 * @throws `Error` when the request has media and the model takes no images, or a question's type
 *   is not in the planner's registry ({@link Planner.types})
 * @example
 * ```ts
 * const plan = await planRequest({ state: "The box was crushed.", questions }, planner);
 * plan.branches.length; // → one per question and option order, plus one for the contrast
 * ```
 */
export async function planRequest<Q extends QuestionShape = Question>(
  request: DecisionRequest<Q>,
  planner: Planner,
  signal?: AbortSignal,
): Promise<Plan<Q>> {
  const { model, prepared, labels, options } = planner;
  // The one dispatch on a question's type: everything after asks its module.
  const kinds = request.questions.map(([, question]) => questionTypeOf(question, planner.types));
  const { head, tail } = prepared;
  const { contextSize } = model.model;
  // A question's text is counted on a bounded prefix, as the state is: one past the context is
  // as refused as one a megabyte past it.
  const tokenize = (text: string) => boundedTokens(model, text, contextSize, signal);
  // Why the question goes first when there is one: docs/decisions/087-question-first-layout.md
  const lead = questionFirst(request, kinds, options)
    ? await questionLead(kinds[0]!, request.questions[0]![1], planner, signal)
    : undefined;
  // A lead is the lone question's, as its branch would be: the state is counted, refused and
  // blamed against the prompt head alone, and the lead against the room the state leaves.
  const leadLength = lead?.tokens.length ?? 0;
  const top = [...head, ...(lead?.tokens ?? [])];
  const state = await stateTokens(model, request.state, head.length, signal);
  const { tokens: mediaPrefix, media } = await mediaTokensOf(model, request, top.length, signal);
  const mediaTokens = media.length * (model.model.imageTokens ?? 0);
  const prefix = [...top, ...mediaPrefix, ...state];
  const branches: ScoreBranch[] = [];
  const questions: QuestionPlan<Q>[] = [];
  let longest = 0;
  let longestId: string | undefined;
  // Positions before the questions: the prompt, media and state (a lead counts as its question).
  const shared = prefix.length - leadLength + mediaTokens;
  let inputTokens = shared;
  let heaviest: { id?: string; tokens: number } = { tokens: 0 };
  const room = contextSize - shared;
  const refused: string[] = [];
  const windowed =
    request.questions.length === 1 && options.listWindows !== false && model.evaluatesWindows;
  let windows: number[] | undefined;
  for (const [index, [id, question]] of request.questions.entries()) {
    const kind = kinds[index]!;
    const firstBranch = branches.length;
    const style = await labelStyleOf(kind, question, prepared, labels, options, signal);
    const views: QuestionView[] = [];
    let deepest = 0;
    const orders = lead ? [lead.order] : ordersOf(kind, question, options.debias);
    for (const order of orders) {
      // Position p shows option order[p] under labels[p].
      const shown = style.labelsAt(order);
      const text = lead ? "" : renderQuestion(kind, question, shown, order, style.words);
      const asked = lead ? [] : await tokenize(text);
      // A lone choice's long list of option lines may be evaluated in windows (list-windows.ts).
      if (windowed && kind.name === "choice" && orders.length === 1)
        windows = await listWindows(text, asked, tokenize, contextSize);
      const tokens = [...asked, ...tail, ...style.cueTokens];
      const labelTokens: Token[][] = [];
      for (const label of shown)
        labelTokens.push([
          ...(await labels.tokensOf(label, style.cue, prepared, signal)),
          ...style.end,
        ]);
      const full = buildLabelTrie(labelTokens);
      const trie = options.labelChain === "full" ? full : toPartingTokens(full);
      branches.push(trieBranch(tokens, trie));
      deepest = Math.max(deepest, leadLength + tokens.length + trieDepth(trie) - 1);
      views.push({ order, trie });
    }
    // A question that cannot fit beside the prefix fails the request, or is refused (unfit: "refuse").
    if (request.unfit === "refuse" && room > 0 && deepest > room) {
      branches.length = firstBranch;
      refused.push(id);
      windows = undefined;
      continue;
    }
    if (deepest > longest) {
      longest = deepest;
      longestId = id;
    }
    questions.push({
      id,
      question,
      kind,
      labelCount: kind.labelCount(question),
      views,
      firstBranch,
    });
    const tokens =
      leadLength + branches.slice(firstBranch).reduce((sum, b) => sum + branchTotalTokens(b), 0);
    inputTokens += tokens;
    if (tokens > heaviest.tokens) heaviest = { id, tokens };
  }
  // One contrast branch serves every contrasted (noul) question: it has no question in it.
  const contrasted = questions.find((q) => q.kind.contrasted);
  let contrast: Plan["contrast"];
  if (contrasted && options.questionContrast !== false) {
    const trie = contrasted.views[0]!.trie;
    contrast = { branch: branches.length, trie };
    branches.push(trieBranch([...tail], trie));
    inputTokens += branchTotalTokens(branches.at(-1)!);
  }
  const neededTokens = shared + longest;
  if (neededTokens > contextSize)
    throw new StateTooLongError(
      state.length,
      neededTokens,
      contextSize,
      shared < contextSize ? longestId : undefined,
      mediaTokens,
    );
  const maxRequestTokens = options.maxRequestTokens ?? 2 * contextSize;
  if (inputTokens > maxRequestTokens)
    throw new RequestTooLargeError(inputTokens, maxRequestTokens, heaviest.id, heaviest.tokens);
  // A lone question refused (unfit: "refuse") leaves no lead: the prefix is the state's alone.
  const led = lead !== undefined && questions.length > 0;
  return {
    prefix: lead && !led ? [...head, ...state] : prefix,
    media,
    mediaTokens,
    branches,
    questions,
    ...(contrast ? { contrast } : {}),
    neededTokens,
    inputTokens,
    ...(refused.length > 0 ? { refused } : {}),
    ...(windows ? { windows } : {}),
    layout: led ? "question-first" : "state-first",
  };
}

/**
 * Whether a request is planned question first: the layout asks for it, and the request has one
 * question, no media, no option-order debiasing and no question contrast (each of which needs a
 * branch per question or per order behind one shared state).
 * @param kinds - the type of each of the request's questions
 */
export function questionFirst(
  request: DecisionRequest<QuestionShape>,
  kinds: readonly AnyQuestionType[],
  options: Pick<DeciderOptions, "layout" | "debias" | "questionContrast">,
): boolean {
  if (options.layout !== "question-first" || request.questions.length !== 1) return false;
  if (request.media) return false;
  const kind = kinds[0]!;
  if (kind.debiased && (options.debias ?? "off") !== "off") return false;
  return !(kind.contrasted && options.questionContrast !== false);
}

/** The question written before the state: its text and a line break, as tokens, and its order. */
async function questionLead(
  kind: AnyQuestionType,
  question: QuestionShape,
  planner: Planner,
  signal?: AbortSignal,
): Promise<{ tokens: Token[]; order: number[] }> {
  const { model, prepared, labels, options } = planner;
  const style = await labelStyleOf(kind, question, prepared, labels, options, signal);
  const order = kind.canonicalOrder(question);
  const text = renderQuestion(kind, question, style.labelsAt(order), order, style.words);
  // Counted on a bounded prefix, as a branch's question text is.
  const tokens = await boundedTokens(model, `${text}\n`, model.model.contextSize, signal);
  return { tokens, order };
}

/**
 * Option orders shown for a question: its type's canonical order (a choice's options sorted by
 * id), then for a debiased type (choice) the debiasing orders: the reverse, or the cyclic shifts
 * (at most 8, spread over the options) of the canonical order. A score keeps its scale's order;
 * a noul has one order.
 * @param kind - the question's type (questions/index.ts `questionTypeOf`)
 * @returns the orders, each a permutation of the option indices (position p shows option
 * `order[p]`), the canonical order first.
 * @example
 * ```ts
 * // options [["sports", null], ["business", null], ["world", null]]
 * ordersOf(choice, topic, "off"); // → [[1, 0, 2]]
 * ordersOf(choice, topic, "reverse"); // → [[1, 0, 2], [2, 0, 1]]
 * ```
 */
export function ordersOf(
  kind: AnyQuestionType,
  question: QuestionShape,
  debias: DeciderOptions["debias"],
): number[][] {
  const canonical = kind.canonicalOrder(question);
  const mode = kind.debiased ? (debias ?? "off") : "off";
  if (mode === "off") return [canonical];
  if (mode === "reverse") return [canonical, [...canonical].reverse()];
  const n = canonical.length;
  const shifts = Math.min(n, 8);
  return Array.from({ length: shifts }, (_, s) => {
    const shift = Math.round((s * n) / shifts);
    return canonical.map((_, p) => canonical[(p + shift) % n]!);
  });
}

/**
 * The engine request of a plan: its prefix, its branches, its media when it has any, how much
 * of its label tries the engine may leave unread (`trieTolerance`, default 0: none), and its
 * windows when it has them.
 */
export function scoreRequestOf(plan: Plan<QuestionShape>, trieTolerance = 0): ScoreRequest {
  return {
    prefix: plan.prefix,
    branches: plan.branches,
    ...(plan.media.length > 0 ? { media: plan.media } : {}),
    ...(trieTolerance > 0 ? { trieTolerance } : {}),
    ...(plan.windows ? { windows: plan.windows } : {}),
  };
}

/**
 * The usage a plan's call reports: input tokens = {@link Plan.inputTokens} (prefix + image
 * positions + every branch's tokens); output tokens = the label positions read out (one per
 * label-trie position per view).
 */
export function usageOf(plan: Plan<QuestionShape>): Usage {
  let outputTokens = 0;
  for (const q of plan.questions)
    for (const view of q.views) outputTokens += triePositions(view.trie);
  return {
    input_tokens: plan.inputTokens,
    output_tokens: outputTokens,
  };
}

/** Tokens on a trie's longest path, the branch's first candidate included. */
function trieDepth(trie: LabelTrie): number {
  let deepest = 0;
  for (const next of trie.next)
    if (typeof next !== "number") deepest = Math.max(deepest, trieDepth(next));
  return 1 + deepest;
}
