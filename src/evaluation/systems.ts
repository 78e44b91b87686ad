import {
  getLlama,
  LlamaLogLevel,
  type DecisionQuestion,
  type DecisionQuestions,
  type LlamaDecisionContext,
} from "node-llama-cpp";
import type { SystemOneRequest } from "../protocol/schemas.js";
import { toDecisionRequest } from "../decision/from-wire.js";
import { Decider, type DebiasMode, type ReadoutSettings } from "../decision/decide.js";
import type { Answer } from "../decision/types.js";
import type { Engine } from "../engine/types.js";

/**
 * The systems an evaluation compares. A system answers a `/v1/systemone` request body with, per
 * question, a probability vector in the question's class order (see {@link classesOf}).
 */

type WireQuestion = SystemOneRequest["questions"][string];

/** Per question id: probabilities in {@link classesOf} order (they sum to 1). */
export type SystemAnswers = Record<string, number[]>;

/** The name of the node-llama-cpp baseline system (`eval --baseline node-llama-cpp`). */
export const BASELINE_SYSTEM = "node-llama-cpp";

export interface DecisionSystem {
  /** Short name for tables, e.g. `ours`, `ours/reverse`, `node-llama-cpp`. */
  readonly name: string;
  answer(request: SystemOneRequest): Promise<SystemAnswers>;
  close(): Promise<void>;
}

/**
 * Class keys of a question, in the order of its probability vector: choice → option ids in
 * request order; noul → `["true", "false"]`; score → `"0".."n−1"`.
 */
export function classesOf(question: WireQuestion): string[] {
  switch (question.type) {
    case "choice":
      return Object.keys(question.criteria);
    case "noul":
      return ["true", "false"];
    case "score":
      return question.criteria.map((_, i) => String(i));
  }
}

/** Our answer as a probability vector in class order. */
export function answerProbabilities(question: WireQuestion, answer: Answer): number[] {
  if (answer.type !== question.type)
    throw new Error(`answer of type ${answer.type} for a ${question.type} question`);
  switch (answer.type) {
    case "choice":
      return classesOf(question).map((id) => answer.probabilities[id] ?? 0);
    case "noul":
      return [answer.noul, 1 - answer.noul];
    case "score":
      return classesOf(question).map((i) => answer.probabilities[i] ?? 0);
  }
}

/**
 * decisiond's own readout: a {@link Decider} over an engine, without calibration (calibration is
 * applied afterwards from the returned probabilities; see runner.ts), with the given debiasing
 * and, when given, label style and contextual calibration (the Decider's defaults otherwise).
 */
export function oursSystem(
  engine: Engine,
  debias: DebiasMode,
  readout: ReadoutSettings = {},
): DecisionSystem {
  const decider = new Decider(engine, { ...readout, debias });
  return {
    name:
      (debias === "off" ? "ours" : `ours/${debias}`) +
      (readout.labels ? `[${readout.labels}]` : "") +
      (readout.scoreLabels === "levels" ? "[levels]" : "") +
      (readout.scaleOrientation === false ? "[no-orient]" : "") +
      (readout.contentFree === false ? "[no-cf]" : "") +
      (readout.examples === false ? "[no-examples]" : "") +
      (readout.questionContrast === false ? "[no-contrast]" : "") +
      (readout.labelChain === "full" ? "[full-chain]" : ""),
    async answer(request) {
      const result = await decider.decide(toDecisionRequest(request));
      const out: SystemAnswers = {};
      for (const [qid, question] of Object.entries(request.questions)) {
        const answer = result.answers[qid];
        if (!answer) throw new Error(`no answer for question "${qid}"`);
        out[qid] = answerProbabilities(question, answer);
      }
      return out;
    },
    close: async () => undefined,
  };
}

