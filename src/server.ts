import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildApp, type FastifyInstance, type Gate, type ServedModel } from "./api/app.js";
import { ApiError, Errors, HttpError } from "./protocol/errors.js";
import { CLIENT_DEFAULT_ALIAS, PUBLIC_MODEL_NAME } from "./protocol/models.js";
import { Lifecycle } from "./api/lifecycle.js";
import { consoleMount, type ConsoleOptions } from "./console/plugin.js";
import type { SystemOnePassThrough } from "./decision/backends/systemone.js";
import type { CalibrationProfile } from "./decision/calibration.js";
import {
  Decider,
  TUNED_READOUT,
  type DebiasMode,
  type ReadoutSettings,
} from "./decision/decide.js";
import { adapterProfileId } from "./models/adapters.js";
import { checkAdapterBundle } from "./models/bundle.js";
import { renderMediaText } from "./decision/prompt.js";
import { openLlamaEngine } from "./engine/llama/index.js";
import { EngineRequestError } from "./engine/remote/index.js";
import { EngineUnavailableError, type Engine } from "./engine/types.js";
import type { DecisionRequest, DecisionResult } from "./decision/types.js";
import { openVisionEngine } from "./engine/vision/index.js";
import type { MediaOptions } from "./media/request.js";
import { DEFAULT_VIDEO_FRAMES, DEFAULT_VIDEO_MAX_SECONDS } from "./media/video.js";

/**
 * The composition root: an engine for one model file, a decider over it, and the HTTP app.
 * `decisiond serve` and the integration tests both start the service through here.
 */

/** The public name of the default model (DESIGN: served as this and under its own name). */
export const DEFAULT_PUBLIC_NAME = PUBLIC_MODEL_NAME;
/** The official clients' default model name; accepted as an alias of the served model. */
export { CLIENT_DEFAULT_ALIAS };

/**
 * The settings of a service, as `decisiond serve` reads them from its flags and `DECISIOND_*`
 * variables (cli/serve-config.ts); each one absent takes the default named on it.
 */
export interface ServiceSettings {
  /** Address to bind. Default `127.0.0.1`. */
  readonly host?: string;
  /** Port to listen on; 0 picks a free one. Default 8080. */
  readonly port?: number;
  /** Largest request body, bytes. Default: the app's (api/app.ts). */
  readonly bodyLimit?: number;
  /** Longest time to receive a whole request, ms. Default: the app's (30 s). */
  readonly requestTimeoutMs?: number;
  /** Decisions admitted at once (running + waiting) before 503. Default: the app's (16). */
  readonly queueCapacity?: number;
  /** Longest a decision may wait and run, ms; 0 for none. Default: the app's (300 s). */
  readonly deadlineMs?: number;
  /** `false` for no log; else pino at `level` (default `info`). */
  readonly logger?: boolean | { level?: string };
  /** Tokens per request (prefix + longest question). Default: the engine's. */
  readonly contextSize?: number;
  /** CPU threads. Default: the engine's (physical cores). */
  readonly threads?: number;
  /** Question branches evaluated side by side (text models). Default: the engine's. */
  readonly parallelBranches?: number;
  /** Most tokens one decode call takes. Default: the engine's. */
  readonly batchSize?: number;
  /** Bytes of the engine's prefix cache; 0 turns it off. Default: the engine's (512 MiB). */
  readonly prefixCacheBytes?: number;
  /** Vision only: side of the square images fed to the projector. Default: the projector's. */
  readonly imageSize?: number;
  /** Vision only: frames sampled from a video. Default 8, capped so frames fill at most half the context. */
  readonly videoFrames?: number;
  /** Vision only: longest video accepted, in seconds. Default 60. */
  readonly videoMaxSeconds?: number;
  /** Vision only: largest decoded image or video frame, in pixels. Default 40 megapixels. */
  readonly maxImagePixels?: number;
  /** Option-order debiasing of choice questions. Default `off`. */
  readonly debias?: DebiasMode;
  /** Most tokens one request may put through the model (→ 422 beyond). Default: twice the context. */
  readonly maxRequestTokens?: number;
  /**
   * Choice labels, contextual calibration, in-context examples, question contrast: only the ones
   * to change, over the Decider's defaults (over {@link TUNED_READOUT} with an adapter).
   */
  readonly readout?: ReadoutSettings;
}

