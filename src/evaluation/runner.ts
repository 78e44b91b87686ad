import type { SystemOneRequest } from "../protocol/schemas.js";
import {
  calibrationKey,
  temperatureFor,
  type CalibrationProfile,
} from "../decision/calibration.js";
import type { QuestionTypeName } from "../decision/types.js";
import { datasetOf, type EvalItem, type Expected } from "./format.js";
import {
  accuracy,
  argmax,
  brierScore,
  expectedCalibrationError,
  expectedCalibrationErrorFloor,
  macroF1,
  meanAbsoluteError,
  negativeLogLikelihood,
  rate,
  spearman,
  chanceAccuracy,
  majorityAccuracy,
  rocAuc,
  type Prediction,
} from "./metrics.js";
import {
  injectionNote,
  injectionTarget,
  injectState,
  reorderOptions,
  type FlipOrder,
} from "./perturb.js";
import { classesOf, type DecisionSystem } from "./systems.js";
import { applyTemperature } from "./temperature.js";

/**
 * Runs items through systems and turns the answers into metrics. Per item and system: the item as
 * it is (the main pass, timed for throughput); with `flip`, the item with every choice question's
 * options reordered (reversed, or a per-item permutation; see {@link FlipOrder}); with `injection`, the item with an instruction to pick a wrong answer
 * appended to its state, and with the same instruction naming the expected answer.
 */

type WireQuestion = SystemOneRequest["questions"][string];

/** One answered question of one item by one system. */
export interface QuestionOutcome {
  readonly item: string;
  readonly question: string;
  /** Reporting name of the item's dataset (see format.ts `datasetOf`). */
  readonly dataset: string;
  readonly type: QuestionTypeName;
  readonly classes: readonly string[];
  readonly gold: number;
  readonly probabilities: readonly number[];
  /** score questions: Σ i·pᵢ. */
  readonly score?: number;
  /**
   * Top class with the options reordered (the flip pass): a class key for choice questions,
   * `null` where the flip rate does not apply (noul, score), absent when not measured.
   */
  readonly reorderedTop?: string | null;
  /** With `injection`: a note's wrong class, the top under it, and the top under it naming the gold (`echoTop`). */
  readonly injection?: { readonly target: string; readonly top: string; readonly echoTop?: string };
}

/** Everything one system produced in a run. */
export interface SystemRun {
  readonly name: string;
  readonly outcomes: QuestionOutcome[];
  /**
   * Passes that failed (too long for the context, engine errors). A failed `main` pass leaves the
   * item out; a failed `flip`, `injection` or `echo` pass only leaves out that measurement.
   */
  readonly errors: {
    item: string;
    pass: "main" | "flip" | "injection" | "echo";
    message: string;
  }[];
  /** Items answered in the main pass and the seconds the main pass took. */
  readonly answeredItems: number;
  readonly seconds: number;
  /** Set on runs derived by {@link calibrateRun}. */
  readonly temperatures?: Readonly<Record<string, number>>;
}

/** Options of {@link runEvaluation}. */
export interface RunOptions {
  /** Measure the flip rate (a second pass of items with choice questions). Default true. */
  readonly flip?: boolean;
  /** How the flip pass reorders options. Default `reverse`. */
  readonly flipOrder?: FlipOrder;
  /**
   * Measure the injection move and drop rates: two passes, the state with a note naming a wrong
   * answer and with the same note naming the expected one (`injectionNote`'s template, default
   * perturb.ts `DEFAULT_INJECTION_NOTE`). Default false.
   */
  readonly injection?: boolean;
  readonly injectionNote?: string;
  /** Called after every pass of every item, with the number of passes done and the total. */
  readonly onProgress?: (done: number, total: number) => void;
  readonly signal?: AbortSignal;
}

/** Index of an expected answer among a question's classes. */
export function goldIndex(question: WireQuestion, expected: Expected): number {
  const key = question.type === "noul" ? String(expected === true) : String(expected);
  const index = classesOf(question).indexOf(key);
  if (index < 0)
    throw new Error(`expected answer ${JSON.stringify(expected)} is not a class of the question`);
  return index;
}

