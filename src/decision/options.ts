import type { CalibrationProfile } from "./calibration.js";
import { TUNED_SYSTEM_MESSAGE } from "./prompt.js";

/**
 * Option-order debiasing: the label log-probabilities of a choice are averaged over several
 * orders of its options, all sharing one evaluated prefix. `reverse` adds the reversed order;
 * `cyclic` adds every cyclic shift (up to 8 orders in all).
 */
export type DebiasMode = "off" | "reverse" | "cyclic";

/**
 * Options of a `Decider`: how requests are planned and read. Every field is optional; an absent
 * field takes the default it names.
 */
export interface DeciderOptions {
  /** Temperatures per (question type, option-count bucket), else per type. Default: none (T = 1). */
  readonly calibration?: CalibrationProfile;
  /** Default `off`. Applies to choice questions (score scales keep their natural order). */
  readonly debias?: DebiasMode;
  // Why words by default, and what `fixed` buys: docs/decisions/056
  /**
   * `words` (default): a choice is answered with its own option ids after an "Answer:" cue
   * (falling back to letters when an id is longer than {@link DeciderOptions.maxWordLabelTokens} or the ids'
   * tokens are not prefix-free). `fixed`: letters at the start of the reply, which a note in the
   * state naming a wrong option moves less often; callers facing adversarial states may choose it.
   */
  readonly labels?: "words" | "fixed";
  // What level labels gain and lose with the shipped adapter: docs/decisions/074-score-level-labels.md
  /**
   * How a score is answered. `numbers` (default): the level numbers 0..n−1 at the start of the
   * reply, after `0 = level` lines. `levels`: the levels' own texts after the "Answer:" cue, asked
   * inline as a choice is (`How frustrated is the customer? calm, frustrated or very angry?`),
   * falling back to numbers when a level is not a string, repeats another, is longer than
   * {@link DeciderOptions.maxWordLabelTokens} tokens, or the levels' tokens are not prefix-free.
   * Ignored when `labels` is `fixed`.
   */
  readonly scoreLabels?: "numbers" | "levels";
  // Why, and what it was measured to do: docs/decisions/115-scales-read-in-their-own-direction.md
  /**
   * Whether a score answered with level numbers is first asked which way its scale runs: its
   * first and last level texts, each as the state, once per distinct question (an LRU of
   * `ORIENTATION_CACHE_ENTRIES`; not counted in usage); a scale the model reads as falling is
   * asked reversed and answered in the caller's order. Default off; on in {@link TUNED_READOUT}
   * (the tuned model reads a level's number by its position on a rising scale).
   */
  readonly scaleOrientation?: boolean;
  /**
   * Contextual calibration (Zhao et al. 2021, "Calibrate Before Use", ICML): every question's
   * label probabilities are divided by the ones the model gives the same question about
   * content-free states (`CONTENT_FREE_STATES`, probabilities averaged), then renormalised, which
   * removes the model's prior for a label (a favourite letter, "Yes", a frequent word) and keeps
   * what the state adds. The prior is computed once per distinct question (its branch tokens) and
   * kept in an LRU of `PRIOR_CACHE_ENTRIES`. Default on.
   */
  readonly contentFree?: boolean;
  /** In-context examples (`PROMPT_EXAMPLES`) as finished chat turns before the request. Default on. */
  readonly examples?: boolean;
  // Why the contrast, and why not for choices: docs/decisions/056
  /**
   * Question contrast for yes/no questions: P(yes) is read from how much the question moves the
   * model's yes/no log-odds away from where the state alone leaves them. One more branch per
   * request (the assistant turn opened right after the state, no question) gives p(label | state);
   * each noul question's p(label | state, question) is divided by it, both already divided by
   * their content-free priors, then renormalised; in logs:
   * `log p(l|s,q) − log p(l|cf,q) − [log p(l|s) − log p(l|cf)]`. This is a pointwise mutual
   * information between the answer and the question given the state, as in domain-conditional
   * PMI (Holtzman et al. 2021, "Surface Form Competition", arXiv 2104.08315), with the state as
   * the domain premise. It removes what the state says about "Yes"/"No" whatever is asked, which
   * is what a note in the state telling the model to answer "No" does. Noul questions only: on a
   * choice it would subtract the evidence itself. Default on.
   */
  readonly questionContrast?: boolean;
  // Why the parting token by default: docs/decisions/101-labels-read-to-their-parting-token.md
  /**
   * How far a label of several tokens is read. `parting` (default): to the token where it parts
   * from the question's other labels; its probability is the chain of its tokens up to there.
   * `full`: to its last token (and the end-of-turn token where one label begins another), the
   * exact chain of the whole label. Labels that part at their last token read the same either way.
   */
  readonly labelChain?: "parting" | "full";
  /** Longest option id, in tokens, answered as its own label. Default 8. */
  readonly maxWordLabelTokens?: number;
  // Why a cap, and why twice the context: docs/decisions/081-one-request-cannot-hold-the-model.md
  /**
   * Most tokens one request may put through the model: its usage's input tokens (the prefix,
   * image positions and every branch), so that one request cannot hold the engine, which serves
   * every caller, for minutes. Default: twice the model's context size.
   */
  readonly maxRequestTokens?: number;
  /** The system message of every request. Default `SYSTEM_MESSAGE`. */
  readonly systemMessage?: string;
  // Why: docs/decisions/087-question-first-layout.md
  /**
   * Where a one-question request's question is written. `state-first` (default): after the state,
   * as every request's questions are. `question-first`: before the state, so that the same
   * question asked of many states shares the evaluated prompt head, question and options (the
   * engine's prefix cache) and only the state and the answer cue are new. Requests with several
   * questions, media, debiasing or question contrast stay state-first.
   */
  readonly layout?: "state-first" | "question-first";
  // Why: docs/decisions/108-children-left-unread-within-a-bound.md
  /**
   * How much of a label trie the engine may leave unread (`ScoreRequest.trieTolerance`): subtrees
   * whose labels together can hold at most this fraction of the probability of the labels read.
   * Each probability of an answer (before calibration) is then within this much of the one
   * every label read gives, and their total variation distance is at most 1.5 times it; 0 reads
   * every label, as do requests read with content-free priors ({@link contentFree}), which a
   * label left unread for its small probability could be one whose prior is smaller still.
   * Default {@link DEFAULT_TRIE_TOLERANCE}.
   */
  readonly trieTolerance?: number;
  // Why: docs/decisions/113-option-lines-in-windows.md
  /**
   * Whether a lone question with a long list of lines (at least `LIST_WINDOWS_FROM_TOKENS` tokens:
   * hundreds of described options) is cut into windows of whole lines that the engine may
   * evaluate each seeing the state and itself only (`ScoreRequest.windows`): about half the time
   * at 4,000 tokens on a CPU, for answers that may differ from the whole list's. Default on.
   */
  readonly listWindows?: boolean;
}

/** Default of {@link DeciderOptions.trieTolerance}: 0.002. */
export const DEFAULT_TRIE_TOLERANCE = 0.002;

/** The readout settings a caller may choose (the rest of {@link DeciderOptions} is serving policy). */
export type ReadoutSettings = Pick<
  DeciderOptions,
  | "labels"
  | "scoreLabels"
  | "scaleOrientation"
  | "contentFree"
  | "examples"
  | "questionContrast"
  | "systemMessage"
  | "maxWordLabelTokens"
  | "layout"
  | "labelChain"
  | "trieTolerance"
  | "listWindows"
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
  layout: "state-first",
  scaleOrientation: true,
};