/** Options of {@link startService}: its settings, and what it serves and with what parts. */
export interface ServiceOptions extends ServiceSettings {
  /**
   * Absolute path of the GGUF file (loaded in-process); with {@link ServiceOptions.engine}, only
   * where its calibration profile may lie beside it.
   */
  readonly modelPath?: string;
  /**
   * An engine already opened, e.g. a pool of remote engines (engine/remote/): served instead of
   * loading {@link ServiceOptions.modelPath}. The service closes it.
   */
  readonly engine?: Engine;
  /**
   * Absolute path of the model's multimodal projector (mmproj GGUF). With it the model is served
   * by the vision engine (engine/vision/) and accepts one image or one MP4 per request.
   */
  readonly mmprojPath?: string;
  /**
   * Absolute path of a GGUF LoRA adapter for the model (text models). With it the readout
   * defaults to {@link TUNED_READOUT} and the calibration profile is the adapter's.
   */
  readonly adapterPath?: string;
  /** Model id (catalogue name, or the file name for `--model PATH`). */
  readonly modelId?: string;
  /** Whether this is the catalogue default, also served as {@link DEFAULT_PUBLIC_NAME}. */
  readonly isDefault?: boolean;
  readonly description?: string;
  /** The model's release date, `YYYY-MM-DD`. */
  readonly releaseDate?: string;
  /** A profile to apply; default: `profiles/<model id>.json` beside the model or in the package. */
  readonly calibration?: CalibrationProfile | "none";
  /** Who may call, and the accounts' admission; none (open, loopback only) when absent. */
  readonly gate?: Gate;
  /** The web console under `/console`; none when absent. */
  readonly console?: ConsoleOptions;
  /** Further `/readyz` checks by name (the accounts store); the engine's is always there. */
  readonly readiness?: Readonly<Record<string, () => Promise<void>>>;
  /** Decision requests waiting for their account's slot, for `/metrics`. */
  readonly queueDepth?: () => number;
}

