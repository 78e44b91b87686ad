import { InvalidArgumentError, Option } from "commander";
import { corsOrigin } from "../api/cors.js";
import { isLoopbackName } from "../api/host.js";
import type { DebiasMode } from "../decision/decide.js";
import {
  DEFAULT_ENGINE_DEADLINE_MS,
  parseEngineList,
  REMOTE_ENGINE_KINDS,
  type EngineSpec,
  type RemoteEngineKind,
} from "../engine/remote/index.js";
import { DEFAULT_MODEL } from "../models/catalogue.js";
import {
  byteSize,
  milliseconds,
  millisecondsFrom,
  oneOf,
  onOff,
  port,
  positiveByteSize,
  positiveInt,
  envOption,
  readoutOf,
  readoutServeOptions,
  storeOption,
  type ReadoutFlags,
} from "./options.js";
import { readAdminToken } from "./admin-token.js";
import type { ServiceSettings } from "./service-settings.js";

/**
 * The shortest `--drain-timeout`, ms: its last quarter (at most 1 s, `cutReserveMs` in
 * ./serve.ts) answers what is still in flight 503 and writes its ledger row.
 */
const DRAIN_TIMEOUT_LEAST_MS = 1000;

/**
 * The configuration of `decisiond serve`: its flags, each also read from a `DECISIOND_*`
 * environment variable (commander's `Option.env()`; a flag wins over its variable), turned once
 * into a typed, validated {@link ServeConfig} that is passed down whole.
 * Why this shape: docs/decisions/060-configuration-built-once.md
 */

type OnOff = "on" | "off";

/** `serve`'s options as commander parses them, before {@link toServeConfig}. */
export interface ServeFlags extends ReadoutFlags {
  host: string;
  port: number;
  model: string;
  mmproj?: string;
  adapter?: string;
  imageSize?: number;
  videoFrames?: number;
  videoMaxSeconds?: number;
  contextSize?: number;
  maxRequestTokens?: number;
  threads?: number;
  parallel?: number;
  bodyLimit?: number;
  prefixCache?: number;
  debias: DebiasMode;
  logLevel: string;
  auth: OnOff;
  admissionWait: number;
  queue?: number;
  deadline?: number;
  requestTimeout?: number;
  corsOrigin: string[];
  console: OnOff;
  adminTokenFile?: string;
  store?: string;
  drainTimeout: number;
  engine: EngineSpec[];
  engineDeadline: number;
}

/** The configuration `serve` runs with: built once by {@link toServeConfig}, then only read. */
export interface ServeConfig {
  /** What the service starts with (HTTP, operations, engine, vision, readout), passed whole. */
  readonly service: ServiceSettings & { readonly host: string; readonly port: number };
  /** `--model`: a catalogue name, or a path to a GGUF file (one ending in `.gguf` or existing). */
  readonly model: string;
  /** `--mmproj`: the multimodal projector of a `--model PATH`. */
  readonly mmproj: string | undefined;
  /** `--adapter`: a GGUF LoRA path, `none`, or `undefined` for the catalogue model's own. */
  readonly adapter: string | undefined;
  /** `--auth`: `off` only on a loopback host (checked here). */
  readonly auth: OnOff;
  /** `--admission-wait`: ms a request may wait for its account's slot before 429. */
  readonly admissionWaitMs: number;
  /** `--store`: the accounts store URL; `undefined` for the default SQLite file. */
  readonly store: string | undefined;
  /** `--console`: the web console at `/console`. */
  readonly console: OnOff;
  /** The console's admin token, checked; `undefined` with none given or `--console off`. */
  readonly adminToken: string | undefined;
  /** `--drain-timeout`: ms requests in flight may take after SIGTERM. */
  readonly drainTimeoutMs: number;
  /**
   * `--engine`: remote engines to read decisions from, each with the API key its kind reads from
   * the environment (`VLLM_API_KEY`); empty to load the model in-process.
   */
  readonly engines: readonly EngineSpec[];
  /** `--engine-deadline`: ms one HTTP call to an engine may take. */
  readonly engineDeadlineMs: number;
}