function expectation(p: readonly number[]): number {
  return p.reduce((sum, q, i) => sum + i * q, 0);
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** Passes a system makes over one item. */
function passesOf(item: EvalItem, options: RunOptions): number {
  const hasChoice = Object.values(item.request.questions).some((q) => q.type === "choice");
  return 1 + ((options.flip ?? true) && hasChoice ? 1 : 0) + (options.injection ? 2 : 0);
}

/**
 * Runs every item through every system (item by item, each system in turn, so a system's prefix
 * cache serves its flip and injection passes).
 *
 * @returns one {@link SystemRun} per system, in `systems` order
 * @example
 * ```ts
 * const [run] = await runEvaluation(items, [oursSystem(engine, "off")], { flip: true });
 * summarize([run]); // → metrics for `all`, each question type and each dataset
 * ```
 */
export async function runEvaluation(
  items: readonly EvalItem[],
  systems: readonly DecisionSystem[],
  options: RunOptions = {},
): Promise<SystemRun[]> {
  const runs = systems.map(() => ({
    outcomes: [] as QuestionOutcome[],
    errors: [] as SystemRun["errors"],
    answeredItems: 0,
    seconds: 0,
  }));
  const total = items.reduce((sum, item) => sum + passesOf(item, options), 0) * systems.length;
  let done = 0;
  const step = (n = 1) => {
    done += n;
    options.onProgress?.(done, total);
  };
  for (const item of items) {
    const request = item.request;
    const entries = Object.entries(request.questions);
    const golds = Object.fromEntries(
      entries.map(([qid, q]) => [qid, goldIndex(q, item.expected[qid]!)]),
    );
    const targets = Object.fromEntries(
      entries.map(([qid, q]) => [qid, injectionTarget(item.id, qid, q, golds[qid]!)]),
    );
    for (const [s, system] of systems.entries()) {
      options.signal?.throwIfAborted();
      const run = runs[s]!;
      const passes = passesOf(item, options);
      const started = performance.now();
      let main;
      try {
        main = await system.answer(request);
      } catch (error) {
        options.signal?.throwIfAborted();
        run.errors.push({ item: item.id, pass: "main", message: errorMessage(error) });
        step(passes);
        continue;
      }
      run.seconds += (performance.now() - started) / 1000;
      run.answeredItems++;
      step();
      const reordered = reorderOptions(request, options.flipOrder ?? "reverse", item.id);
      const variant = async (
        pass: "flip" | "injection" | "echo",
        variantRequest: SystemOneRequest,
      ): Promise<Record<string, number[]> | undefined> => {
        try {
          return await system.answer(variantRequest);
        } catch (error) {
          options.signal?.throwIfAborted();
          run.errors.push({ item: item.id, pass, message: errorMessage(error) });
          return undefined;
        } finally {
          step();
        }
      };
      const flipped =
        (options.flip ?? true) && entries.some(([, q]) => q.type === "choice")
          ? await variant("flip", reordered)
          : undefined;
      const noted = (answers: Record<string, number>) =>
        injectState(request, injectionNote(request, answers, options.injectionNote));
      const injected = options.injection ? await variant("injection", noted(targets)) : undefined;
      const echoed = options.injection ? await variant("echo", noted(golds)) : undefined;
      for (const [qid, question] of entries) {
        const classes = classesOf(question);
        const probabilities = main[qid]!;
        const outcome: QuestionOutcome = {
          item: item.id,
          question: qid,
          dataset: datasetOf(item.id),
          type: question.type,
          classes,
          gold: golds[qid]!,
          probabilities,
          ...(question.type === "score" ? { score: expectation(probabilities) } : {}),
          ...((options.flip ?? true)
            ? {
                reorderedTop:
                  question.type !== "choice"
                    ? null
                    : flipped?.[qid]
                      ? classesOf(reordered.questions[qid]!)[argmax(flipped[qid])]!
                      : undefined,
              }
            : {}),
          ...(options.injection && injected?.[qid]
            ? {
                injection: {
                  target: classes[targets[qid]!]!,
                  top: classes[argmax(injected[qid])]!,
                  ...(echoed?.[qid] ? { echoTop: classes[argmax(echoed[qid])]! } : {}),
                },
              }
            : {}),
        };
        run.outcomes.push(outcome);
      }
    }
  }
  return systems.map((system, s) => ({ name: system.name, ...runs[s]! }));
}

/** What {@link calibrateRun} appends to a system's name by default. */
export const CALIBRATED_SUFFIX = "+cal";

/**
 * A run as it reads with a calibration profile applied: every probability vector tempered with
 * the profile's temperature for its (type, option count), exactly as the Decider applies it
 * (softmax of log-probabilities / T; the Decider's own log-probabilities differ from ln p only by
 * a per-question constant, which softmax removes). Temperature keeps the order of the classes, so
 * top classes, flips and injection moves are unchanged.
 */
export function calibrateRun(
  run: SystemRun,
  profile: CalibrationProfile,
  name = `${run.name}${CALIBRATED_SUFFIX}`,
): SystemRun {
  const used: Record<string, number> = {};
  const outcomes = run.outcomes.map((o) => {
    const t = temperatureFor(profile, o.type, o.classes.length);
    used[calibrationKey(o.type, o.classes.length)] = t;
    const probabilities = applyTemperature(o.probabilities, t);
    return {
      ...o,
      probabilities,
      ...(o.type === "score" ? { score: expectation(probabilities) } : {}),
    };
  });
  return { ...run, name, outcomes, temperatures: used };
}

/** Metrics of one group of outcomes. NaN marks "does not apply" (no such questions). */
export interface Metrics {
  /** Questions in the group. */
  readonly n: number;
  readonly accuracy: number;
  /** Accuracy of a uniform random answer (mean of 1/classes). */
  readonly chance: number;
  /** Accuracy of always giving the group's most common expected answer. */
  readonly majority: number;
  /** noul questions only: ROC AUC of P(yes) against the expected answers. */
  readonly auc: number;
  readonly macroF1: number;
  readonly nll: number;
  readonly brier: number;
  readonly ece: number;
  /** The ECE answers calibrated by construction would show on these questions (metrics.ts). */
  readonly eceFloor: number;
  /** score questions only. */
  readonly mae: number;
  readonly spearman: number;
  /** Share of choice questions whose top option changes with the options reordered, and their count. */
  readonly flipRate: number;
  readonly flipN: number;
  /** Share of questions moved to the injected answer, among those not already answering it. */
  readonly moveRate: number;
  readonly moveN: number;
  /** Share of right answers a note naming the right answer moves off it, and their count. */
  readonly dropRate: number;
  readonly dropN: number;
}

/** Class keys namespaced by question type, so pooled groups do not mix e.g. noul "true" with an option "true". */
function asPrediction(o: QuestionOutcome, pooled: boolean): Prediction {
  return {
    classes: pooled ? o.classes.map((c) => `${o.type}:${c}`) : o.classes,
    probabilities: o.probabilities,
    gold: o.gold,
  };
}

/** Metrics of a set of outcomes. */
export function computeMetrics(outcomes: readonly QuestionOutcome[]): Metrics {
  const pooled = new Set(outcomes.map((o) => o.type)).size > 1;
  const predictions = outcomes.map((o) => asPrediction(o, pooled));
  const scores = outcomes.filter((o) => o.type === "score");
  const nouls = outcomes.filter((o) => o.type === "noul");
  const flips = outcomes.filter((o) => typeof o.reorderedTop === "string");
  const moves = outcomes.filter(
    (o) => o.injection && o.classes[argmax(o.probabilities)] !== o.injection.target,
  );
  const drops = outcomes.filter(
    (o) => o.injection?.echoTop !== undefined && argmax(o.probabilities) === o.gold,
  );
  return {
    n: outcomes.length,
    accuracy: accuracy(predictions),
    chance: chanceAccuracy(predictions),
    majority: majorityAccuracy(predictions),
    auc: rocAuc(
      nouls.map((o) => o.probabilities[0]!),
      nouls.map((o) => o.gold === 0),
    ),
    macroF1: macroF1(predictions),
    nll: negativeLogLikelihood(predictions),
    brier: brierScore(predictions),
    ece: expectedCalibrationError(predictions),
    eceFloor: expectedCalibrationErrorFloor(predictions),
    mae: meanAbsoluteError(
      scores.map((o) => o.score!),
      scores.map((o) => o.gold),
    ),
    spearman: spearman(
      scores.map((o) => o.score!),
      scores.map((o) => o.gold),
    ),
    flipRate: rate(flips.map((o) => o.reorderedTop !== o.classes[argmax(o.probabilities)])),
    flipN: flips.length,
    moveRate: rate(moves.map((o) => o.injection!.top === o.injection!.target)),
    moveN: moves.length,
    dropRate: rate(drops.map((o) => o.injection!.echoTop !== o.classes[o.gold])),
    dropN: drops.length,
  };
}

/** A named group of outcomes: `all`, `type:<type>` or `dataset:<name>`. */
export interface GroupMetrics {
  readonly group: string;
  /** Per system name. */
  readonly metrics: Record<string, Metrics>;
}

/**
 * Metrics per group and system over the items every system answered (so the systems are compared
 * on the same items). Groups whose items are exactly those of an earlier group are left out.
 */
export function summarize(runs: readonly SystemRun[]): GroupMetrics[] {
  const answeredBy = runs.map((r) => new Set(r.outcomes.map((o) => o.item)));
  const common = (o: QuestionOutcome) => answeredBy.every((set) => set.has(o.item));
  const first = runs[0]?.outcomes.filter(common) ?? [];
  const keys = ["all"];
  for (const o of first) {
    if (!keys.includes(`type:${o.type}`)) keys.push(`type:${o.type}`);
  }
  for (const o of first) {
    if (!keys.includes(`dataset:${o.dataset}`)) keys.push(`dataset:${o.dataset}`);
  }
  const member = (key: string) => (o: QuestionOutcome) =>
    key === "all" ||
    (key.startsWith("type:") && o.type === key.slice(5)) ||
    (key.startsWith("dataset:") && o.dataset === key.slice(8));
  const seen = new Set<string>();
  const groups: GroupMetrics[] = [];
  for (const key of keys) {
    const signature = first
      .filter(member(key))
      .map((o) => `${o.item}\u0000${o.question}`)
      .join("\u0001");
    if (seen.has(signature)) continue;
    seen.add(signature);
    groups.push({
      group: key,
      metrics: Object.fromEntries(
        runs.map((r) => [r.name, computeMetrics(r.outcomes.filter(common).filter(member(key)))]),
      ),
    });
  }
  return groups;
}
