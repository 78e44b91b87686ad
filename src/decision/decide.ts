import type { Engine, ScoreResult, Token } from "../engine/types.js";
import { answer } from "./answer.js";
import { LabelTokenizer } from "./label-style.js";
import { DEFAULT_TRIE_TOLERANCE, type DeciderOptions } from "./options.js";
import { planRequest, scoreRequestOf, usageOf, type Plan } from "./plan.js";
import { preparePrompt, untilAborted, type PreparedPrompt } from "./prepare.js";
import { softmax } from "./math.js";
import {
  answersInCallerOrder,
  reverseScales,
  ScaleOrientations,
  type ScaleProbe,
} from "./orientation.js";
import { PriorCache } from "./priors.js";
import { readout } from "./readout.js";
import { RequestTooLargeError, StateTooLongError, stateTokens } from "./state.js";
import type { DecisionRequest, DecisionResult, Json, Usage } from "./types.js";

// The decision layer's public names, from the modules that own them.
export { assemble } from "./answer.js";
export {
  DEFAULT_TRIE_TOLERANCE,
  TUNED_READOUT,
  type DebiasMode,
  type DeciderOptions,
  type ReadoutSettings,
} from "./options.js";
export { usageOf, type Plan, type QuestionPlan } from "./plan.js";
export { PRIOR_CACHE_ENTRIES } from "./priors.js";
export { CONTENT_FREE_STATES } from "./prompt.js";
export { RequestTooLargeError, STATE_SLICE_CHARS, StateTooLongError } from "./state.js";

/** Hooks into {@link Decider.decide}. */
export interface DecideHooks {
  /**
   * Called once the request is planned and before the model runs, with the usage the call will
   * report (it is fixed by the plan); a rejection stops the call before any model work (an
   * allowance that would be overrun).
   * @param work - tokens the engine expects to evaluate for it (`Engine.workOf`: less than the
   *   usage's input tokens when its state is cached), when the engine says
   */
  beforeScore?(usage: Usage, work?: number): Promise<void>;
}

/**
 * Turns decision requests into engine requests and engine log-probabilities into typed answers,
 * as DESIGN.md draws it: `planRequest` (plan.ts, tokenizer only) → `engine.score` → `readout`
 * (readout.ts, pure) → `answer` (answer.ts, pure). The static parts of the prompt (system
 * message, chat template around the user turn, label tokens) are tokenized once, on the first
 * request (the engine's tokenizer may be remote, so the constructor does no work).
 *
 * @example
 * ```ts
 * const decider = new Decider(engine);
 * const result = await decider.decide({ state: "The parcel arrived crushed.", questions }, signal);
 * result.answers.condition; // → { type: "choice", choice: "damaged", probabilities: {…}, … }
 * ```
 */
export class Decider {
  private readonly labels: LabelTokenizer;
  private readonly priors = new PriorCache();
  private readonly scales = new ScaleOrientations();
  /** The shared preparation, once started; reset when it fails so the next request retries. */
  private preparing: Promise<PreparedPrompt> | undefined;

  constructor(
    readonly engine: Engine,
    readonly options: DeciderOptions = {},
  ) {
    this.labels = new LabelTokenizer(engine);
  }

  /**
   * Tokenizes the static parts of the prompt, once: the first caller starts it and later callers
   * share it. A caller's `signal` only stops that caller's wait; the shared preparation goes on
   * (so a client that hangs up on the first request does not fail the requests behind it). A
   * preparation that fails (engine unreachable) is dropped, and the next call starts it again.
   * @throws what the engine throws while preparing; `AbortError` when `signal` aborts the wait
   */
  prepare(signal?: AbortSignal): Promise<PreparedPrompt> {
    if (!this.preparing) {
      const started = preparePrompt(this.engine, this.labels, this.options);
      this.preparing = started;
      started.catch(() => {
        if (this.preparing === started) this.preparing = undefined;
      });
    }
    return untilAborted(this.preparing, signal);
  }

  /**
   * Builds the engine request (see `planRequest`).
   * @param signal - aborts the wait for the tokenizer (`AbortError`)
   * @throws {@link StateTooLongError} when prefix + the longest branch exceeds the context;
   *   nothing is truncated
   */
  async plan(request: DecisionRequest, signal?: AbortSignal): Promise<Plan> {
    const prepared = await this.prepare(signal);
    return this.planWith(prepared, request, signal);
  }

  /**
   * The tokens of a request's state block (see `stateTokens` in state.ts).
   * @throws {@link StateTooLongError} when the state alone cannot fit; the signal's reason when
   *   aborted
   */
  stateTokens(state: Json, headLength: number, signal?: AbortSignal): Promise<Token[]> {
    return stateTokens(this.engine, state, headLength, signal);
  }