/** `--engine KIND=URL`, repeatable; its variable holds a comma-separated list. */
function engineList(value: string, previous: EngineSpec[]): EngineSpec[] {
  try {
    return [...previous, ...parseEngineList(value)];
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** `--cors-origin`'s parser: comma-separated origins (src/api/cors.ts), added to those before. */
function corsOrigins(value: string, previous: string[]): string[] {
  const entries = value
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  if (entries.length === 0)
    throw new InvalidArgumentError("name at least one origin, or * for any (or leave it unset)");
  try {
    return [...previous, ...entries.map(corsOrigin)];
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/**
 * Every option of `decisiond serve`, in the order `--help` lists them.
 * @returns new `Option`s, each with its `DECISIOND_*` variable (`--store` shares
 *   {@link storeOption} with `keys`, `accounts` and `usage`).
 * @example for (const option of serveOptions()) command.addOption(option);
 */
export function serveOptions(): Option[] {
  return [
    envOption("--host <host>", "address to bind", "DECISIOND_HOST").default("127.0.0.1"),
    envOption("--port <port>", "port to listen on", "DECISIOND_PORT", port).default(8080),
    envOption(
      "--model <name|path>",
      "catalogue model name, or path to a GGUF file",
      "DECISIOND_MODEL",
    ).default(DEFAULT_MODEL),
    envOption(
      "--adapter <path|none>",
      "GGUF LoRA adapter applied on the model; none for the base alone (default: the catalogue model's shipped decision-tuned adapter; with --engine, none: the engine must apply the same file)",
      "DECISIOND_ADAPTER",
    ),
    envOption(
      "--mmproj <path>",
      "multimodal projector GGUF for a --model PATH: serve it as a vision model",
      "DECISIOND_MMPROJ",
    ),
    envOption(
      "--image-size <pixels>",
      "vision: side of the square images fed to the projector (default: the projector's)",
      "DECISIOND_IMAGE_SIZE",
      positiveInt,
    ),
    envOption(
      "--video-frames <n>",
      "vision: frames sampled from a video, capped by the context (default 8)",
      "DECISIOND_VIDEO_FRAMES",
      positiveInt,
    ),
    envOption(
      "--video-max-seconds <s>",
      "vision: longest video accepted (default 60)",
      "DECISIOND_VIDEO_MAX_SECONDS",
      positiveInt,
    ),
    envOption(
      "--context-size <tokens>",
      "tokens per request: prefix + longest question",
      "DECISIOND_CONTEXT_SIZE",
      positiveInt,
    ),
    envOption(
      "--max-request-tokens <tokens>",
      "most tokens one request may put through the model: prefix + every question (default: twice the context)",
      "DECISIOND_MAX_REQUEST_TOKENS",
      positiveInt,
    ),
    envOption(
      "--threads <n>",
      "CPU threads (default: physical cores)",
      "DECISIOND_THREADS",
      positiveInt,
    ),
    envOption(
      "--parallel <n>",
      "question branches evaluated side by side (default 1 on CPU, 16 on GPU)",
      "DECISIOND_PARALLEL",
      positiveInt,
    ),
    envOption(
      "--prefix-cache <size>",
      "memory for snapshots of evaluated prefixes (states), e.g. 512MiB; 0 turns it off (default 512MiB)",
      "DECISIOND_PREFIX_CACHE",
      byteSize,
    ),
    envOption(
      "--body-limit <size>",
      "largest request body, e.g. 16MiB",
      "DECISIOND_BODY_LIMIT",
      positiveByteSize,
    ),
    envOption(
      "--debias <mode>",
      "option-order debiasing: off, reverse or cyclic",
      "DECISIOND_DEBIAS",
      oneOf<DebiasMode>("off", "reverse", "cyclic"),
    ).default("off"),
    ...readoutServeOptions(),
    envOption(
      "--log-level <level>",
      "pino log level: fatal, error, warn, info, debug, trace or silent",
      "DECISIOND_LOG_LEVEL",
      oneOf("fatal", "error", "warn", "info", "debug", "trace", "silent"),
    ).default("info"),
    envOption(
      "--auth <on|off>",
      "require API keys; off is for local development and only on a loopback host",
      "DECISIOND_AUTH",
      onOff,
    ).default("on"),
    envOption(
      "--admission-wait <ms>",
      "how long a request may wait while its account has another in flight, then 429",
      "DECISIOND_ADMISSION_WAIT",
      milliseconds,
    ).default(0),
    envOption(
      "--queue <n>",
      "requests admitted at once (running or waiting for the model); one more gets 503 with Retry-After (default 16)",
      "DECISIOND_QUEUE",
      positiveInt,
    ),
    envOption(
      "--deadline <ms>",
      "longest a request may wait and run, then 503 and its work is cancelled; 0 for none (default 300000)",
      "DECISIOND_DEADLINE",
      milliseconds,
    ),
    envOption(
      "--request-timeout <ms>",
      "longest time to receive a request's headers, and then its body, then 408 (default 30000)",
      "DECISIOND_REQUEST_TIMEOUT",
      millisecondsFrom(1, "without one a client could hold a connection open forever"),
    ),
    new Option(
      "--cors-origin <origins>",
      "origins whose pages may call the API from a browser (CORS), e.g. https://app.example.com; comma-separated or repeated, or * for any",
    )
      .env("DECISIOND_CORS_ORIGIN")
      .argParser(corsOrigins)
      .default([]),
    envOption(
      "--console <on|off>",
      "the web console at /console: API keys, usage, playground",
      "DECISIOND_CONSOLE",
      onOff,
    ).default("on"),
    storeOption(),
    envOption(
      "--drain-timeout <ms>",
      "on SIGTERM, how long requests in flight may take to finish before the process exits anyway; decisions still running with its last quarter (at most 1 s) left are answered 503 and recorded",
      "DECISIOND_DRAIN_TIMEOUT",
      millisecondsFrom(
        DRAIN_TIMEOUT_LEAST_MS,
        "what is still in flight at its end is answered 503 and recorded, which takes time",
      ),
    ).default(30_000),
    envOption(
      "--admin-token-file <path>",
      "file holding the console's admin token (or the token itself in DECISIOND_ADMIN_TOKEN); none: admin sign-in is off",
      "DECISIOND_ADMIN_TOKEN_FILE",
    ),
    new Option(
      "--engine <KIND=URL>",
      "a remote engine to read decisions from instead of loading the model: llama-server=URL or vllm=URL; repeat for several (comma-separated in the variable)",
    )
      .env("DECISIOND_ENGINE")
      .argParser(engineList)
      .default([]),
    envOption(
      "--engine-deadline <ms>",
      "with --engine: longest time one HTTP call to an engine may take; past it another engine takes the request, or 503",
      "DECISIOND_ENGINE_DEADLINE",
      millisecondsFrom(1),
    ).default(DEFAULT_ENGINE_DEADLINE_MS),
  ];
}

/**
 * Validates `serve`'s options once and gives them their typed shape.
 * @param flags - what commander parsed from {@link serveOptions}
 * @param env - where `DECISIOND_ADMIN_TOKEN` and the engines' API keys (`VLLM_API_KEY`) are read
 *   (the settings with no flag: secrets)
 * @returns the configuration, which `composeService` (src/service/build.ts) takes whole
 * @throws Error for `--auth off` on a host that is not loopback or with `--cors-origin *`, an
 *   unreadable admin token file or a weak admin token (see {@link readAdminToken})
 * @example const config = toServeConfig(command.opts<ServeFlags>());
 */
export function toServeConfig(
  flags: ServeFlags,
  env: NodeJS.ProcessEnv = process.env,
): ServeConfig {
  checkAuthHost(flags);
  return {
    service: {
      host: flags.host,
      port: flags.port,
      bodyLimit: flags.bodyLimit,
      requestTimeoutMs: flags.requestTimeout,
      corsOrigins: flags.corsOrigin,
      queueCapacity: flags.queue,
      deadlineMs: flags.deadline,
      logger: { level: flags.logLevel },
      contextSize: flags.contextSize,
      maxRequestTokens: flags.maxRequestTokens,
      threads: flags.threads,
      parallelBranches: flags.parallel,
      prefixCacheBytes: flags.prefixCache,
      imageSize: flags.imageSize,
      videoFrames: flags.videoFrames,
      videoMaxSeconds: flags.videoMaxSeconds,
      debias: flags.debias,
      readout: readoutOf(flags),
    },
    model: flags.model,
    mmproj: flags.mmproj,
    adapter: flags.adapter,
    auth: flags.auth,
    admissionWaitMs: flags.admissionWait,
    store: flags.store,
    console: flags.console,
    adminToken: flags.console === "on" ? readAdminToken(flags, env) : undefined,
    drainTimeoutMs: flags.drainTimeout,
    engines: flags.engine.map((spec) => withApiKey(spec, env)),
    engineDeadlineMs: flags.engineDeadline,
  };
}

/**
 * `spec` with the API key of its kind from `env` (the variable its kind names, e.g.
 * `VLLM_API_KEY`), when one is set and not empty.
 */
function withApiKey(spec: EngineSpec, env: NodeJS.ProcessEnv): EngineSpec {
  const kind: RemoteEngineKind = REMOTE_ENGINE_KINDS[spec.kind];
  const apiKey = kind.apiKeyVariable === undefined ? undefined : env[kind.apiKeyVariable];
  return apiKey ? { ...spec, apiKey } : spec;
}

/**
 * Whether `host` binds to loopback only: `localhost`, 127.0.0.0/8 or ::1 (also as
 * `::ffff:127.x.y.z` or in brackets); not other `*.localhost` names (see {@link isLoopbackName}).
 * @example isLoopbackHost("::1") // → true
 */
export function isLoopbackHost(host: string): boolean {
  return isLoopbackName(host);
}

/**
 * @throws `InvalidArgumentError` (a usage error: exit 2) for `--auth off` on a host that is not
 *   loopback, or with `--cors-origin *`
 */
export function checkAuthHost(flags: Pick<ServeFlags, "auth" | "host" | "corsOrigin">): void {
  if (flags.auth === "off" && !isLoopbackHost(flags.host))
    throw new InvalidArgumentError(
      `--auth off is only allowed on a loopback address (127.0.0.1, ::1, localhost), not --host ${flags.host}: ` +
        "anyone who can reach the port could use the service without a key",
    );
  // Without keys, the Host check is what keeps other sites' pages from using a loopback server.
  if (flags.auth === "off" && flags.corsOrigin.includes("*"))
    throw new InvalidArgumentError(
      "--cors-origin * is not allowed with --auth off: any web page the browser opens could use " +
        "the service without a key; name the origins that may (e.g. http://localhost:5173)",
    );
}