/** A running service. */
export interface Service {
  readonly app: FastifyInstance;
  readonly engine: Engine;
  readonly decider: Decider;
  /** `http://host:port`. */
  readonly url: string;
  /**
   * Graceful drain: new decision requests get 503 and `/readyz` 503 from now on; resolves once
   * the requests in flight are answered (or after `timeoutMs`), with whether they all were.
   * The listener stays open: call {@link close} after.
   */
  drain(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * Loads the model (or takes {@link ServiceOptions.engine}), builds the app and starts listening.
 * @param options - its settings (as `decisiond serve` configures them) and what it serves
 * @returns the running service; `close()` it (the engine is closed with it)
 * @throws Error when neither a model path nor an engine is given; the engine's error when the
 *   model cannot load; Fastify's when the app cannot listen (the engine is closed first)
 * @example `const service = await startService({ modelPath, host: "127.0.0.1", port: 0 });`
 */
export async function startService(options: ServiceOptions): Promise<Service> {
  if (!options.engine && !options.modelPath)
    throw new Error("startService needs a model path or an engine");
  const modelPath = options.modelPath ?? "";
  const modelId =
    options.modelId ??
    (options.engine ? options.engine.model.id : basename(modelPath).replace(/\.gguf$/i, ""));
  const engine = options.engine
    ? options.engine
    : options.mmprojPath
      ? await openVisionEngine({
          modelPath,
          mmprojPath: options.mmprojPath,
          id: modelId,
          contextSize: options.contextSize,
          threads: options.threads,
          batchSize: options.batchSize,
          imageSize: options.imageSize,
        })
      : await openLlamaEngine({
          modelPath,
          id: modelId,
          adapterPath: options.adapterPath,
          contextSize: options.contextSize,
          threads: options.threads,
          parallelBranches: options.parallelBranches,
          batchSize: options.batchSize,
          prefixCacheBytes: options.prefixCacheBytes,
        });
  const calibration =
    options.calibration === "none"
      ? undefined
      : (options.calibration ??
        (options.adapterPath
          ? loadCalibrationProfile(adapterProfileId(options.adapterPath), options.adapterPath)
          : loadCalibrationProfile(modelId, modelPath)));
  if (options.adapterPath)
    await checkAdapterBundle(options.adapterPath, TUNED_READOUT).catch(async (error: unknown) => {
      await engine.close();
      throw error;
    });
  const decider = new Decider(engine, {
    calibration,
    debias: options.debias ?? "off",
    ...(options.maxRequestTokens ? { maxRequestTokens: options.maxRequestTokens } : {}),
    ...(options.adapterPath ? TUNED_READOUT : {}),
    ...options.readout,
  });
  const served: ServedModel = {
    names: options.isDefault ? [DEFAULT_PUBLIC_NAME, modelId] : [modelId],
    aliases: [CLIENT_DEFAULT_ALIAS],
    description:
      options.description ??
      (options.engine ? `${modelId} (remote engine)` : `${modelId} (GGUF, llama.cpp in-process)`),
    releaseDate: options.releaseDate ?? "2026-11-21",
    acceptsImages: engine.model.vision,
    acceptsVideos: engine.model.vision,
    media: engine.model.vision ? await mediaOptions(engine, options) : undefined,
    decide: (request, signal, hooks) => engineErrors(decider.decide(request, signal, hooks)),
  };
  const readiness = {
    ...options.readiness,
    engine: async () => {
      if ((await (engine as Engine).ready?.()) === false)
        throw new Error("the engine does not answer its health check");
    },
  };
  const { app, url, lifecycle } = await listenApp(served, { ...options, readiness }).catch(
    async (error: unknown) => {
      await engine.close();
      throw error;
    },
  );
  return {
    app,
    engine,
    decider,
    url,
    drain: (timeoutMs) => lifecycle.drain(timeoutMs),
    async close() {
      await app.close();
      await engine.close();
    },
  };
}

/**
 * Serves engines that answer `/v1/systemone` themselves (decision/backends/systemone.ts):
 * decisiond's keys, limits, validation and console in front, the engine's answers passed through.
 * @returns the running service, with no engine or decider of its own
 * @throws Fastify's error when the app cannot listen.
 * @example `await startPassThroughService({ passThrough, modelId: "smollm2-135m-instruct", port: 0 })`
 */
export async function startPassThroughService(
  options: AppServiceOptions &
    Pick<ServiceOptions, "isDefault" | "description" | "releaseDate"> & {
      readonly passThrough: SystemOnePassThrough;
      readonly modelId: string;
    },
): Promise<Omit<Service, "engine" | "decider">> {
  const { passThrough, modelId } = options;
  const served: ServedModel = {
    names: options.isDefault ? [DEFAULT_PUBLIC_NAME, modelId] : [modelId],
    aliases: [CLIENT_DEFAULT_ALIAS],
    description: options.description ?? `${modelId} (remote engine, native /v1/systemone)`,
    releaseDate: options.releaseDate ?? "2026-11-21",
    acceptsImages: false,
    acceptsVideos: false,
    decide: (request: DecisionRequest, signal?: AbortSignal) =>
      engineErrors(passThrough.decide(modelId, request, signal)),
  };
  const { app, url, lifecycle } = await listenApp(served, options);
  return {
    app,
    url,
    drain: (timeoutMs) => lifecycle.drain(timeoutMs),
    close: () => app.close(),
  };
}

/** The options of {@link listenApp}: those of a service that concern its HTTP side. */
type AppServiceOptions = Pick<
  ServiceOptions,
  | "host"
  | "port"
  | "bodyLimit"
  | "logger"
  | "gate"
  | "console"
  | "queueCapacity"
  | "deadlineMs"
  | "requestTimeoutMs"
  | "readiness"
  | "queueDepth"
>;

/**
 * Builds the app serving one model, with a drain state of its own, and listens.
 * @returns the app, its URL (`http://host:port`, the bound port when `port` is 0) and its
 *   {@link Lifecycle}.
 * @throws when the app cannot listen (the port is taken, the host not local).
 */
async function listenApp(
  served: ServedModel,
  options: AppServiceOptions,
): Promise<{ app: FastifyInstance; url: string; lifecycle: Lifecycle }> {
  const lifecycle = new Lifecycle();
  const app = await buildApp({
    lifecycle,
    readiness: options.readiness,
    queueDepth: options.queueDepth,
    models: [served],
    bodyLimit: options.bodyLimit,
    queue: { capacity: options.queueCapacity, deadlineMs: options.deadlineMs },
    requestTimeoutMs: options.requestTimeoutMs,
    logger: options.logger,
    gate: options.gate,
    mounts: options.console ? [consoleMount(options.console)] : [],
    version: packageVersion(),
  });
  const host = options.host ?? "127.0.0.1";
  await app.listen({ host, port: options.port ?? 8080 });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return { app, url: `http://${urlHost}:${port}`, lifecycle };
}

/**
 * Engine failures as API answers: no engine reachable → 503 `engine_unreachable` with
 * `Retry-After`; a pass-through engine's own 4xx → the same status and body.
 */
async function engineErrors(decision: Promise<DecisionResult>): Promise<DecisionResult> {
  try {
    return await decision;
  } catch (error) {
    if (error instanceof EngineUnavailableError)
      throw new ApiError(Errors.engineUnreachable, [error.message], {
        headers: { "retry-after": String(error.retryAfterSeconds) },
      });
    if (error instanceof EngineRequestError && error.status < 500) {
      let body: unknown;
      try {
        body = JSON.parse(error.body);
      } catch {
        body = new ApiError(Errors.engineRefused, [error.body.slice(0, 500)]).body;
      }
      throw new HttpError(error.status, body);
    }
    throw error;
  }
}

/**
 * How the served model takes media: images at the engine's projector size, and a video's frames
 * capped so that they fill at most half of the context (the rest is for the state and questions).
 */
export async function mediaOptions(
  engine: Engine,
  options: Pick<ServiceOptions, "videoFrames" | "videoMaxSeconds" | "maxImagePixels">,
): Promise<MediaOptions> {
  const { imageSize, imageTokens, contextSize } = engine.model;
  if (!imageSize || !imageTokens) throw new Error("a vision engine must report its image size");
  const wanted = options.videoFrames ?? DEFAULT_VIDEO_FRAMES;
  // A frame's cost: its image positions plus its caption, measured on the widest caption.
  const caption = renderMediaText({
    kind: "video",
    frames: Array.from({ length: Math.max(wanted, 2) }, () => ({
      image: { data: new Uint8Array(), mimeType: "image/png" as const },
      seconds: 1000,
    })),
    durationSeconds: 1000,
  }).before[1]!;
  const perFrame = imageTokens + (await engine.tokenize(caption)).length;
  const fit = Math.max(1, Math.floor(contextSize / 2 / perFrame));
  return {
    imageSize,
    videoFrames: Math.min(wanted, fit),
    videoMaxSeconds: options.videoMaxSeconds ?? DEFAULT_VIDEO_MAX_SECONDS,
    maxPixels: options.maxImagePixels,
  };
}

/** decisiond's version, from its package.json. */
export function packageVersion(): string {
  const file = join(dirname(fileURLToPath(import.meta.url)), "..", "package.json");
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

/**
 * The calibration profile of a model: `<model file>.calibration.json` beside the model file,
 * else `profiles/<model id>.json` shipped with decisiond; `undefined` when neither exists.
 * @throws SyntaxError when a profile file exists but is not valid JSON.
 */
export function loadCalibrationProfile(
  modelId: string,
  modelPath: string,
): CalibrationProfile | undefined {
  const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
  for (const file of [
    ...(modelPath ? [`${modelPath}.calibration.json`] : []),
    join(packageRoot, "profiles", `${modelId}.json`),
  ]) {
    if (existsSync(file)) return JSON.parse(readFileSync(file, "utf8")) as CalibrationProfile;
  }
  return undefined;
}
