import { basename } from "node:path";
import type { AccountStore } from "../accounts/store.js";
import type { FastifyInstance, Gate, ServedModel } from "../api/app.js";
import type { ServeConfig } from "../cli/serve-config.js";
import type { ServiceSettings } from "../cli/service-settings.js";
import type { ConsoleOptions } from "../console/plugin.js";
import { openRemoteEngines } from "../decision/backends/remote.js";
import type { SystemOnePassThrough } from "../decision/backends/systemone.js";
import type { CalibrationProfile } from "../decision/calibration.js";
import type { Decider } from "../decision/decide.js";
import type { Engine } from "../engine/types.js";
import { resolveAdapter } from "../models/adapters.js";
import { modelBundle, type ModelBundle } from "../models/bundle.js";
import { DEFAULT_MODEL } from "../models/catalogue.js";
import { CLIENT_DEFAULT_ALIAS, PUBLIC_MODEL_NAME } from "../protocol/models.js";
import { SYSTEMONE_PATH } from "../protocol/routes.js";
import { openAccounts, serveConsole, type AccountsConfig, type Print } from "./accounts.js";
import { listenApp, packageVersion } from "./app.js";
import { engineReady, openBackend, type Backend } from "./backend.js";
import { noticeWhileSlow } from "./slow-notice.js";
import {
  catalogueEntryOfFile,
  mediaOptions,
  modelFiles,
  openModelEngine,
  servedEntry,
} from "./model.js";

/**
 * The composition root (DESIGN.md, "One builder"): {@link startService} builds, in one function,
 * the accounts store and its admission, the model bundle, the decision backend and the app;
 * {@link composeService} is what `decisiond serve` runs: its configuration, read once, turned into
 * what that function opens. `eval` and `calibrate` open their model through {@link openModelEngine}.
 * Why one root: docs/decisions/090-one-composition-root.md
 */

/** The public name of the default model (DESIGN: served as this and under its own name). */
export const DEFAULT_PUBLIC_NAME = PUBLIC_MODEL_NAME;
/** The official clients' default model name; accepted as an alias of the served model. */
export { CLIENT_DEFAULT_ALIAS };
export type { ServiceSettings };

export type { AccountsConfig, Print };
export { mediaOptions, openAccounts, openModelEngine, packageVersion, serveConsole };

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
   * Engines that answer `/v1/systemone` themselves (decision/backends/systemone.ts): decisiond's
   * keys, limits, validation and console in front, their answers passed through. Needs
   * {@link ServiceOptions.modelId}; no engine, decider or calibration profile of the service's own.
   */
  readonly passThrough?: SystemOnePassThrough;
  /**
   * Absolute path of the model's multimodal projector (mmproj GGUF). With it the model is served
   * by the vision engine (engine/vision/) and accepts one image or one MP4 per request.
   */
  readonly mmprojPath?: string;
  /**
   * Absolute path of a GGUF LoRA adapter for the model (text models). With it the readout
   * defaults to `TUNED_READOUT` and the calibration profile is the adapter's.
   */
  readonly adapterPath?: string;
  /** Model id (catalogue name, or the file name for `--model PATH`). */
  readonly modelId?: string;
  /** Whether this is the catalogue default, also served as {@link DEFAULT_PUBLIC_NAME}. */
  readonly isDefault?: boolean;
  readonly description?: string;
  /** The model's release date, `YYYY-MM-DD`. */
  readonly releaseDate?: string;
  /** A profile to apply; default: the bundle's (models/bundle.ts `loadCalibrationProfile`). */
  readonly calibration?: CalibrationProfile | "none";
  /**
   * The accounts to open: the store of `--store`, its admission, the gate and the console over
   * them (`decisiond serve`). Absent: {@link ServiceOptions.gate} and {@link ServiceOptions.console}
   * as given.
   */
  readonly accounts?: AccountsConfig;
  /** A gate already made; none (open, loopback only) when absent. Ignored with `accounts`. */
  readonly gate?: Gate;
  /** The web console under `/console`; none when absent. Ignored with `accounts`. */
  readonly console?: ConsoleOptions;
  /** Further `/readyz` checks by name; the engine's and the store's are added. */
  readonly readiness?: Readonly<Record<string, () => Promise<void>>>;
  /** Decision requests waiting for their account's slot, for `/metrics`. Ignored with `accounts`. */
  readonly queueDepth?: () => number;
  /** Where the service reports what it opened (first key, auth off). Default: nowhere. */
  readonly print?: Print;
}

