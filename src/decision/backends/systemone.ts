import {
  baseUrl,
  callJson,
  DEFAULT_ENGINE_DEADLINE_MS,
  EngineCallError,
  EngineRequestError,
  withDeadline,
} from "../../engine/remote/index.js";
import { EngineUnavailableError } from "../../engine/types.js";
import { SYSTEMONE_PATH } from "../../protocol/routes.js";
import { questionToWire } from "../questions/index.js";
import type { Answer, DecisionRequest, DecisionResult } from "../types.js";

/** Options of {@link SystemOnePassThrough}. */
export interface PassThroughOptions {
  /** Base URLs of engines answering `/v1/systemone`. */
  readonly urls: readonly string[];
  /** Milliseconds a call may take, across engines. Default {@link DEFAULT_ENGINE_DEADLINE_MS}. */
  readonly deadlineMs?: number;
}

/** The engine's answer body (the fields read). */
interface WireAnswer {
  model?: string;
  answers: Record<string, Answer>;
  usage?: { input_tokens?: number; output_tokens?: number };
}

/**
 * Pass-through to engines that answer `POST /v1/systemone` themselves: llama.cpp's `llama-server`
 * from the October 2026 releases on does for decision GGUFs (a GGUF carrying its own readout).
 * decisiond keeps what is its own (keys, limits, usage ledger, validation, the console) and
 * forwards the validated request as the wire body; the engine's answers and usage come back as
 * they are (its own readout and calibration apply, not decisiond's). Several URLs: the least
 * busy first, the next when one does not answer; none answering → {@link EngineUnavailableError}.
 *
 * Tested against recorded exchanges (test/fixtures/systemone/): the llama.cpp this repository
 * builds (node-llama-cpp's release, v0.5.0) predates the native endpoint.
 */
export class SystemOnePassThrough {
  readonly urls: readonly string[];
  private readonly inFlight: number[];
  private readonly deadlineMs: number;

  constructor(options: PassThroughOptions) {
    if (options.urls.length === 0) throw new Error("pass-through needs at least one engine URL");
    this.urls = options.urls.map(baseUrl);
    this.inFlight = this.urls.map(() => 0);
    this.deadlineMs = options.deadlineMs ?? DEFAULT_ENGINE_DEADLINE_MS;
  }

  /**
   * Whether the engine at `url` answers `/v1/systemone` itself: a POST of an empty object gets a
   * validation answer (4xx other than 404), where an engine without the endpoint answers 404.
   * @throws {@link EngineCallError} when the engine does not answer at all.
   */
  static async detect(url: string, signal?: AbortSignal): Promise<boolean> {
    try {
      await callJson(baseUrl(url), SYSTEMONE_PATH, {}, { timeoutMs: 10_000, signal });
      return true;
    } catch (error) {
      if (error instanceof EngineRequestError) return error.status !== 404;
      throw error;
    }
  }

  /**
   * Forwards a decision request (model name `model`) and returns the engine's answers.
   * @throws {@link EngineRequestError} when the engine refuses the request (its 4xx, to pass on).
   * @throws {@link EngineUnavailableError} when no engine answers within the deadline.
   */
  async decide(
    model: string,
    request: DecisionRequest,
    signal?: AbortSignal,
  ): Promise<DecisionResult> {
    if (request.media) throw new Error("pass-through engines are served without media");
    const body = toWireRequest(model, request);
    const { signal: combined, deadline } = withDeadline(this.deadlineMs, signal);
    const order = this.urls
      .map((url, i) => ({ url, i }))
      .sort((a, b) => this.inFlight[a.i]! - this.inFlight[b.i]!);
    const errors: string[] = [];
    for (const { url, i } of order) {
      this.inFlight[i]!++;
      try {
        const answer = await callJson<WireAnswer>(url, SYSTEMONE_PATH, body, {
          timeoutMs: this.deadlineMs,
          signal: combined,
        });
        return {
          answers: answer.answers,
          usage: {
            input_tokens: answer.usage?.input_tokens ?? 0,
            output_tokens: answer.usage?.output_tokens ?? 0,
          },
          stats: { evaluatedTokens: answer.usage?.input_tokens ?? 0, cachedPrefixTokens: 0 },
        };
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        if (deadline.aborted) break;
        if (!(error instanceof EngineCallError)) throw error;
        errors.push(error.message);
      } finally {
        this.inFlight[i]!--;
      }
    }
    throw deadline.aborted
      ? new EngineUnavailableError("engineDeadline", this.deadlineMs, 1)
      : new EngineUnavailableError("engineUnreachable", errors.join("; "), 1);
  }
}

/**
 * The wire body of a decision request (the inverse of the API's translation): questions keyed
 * by id in request order, each by its type's module (questions/*.ts `toWire`: options as
 * `criteria` objects, score levels as a list).
 */
export function toWireRequest(model: string, request: DecisionRequest): Record<string, unknown> {
  const questions: Record<string, unknown> = {};
  for (const [id, question] of request.questions) questions[id] = questionToWire(question);
  return { model, state: request.state, questions };
}