  /**
   * Answers every question of a request, reading the state once.
   * @returns the answers; with `request.unfit: "refuse"`, the questions that cannot fit are in
   *   `refused` instead (when all are, the model is not called and the usage is zero)
   * @throws {@link StateTooLongError} see {@link Decider.plan}; engine errors pass through
   */
  async decide(
    request: DecisionRequest,
    signal?: AbortSignal,
    hooks?: DecideHooks,
  ): Promise<DecisionResult> {
    const prepared = await this.prepare(signal);
    const first = await this.planWith(prepared, request, signal);
    const refused = first.refused ? { refused: first.refused } : {};
    // Every question refused (unfit: "refuse"): nothing for the model to do, nothing to charge.
    if (first.questions.length === 0)
      return {
        answers: {},
        usage: { input_tokens: 0, output_tokens: 0 },
        stats: { evaluatedTokens: 0, cachedPrefixTokens: 0 },
        ...refused,
      };
    const usage = usageOf(first);
    // The request's usage is known from its plan: the caller may refuse it before the model runs.
    await hooks?.beforeScore?.(usage, this.engine.workOf?.(scoreRequestOf(first)));
    const { plan, falling } = await this.oriented(prepared, request, first, signal);
    // Priors first, so the engine's last prefix is this request's state (a repeat reuses it).
    const priors =
      this.options.contentFree === false
        ? undefined
        : await this.priors.of(plan, this.engine, prepared.contentFreePrefixes, signal);
    // Every label read where content-free priors divide them: a label left unread for its small
    // probability could be one whose prior is smaller still.
    const tolerance = priors ? 0 : (this.options.trieTolerance ?? DEFAULT_TRIE_TOLERANCE);
    const result = await this.engine.score(scoreRequestOf(plan, tolerance), signal);
    const answers = answer(plan, readout(plan, result, priors), this.options.calibration);
    return {
      answers: answersInCallerOrder(request, falling, answers),
      usage,
      stats: {
        evaluatedTokens: result.evaluatedTokens,
        cachedPrefixTokens: result.cachedPrefixTokens,
        prefixTokens: plan.prefix.length,
        ...(plan.windows ? { listWindows: listWindowsOf(plan.windows, result) } : {}),
      },
      ...refused,
    };
  }

  /**
   * The plan to run: `first`, or, where the model reads some of its scales as falling, the
   * request planned with those reversed, when that has the same usage and refuses the same
   * questions as `first` (the same lines in another order), and their ids.
   * @throws the signal's reason when aborted
   */
  private async oriented(
    prepared: PreparedPrompt,
    request: DecisionRequest,
    first: Plan,
    signal?: AbortSignal,
  ): Promise<{ plan: Plan; falling: ReadonlySet<string> }> {
    const falling = await this.fallingScales(prepared, request, first, signal);
    if (falling.size === 0) return { plan: first, falling };
    const reversed = await this.planWith(prepared, reverseScales(request, falling), signal).catch(
      (error: unknown) => {
        if (signal?.aborted) throw error;
        return undefined;
      },
    );
    const same = (p: Plan) => JSON.stringify([usageOf(p), p.refused]);
    return reversed && same(reversed) === same(first)
      ? { plan: reversed, falling }
      : { plan: first, falling: new Set() };
  }

  /**
   * The ids of the request's score questions asked reversed ({@link ScaleOrientations}): none
   * unless `scaleOrientation` is on and scores are answered with level numbers.
   */
  private fallingScales(
    prepared: PreparedPrompt,
    request: DecisionRequest,
    plan: Plan,
    signal?: AbortSignal,
  ): Promise<ReadonlySet<string>> {
    const { scaleOrientation, scoreLabels, labels } = this.options;
    if (!scaleOrientation || (scoreLabels === "levels" && labels !== "fixed"))
      return Promise.resolve(new Set());
    const probe: ScaleProbe = async (state, question) => {
      let plan: Plan;
      try {
        plan = await this.planWith(prepared, { state, questions: [["scale", question]] }, signal);
      } catch (error) {
        if (error instanceof StateTooLongError || error instanceof RequestTooLargeError)
          return undefined;
        throw error;
      }
      const result = await this.engine.score(scoreRequestOf(plan), signal);
      return softmax(readout(plan, result)[0]!);
    };
    // The questions the plan answers (not those it refused).
    const planned = new Set(plan.questions.map((q) => q.id));
    const asked = { ...request, questions: request.questions.filter(([id]) => planned.has(id)) };
    return this.scales.falling(asked, probe, signal);
  }

  private planWith(
    prepared: PreparedPrompt,
    request: DecisionRequest,
    signal?: AbortSignal,
  ): Promise<Plan> {
    const planner = { model: this.engine, prepared, labels: this.labels, options: this.options };
    return planRequest(request, planner, signal);
  }
}

/** What became of a plan's windows (`DecisionResult.stats.listWindows`). */
function listWindowsOf(
  planned: readonly number[],
  result: ScoreResult,
): NonNullable<DecisionResult["stats"]["listWindows"]> {
  const read = { planned: planned.length, read: result.leadWindows ?? 0 };
  return result.windowsOff !== undefined ? { ...read, off: result.windowsOff } : read;
}