/** A running service. */
export interface Service {
  readonly app: FastifyInstance;
  /** The engine it reads decisions from; `undefined` for a pass-through. */
  readonly engine: Engine;
  /** The decision backend over {@link Service.engine}; `undefined` for a pass-through. */
  readonly decider: Decider;
  /** The accounts store it opened (`accounts`); `undefined` otherwise. */
  readonly store: AccountStore | undefined;
  /** `http://host:port`. */
  readonly url: string;
  /**
   * Graceful drain: new decision requests get 503 and `/readyz` 503 from now on; resolves once
   * the requests in flight are answered (or after `timeoutMs`), with whether they all were.
   * The listener stays open: call {@link close} after.
   */
  drain(timeoutMs: number): Promise<boolean>;
  /**
   * Cuts what the drain could not finish: the decisions running (in the model, waiting for it,
   * or decoding their media) are aborted, each answered 503 `shutting_down` with `Retry-After`
   * and recorded in the ledger as such; resolves once no decision request is in flight (or after
   * `timeoutMs`), with whether none is. A request still sending its body is answered once it
   * has (503), or its connection closed at exit.
   */
  cut(timeoutMs: number): Promise<boolean>;
  /** Closes the app, then the engine and the store the service opened. */
  close(): Promise<void>;
}

/** A running pass-through service: no engine or decider of its own. */
export type PassThroughService = Omit<Service, "engine" | "decider">;

/**
 * Builds the service and starts listening: the accounts (store, admission, gate, console), the
 * model bundle, the decision backend, the one served model, the app.
 * @param options - its settings (as `decisiond serve` configures them) and what it serves
 * @returns the running service; `close()` it (what it opened is closed with it)
 * @throws Error when it is given no model path, engine or pass-through, or a pass-through without
 *   a model id; the store's error when it cannot open; `PromptFormatMismatchError` for an adapter
 *   trained on another prompt format; the engine's error when the model cannot load; Fastify's
 *   when the app cannot listen. What was opened before is closed first.
 * @example `const service = await startService({ modelPath, host: "127.0.0.1", port: 0 });`
 */
export async function startService(
  options: ServiceOptions & { readonly passThrough: SystemOnePassThrough },
): Promise<PassThroughService>;
export async function startService(options: ServiceOptions): Promise<Service>;
export async function startService(options: ServiceOptions): Promise<PassThroughService> {
  const print = options.print ?? (() => {});
  const opened = new Opened();
  opened.add(options.engine); // an engine given is the service's to close, whatever fails
  try {
    const accounts = options.accounts ? await openAccounts(options.accounts, print) : undefined;
    opened.add(accounts?.store);
    // A pass-through reads no profile: the engine behind it calibrates its own answers.
    const bundle = await modelBundle(
      bundleFiles(options),
      options.passThrough ? "none" : options.calibration,
    );
    const backend = opened.add(
      await noticeWhileSlow(
        openBackend(bundle, options),
        print,
        (seconds) =>
          `decisiond: still loading ${bundle.modelId} (${seconds} s): reading the model, adding an adapter into its weights, or node-llama-cpp building llama.cpp for this machine (or waiting for another process's build of it) can take minutes`,
      ),
    );
    const served = await servedModel(bundle, backend, options);
    const { app, url, lifecycle } = await listenApp(served, {
      ...options,
      ...(accounts && {
        gate: accounts.gate,
        console: serveConsole(
          options.accounts!,
          options.accounts!.adminToken,
          accounts.store,
          print,
        ),
        queueDepth: accounts.admission && (() => accounts.admission!.waiting),
      }),
      readiness: {
        ...options.readiness,
        ...(accounts?.store && { store: () => accounts.store!.ping() }),
        ...(backend.engine && { engine: () => engineReady(backend.engine!) }),
      },
    });
    return {
      app,
      engine: backend.engine,
      decider: backend.decider,
      store: accounts?.store,
      url,
      drain: (timeoutMs) => lifecycle.drain(timeoutMs),
      cut: (timeoutMs) => lifecycle.cut(timeoutMs),
      async close() {
        await app.close();
        await opened.close();
      },
    } as Service;
  } catch (error) {
    await opened.close();
    throw error;
  }
}

/**
 * `decisiond serve`: its configuration, read once, turned into a running service. The model's
 * files are pulled when not cached, or the remote engines of `--engine` opened; then
 * {@link startService} builds the rest.
 * @param print - where the service reports what it opened (first key, auth off)
 * @returns the running service, and the lines `serve` reports it with
 * @throws Error for an unknown model or missing file, remote engines that cannot serve together,
 *   and anything {@link startService} throws
 * @example `const { service, report } = await composeService(toServeConfig(flags), print);`
 */