/** Text of an instruction or description for node-llama-cpp (structured text as compact JSON). */
function plain(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * A request's questions in node-llama-cpp's `DecisionQuestions` shape. Questions without
 * instructions get a generic one (node-llama-cpp requires an instruction).
 */
export function toNodeLlamaCppQuestions(request: SystemOneRequest): DecisionQuestions {
  const out: Record<string, DecisionQuestion> = {};
  for (const [qid, q] of Object.entries(request.questions)) {
    switch (q.type) {
      case "choice":
        out[qid] = {
          type: "choice",
          instruction: q.instructions != null ? plain(q.instructions) : "Choose the best option.",
          criteria: Object.fromEntries(
            Object.entries(q.criteria).map(([id, d]) => [id, d == null ? null : plain(d)]),
          ),
        };
        break;
      case "noul": {
        const t = q.criteria?.true;
        const f = q.criteria?.false;
        out[qid] = {
          type: "noul",
          instruction:
            q.instructions != null ? plain(q.instructions) : `Is this true: ${plain(t ?? f)}?`,
          // node-llama-cpp's type asks for both sides; its code accepts either one missing.
          ...(t != null || f != null
            ? { criteria: { true: t != null ? plain(t) : "", false: f != null ? plain(f) : "" } }
            : {}),
        };
        break;
      }
      case "score":
        out[qid] = {
          type: "score",
          instruction: q.instructions != null ? plain(q.instructions) : "Rate it on this scale.",
          criteria: q.criteria.map(plain),
        };
        break;
    }
  }
  return out;
}

/** The node-llama-cpp state document of a request: a string state as it is, other JSON compact. */
export function toDocument(request: SystemOneRequest): string {
  return typeof request.state === "string" ? request.state : JSON.stringify(request.state);
}

/** Options of {@link openNodeLlamaCppBaseline}. */
export interface BaselineOptions {
  readonly modelPath: string;
  /** Default 4096 at most (node-llama-cpp's own default). */
  readonly contextSize?: number;
  /** Default: llama.cpp's count of math cores, as our engine uses. */
  readonly threads?: number;
}

/**
 * node-llama-cpp's own structured decisions (`LlamaDecisionContext.decide`) on the same model
 * file, loaded separately in this process.
 */
export async function openNodeLlamaCppBaseline(options: BaselineOptions): Promise<DecisionSystem> {
  const llama = await getLlama({ gpu: "auto", logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: options.modelPath });
  let context: LlamaDecisionContext;
  try {
    context = await model.createDecisionContext({
      contextSize: { max: options.contextSize ?? 4096 },
      // Our engine's default; node-llama-cpp's own default oversubscribes small machines.
      threads: options.threads ?? llama.cpuMathCores,
    });
  } catch (error) {
    await model.dispose();
    await llama.dispose();
    throw error;
  }
  return {
    name: BASELINE_SYSTEM,
    async answer(request) {
      const answers = await context.decide(toDocument(request), toNodeLlamaCppQuestions(request));
      const out: SystemAnswers = {};
      for (const [qid, question] of Object.entries(request.questions)) {
        const answer = answers[qid];
        if (!answer) throw new Error(`node-llama-cpp gave no answer for question "${qid}"`);
        let probabilities: number[];
        if (answer.type === "noul") probabilities = [answer.value, 1 - answer.value];
        else if (answer.type === "choice")
          probabilities = classesOf(question).map((id) => answer.probabilities[id] ?? 0);
        else probabilities = classesOf(question).map((_, i) => answer.probabilities[i] ?? 0);
        out[qid] = normalise(probabilities);
      }
      return out;
    },
    async close() {
      await context.dispose();
      await model.dispose();
      await llama.dispose();
    },
  };
}

/** Scales to sum 1; uniform when everything is 0 (node-llama-cpp's empty "invalid" answer). */
function normalise(p: number[]): number[] {
  const total = p.reduce((a, b) => a + b, 0);
  return total > 0 ? p.map((v) => v / total) : p.map(() => 1 / p.length);
}
