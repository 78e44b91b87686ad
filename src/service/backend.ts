import type { ServedModel } from "../api/app.js";
import { READY_CHECK_MS } from "../api/service-routes.js";
import type { ServiceSettings } from "../cli/service-settings.js";
import type { SystemOnePassThrough } from "../decision/backends/systemone.js";
import { Decider } from "../decision/decide.js";
import type { DecisionResult } from "../decision/types.js";
import { EngineRequestError } from "../engine/remote/index.js";
import type { Engine } from "../engine/types.js";
import type { ModelBundle } from "../models/bundle.js";
import { ApiError, Errors, HttpError } from "../protocol/errors.js";
import { openModelEngine } from "./model.js";

/**
 * The decision backend of a service, as the composition root (./build.ts) opens it: decisiond's
 * readout (the `Decider`) over an engine, or a pass-through to engines that answer decisions
 * themselves.
 *
 * @packageDocumentation
 */

/** What {@link openBackend} reads of a service's options. */
export interface BackendOptions extends ServiceSettings {
  /** An engine already opened, served instead of loading the bundle's model. */
  readonly engine?: Engine;
  /** Engines that answer `/v1/systemone` themselves. */
  readonly passThrough?: SystemOnePassThrough;
  /** The projector of a vision model. */
  readonly mmprojPath?: string;
}

/** The decision backend of a service: the Decider over its engine, or the pass-through. */
export interface Backend {
  readonly engine: Engine | undefined;
  readonly decider: Decider | undefined;
  readonly decide: ServedModel["decide"];
  /** Closes the engine it loaded, if any (an engine given is closed by the service). */
  close(): Promise<void>;
}

/**
 * Opens the decision backend of a bundle: the pass-through as given; else the engine given, or
 * the bundle's model loaded in-process, and the Decider over it with the bundle's profile and
 * readout under the settings'.
 */
export async function openBackend(bundle: ModelBundle, options: BackendOptions): Promise<Backend> {
  const passThrough = options.passThrough;
  if (passThrough)
    return {
      engine: undefined,
      decider: undefined,
      decide: (request, signal) =>
        engineErrors(passThrough.decide(bundle.modelId, request, signal)),
      close: async () => {},
    };
  const loaded = options.engine
    ? undefined
    : await openModelEngine(bundle, options, { mmprojPath: options.mmprojPath });
  const engine = options.engine ?? loaded!;
  const decider = new Decider(engine, {
    calibration: bundle.profile,
    debias: options.debias ?? "off",
    ...(options.maxRequestTokens ? { maxRequestTokens: options.maxRequestTokens } : {}),
    ...bundle.readout,
    ...options.readout,
  });
  return {
    engine,
    decider,
    decide: (request, signal, hooks) => engineErrors(decider.decide(request, signal, hooks)),
    close: async () => loaded?.close(),
  };
}

/** The engine's `/readyz` check. */
export async function engineReady(engine: Engine): Promise<void> {
  // Bounded as /readyz waits for it, so no poll leaves a health call open behind it.
  if ((await engine.ready?.(AbortSignal.timeout(READY_CHECK_MS))) === false)
    throw new Error(engine.notReadyReason?.() ?? "the engine does not answer its health check");
}

/**
 * A remote engine's own refusal (a 4xx), forwarded: engines behind decisiond (llama-server with
 * decisiond's routes, a pass-through's) answer in the API's own shapes, so the client gets the
 * engine's status and body as the engine wrote them; a body that is not JSON is wrapped in the
 * table's `engineRefused`. Every other error goes on to the app's one mapping
 * (src/api/error-handler.ts), an unreachable engine by its code.
 */
async function engineErrors(decision: Promise<DecisionResult>): Promise<DecisionResult> {
  try {
    return await decision;
  } catch (error) {
    if (error instanceof EngineRequestError && error.status < 500) {
      let body: unknown;
      try {
        body = JSON.parse(error.body);
      } catch {
        body = new ApiError(Errors.engineRefused, [error.body.slice(0, 500)]).body;
      }
      throw new HttpError(error.status, body, {}, "engineRefused");
    }
    throw error;
  }
}