export async function composeService(
  config: ServeConfig,
  print: Print,
): Promise<{ service: PassThroughService; report: string[] }> {
  const common = { ...config.service, accounts: config, print };
  const origins = config.service.corsOrigins ?? [];
  // The console, the accounts store, and which pages may call the API from a browser
  // (--cors-origin): the same whatever serves the answers.
  const settingLines = (service: PassThroughService) => [
    ...(config.console === "on"
      ? [
          `decisiond: console at ${service.url}/console/ (${
            !service.store
              ? "no sign-in: --auth off"
              : `sign in with an API key${config.adminToken !== undefined ? " or the admin token" : ""}`
          })`,
        ]
      : []),
    ...(service.store ? [`decisiond: accounts store ${service.store.kind}`] : []),
    ...(origins.length > 0
      ? [`decisiond: CORS: pages of ${origins.join(", ")} may call the API from a browser`]
      : []),
  ];
  if (config.engines.length === 0) {
    const files = await modelFiles(config);
    const service = await startService({ ...common, ...servedEntry(files.entry), ...files });
    const model = service.engine.model;
    const vision = model.vision
      ? `; images and MP4 videos, ${model.imageSize} px, ${model.imageTokens} positions per image`
      : "";
    const adapter = model.adapter ? ` with adapter ${model.adapter}` : "";
    return {
      service,
      report: [
        `decisiond: serving ${model.id}${adapter} at ${service.url}${SYSTEMONE_PATH} (context ${model.contextSize} tokens${vision})`,
        ...(config.service.readout?.listWindows === false
          ? ["decisiond: long option lists are read whole, not in windows (--list-windows off)"]
          : []),
        ...settingLines(service),
      ],
    };
  }
  // With --engine, no --adapter is none: the engine's model may be any file.
  const adapterPath =
    config.adapter && config.adapter !== "none"
      ? resolveAdapter(config.adapter, undefined)
      : undefined;
  const remote = await openRemoteEngines(config.engines, {
    deadlineMs: config.engineDeadlineMs,
    adapter: adapterPath ?? "none",
    onNotice: (message) => print(`decisiond: ${message}`),
  });
  const urls = config.engines.map((e) => `${e.kind}=${e.url}`).join(", ");
  if (remote.kind === "pass-through") {
    const service = await startService({
      ...common,
      passThrough: remote.passThrough,
      modelId: config.model,
      isDefault: config.model === DEFAULT_MODEL,
    });
    return {
      service,
      report: [
        `decisiond: serving ${urls} (native /v1/systemone, passed through) at ${service.url}${SYSTEMONE_PATH}`,
        ...settingLines(service),
      ],
    };
  }
  const entry = catalogueEntryOfFile(remote.engine.model.path);
  const service = await startService({
    ...common,
    ...servedEntry(entry),
    engine: remote.engine,
    adapterPath,
  });
  const model = service.engine.model;
  return {
    service,
    report: [
      `decisiond: serving ${model.id} from ${urls} at ${service.url}${SYSTEMONE_PATH} (context ${model.contextSize} tokens)`,
      ...settingLines(service),
    ],
  };
}

/** What a service opened, closed in the reverse order, once. */
class Opened {
  private readonly opened: { close(): Promise<void> }[] = [];

  /** Registers `thing` (none when `undefined`) to be closed. @returns it. */
  add<T extends { close(): Promise<void> } | undefined>(thing: T): T {
    if (thing) this.opened.push(thing);
    return thing;
  }

  async close(): Promise<void> {
    for (const thing of this.opened.splice(0).reverse()) await thing.close();
  }
}

/** The bundle's files of a service's options: the model id defaults to the file's or engine's name. */
function bundleFiles(options: ServiceOptions): {
  modelId: string;
  modelPath: string;
  adapterPath?: string;
} {
  if (options.passThrough) {
    if (!options.modelId) throw new Error("a pass-through service needs a model id");
    return { modelId: options.modelId, modelPath: "" };
  }
  if (!options.engine && !options.modelPath)
    throw new Error("startService needs a model path, an engine or a pass-through");
  const modelPath = options.modelPath ?? "";
  const modelId =
    options.modelId ??
    (options.engine ? options.engine.model.id : basename(modelPath).replace(/\.gguf$/i, ""));
  return { modelId, modelPath, adapterPath: options.adapterPath };
}

/**
 * The one model the service answers with, as the API layer sees it: its names (the default's
 * also as the public name), card, media and decide.
 */
async function servedModel(
  bundle: ModelBundle,
  backend: Backend,
  options: ServiceOptions,
): Promise<ServedModel> {
  const { modelId } = bundle;
  const vision = backend.engine?.model.vision ?? false;
  return {
    names: options.isDefault ? [DEFAULT_PUBLIC_NAME, modelId] : [modelId],
    aliases: [CLIENT_DEFAULT_ALIAS],
    description:
      options.description ??
      (options.passThrough
        ? `${modelId} (remote engine, native /v1/systemone)`
        : options.engine
          ? `${modelId} (remote engine)`
          : `${modelId} (GGUF, llama.cpp in-process)`),
    releaseDate: options.releaseDate ?? "2026-11-21",
    acceptsImages: vision,
    acceptsVideos: vision,
    media: vision && backend.engine ? await mediaOptions(backend.engine, options) : undefined,
    decide: backend.decide,
  };
}
