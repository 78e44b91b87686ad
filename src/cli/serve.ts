import { InvalidArgumentError, type Command } from "commander";
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Admission } from "../accounts/admission.js";
import { ensureFirstKey } from "../accounts/keyfile.js";
import { describeStore, openStore, parseStoreUrl } from "../accounts/open.js";
import type { AccountStore } from "../accounts/store.js";
import type { Gate } from "../api/app.js";
import { accountGate } from "../api/gate.js";
import { isLoopbackName } from "../api/host.js";
import { checkAdminToken, type ConsoleOptions } from "../console/plugin.js";
import type { DebiasMode } from "../decision/decide.js";
import { resolveAdapter } from "../models/adapters.js";
import { CATALOGUE, DEFAULT_MODEL, findModel, type CatalogueEntry } from "../models/catalogue.js";
import {
  openRemoteEngines,
  parseEngineList,
  parseEngineSpec,
  type EngineSpec,
} from "../engine/remote/index.js";
import { ensureEntry, ensureModel } from "../models/pull.js";
import {
  startPassThroughService,
  startService,
  type Service,
  type ServiceOptions,
} from "../server.js";
import { storeOption } from "./keys.js";
import { byteSize, oneOf, port, positiveInt, readoutOf, type ReadoutFlags } from "./options.js";

/** Options of `decisiond serve` after parsing (flags win over environment variables). */
interface ServeFlags extends ReadoutFlags {
  host: string;
  port: number;
  model: string;
  mmproj?: string;
  adapter?: string;
  imageSize?: number;
  videoFrames?: number;
  videoMaxSeconds?: number;
  contextSize?: number;
  threads?: number;
  parallel?: number;
  bodyLimit?: number;
  prefixCache?: number;
  debias: DebiasMode;
  logLevel: string;
  auth: "on" | "off";
  admissionWait: number;
  queue?: number;
  deadline?: number;
  requestTimeout?: number;
  console: "on" | "off";
  adminTokenFile?: string;
  store?: string;
  drainTimeout: number;
  engine: EngineSpec[];
  engineDeadline: number;
}

/**
 * Whether `host` binds to loopback only: `localhost`, 127.0.0.0/8 or ::1 (also as
 * `::ffff:127.x.y.z` or in brackets); not other `*.localhost` names (see {@link isLoopbackName}).
 */
export function isLoopbackHost(host: string): boolean {
  return isLoopbackName(host);
}

/** @throws {Error} for `--auth off` on a host that is not loopback. */
export function checkAuthHost(flags: Pick<ServeFlags, "auth" | "host">): void {
  if (flags.auth === "off" && !isLoopbackHost(flags.host))
    throw new Error(
      `--auth off is only allowed on a loopback address (127.0.0.1, ::1, localhost), not --host ${flags.host}: ` +
        "anyone who can reach the port could use the service without a key",
    );
}

/** A whole number of milliseconds ≥ 0. */
function milliseconds(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new InvalidArgumentError(`expected milliseconds ≥ 0, got "${value}"`);
  return n;
}

/**
 * The admission gate of `serve`: with auth on, the accounts store of `--store` (default the SQLite
 * file `$DECISIOND_HOME/decisiond.db`; on first start an account and key are created and the key
 * is written to the key file and printed once); with auth off, none, which is refused unless
 * `host` is loopback.
 * @throws {Error} for `--auth off` on a non-loopback host, a bad `--store`, or a store that
 *   cannot be opened.
 */
export async function openServeGate(
  flags: Pick<ServeFlags, "auth" | "host" | "admissionWait" | "store">,
  print: (line: string) => void,
): Promise<{
  gate: Gate | undefined;
  store: AccountStore | undefined;
  admission: Admission | undefined;
}> {
  checkAuthHost(flags);
  if (flags.auth === "off") {
    print("decisiond: auth is off: requests need no API key (loopback only)");
    return { gate: undefined, store: undefined, admission: undefined };
  }
  const location = parseStoreUrl(flags.store);
  let store: AccountStore;
  try {
    store = await openStore(location);
  } catch (error) {
    throw new Error(
      `cannot open the accounts store ${describeStore(location)}: ${(error as Error).message}`,
    );
  }
  try {
    const first = await ensureFirstKey(store);
    // The key goes to the 0600 file only: a terminal's scrollback or a log collector keeps what
    // is printed.
    if (first)
      print(
        `decisiond: first start: created account "${first.account}" and its API key, written to ${first.keyFile} (mode 0600); ` +
          `decisiond's clients read it from there; manage keys with \`decisiond keys\``,
      );
    const admission = new Admission(store, {
      waitMs: flags.admissionWait,
      onError: (error) =>
        print(`decisiond: could not record a call in the usage ledger: ${String(error)}`),
    });
    return { gate: accountGate(admission, store), store, admission };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * The console's admin token: the content of `--admin-token-file` (one trailing newline dropped),
 * else `DECISIOND_ADMIN_TOKEN`; `undefined` when neither is given (admin sign-in off).
 * @throws {Error} for an unreadable file or a weak token (see {@link checkAdminToken}).
 */
export function readAdminToken(
  flags: Pick<ServeFlags, "adminTokenFile">,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  let token: string | undefined;
  if (flags.adminTokenFile !== undefined) {
    try {
      token = readFileSync(flags.adminTokenFile, "utf8").replace(/\r?\n$/, "");
    } catch (error) {
      throw new Error(
        `cannot read the admin token file ${flags.adminTokenFile}: ${(error as Error).message}`,
      );
    }
  } else if (env.DECISIOND_ADMIN_TOKEN) token = env.DECISIOND_ADMIN_TOKEN;
  return token === undefined ? undefined : checkAdminToken(token);
}

/**
 * The console of `serve`: none with `--console off`; else the accounts store (none with
 * `--auth off`, where the admin token has nothing to manage and is dropped) and the admin token.
 */
export function serveConsole(
  flags: Pick<ServeFlags, "console">,
  adminToken: string | undefined,
  store: AccountStore | undefined,
  print: (line: string) => void,
): ConsoleOptions | undefined {
  if (flags.console === "off") return undefined;
  if (adminToken !== undefined && !store) {
    print("decisiond: auth is off: the admin token is not used (there are no accounts)");
    return { store, adminToken: undefined };
  }
  return { store, adminToken };
}

/**
 * Adds `serve`: start the HTTP service on a model, pulling the default model first when it is not
 * cached. Every flag has an environment variable (`DECISIOND_*`), listed in `--help`.
 */
export function registerServeCommand(program: Command): void {
  const env = process.env;
  const envEngines: EngineSpec[] = env.DECISIOND_ENGINE
    ? parseEngineList(env.DECISIOND_ENGINE)
    : [];
  program
    .command("serve")
    .description("serve POST /v1/systemone on a local model")
    .option(
      "--host <host>",
      "address to bind (env DECISIOND_HOST)",
      env.DECISIOND_HOST ?? "127.0.0.1",
    )
    .option(
      "--port <port>",
      "port to listen on (env DECISIOND_PORT)",
      port,
      env.DECISIOND_PORT ? port(env.DECISIOND_PORT) : 8080,
    )
    .option(
      "--model <name|path>",
      "catalogue model name, or path to a GGUF file (env DECISIOND_MODEL)",
      env.DECISIOND_MODEL ?? DEFAULT_MODEL,
    )
    .option(
      "--adapter <path|none>",
      "GGUF LoRA adapter applied on the model; none for the base alone (default: the catalogue model's shipped decision-tuned adapter; env DECISIOND_ADAPTER)",
      env.DECISIOND_ADAPTER,
    )
    .option(
      "--mmproj <path>",
      "multimodal projector GGUF for a --model PATH: serve it as a vision model (env DECISIOND_MMPROJ)",
      env.DECISIOND_MMPROJ,
    )
    .option(
      "--image-size <pixels>",
      "vision: side of the square images fed to the projector (env DECISIOND_IMAGE_SIZE; default: the projector's)",
      positiveInt,
      env.DECISIOND_IMAGE_SIZE ? positiveInt(env.DECISIOND_IMAGE_SIZE) : undefined,
    )
    .option(
      "--video-frames <n>",
      "vision: frames sampled from a video, capped by the context (env DECISIOND_VIDEO_FRAMES; default 8)",
      positiveInt,
      env.DECISIOND_VIDEO_FRAMES ? positiveInt(env.DECISIOND_VIDEO_FRAMES) : undefined,
    )
    .option(
      "--video-max-seconds <s>",
      "vision: longest video accepted (env DECISIOND_VIDEO_MAX_SECONDS; default 60)",
      positiveInt,
      env.DECISIOND_VIDEO_MAX_SECONDS ? positiveInt(env.DECISIOND_VIDEO_MAX_SECONDS) : undefined,
    )
    .option(
      "--context-size <tokens>",
      "tokens per request: prefix + longest question (env DECISIOND_CONTEXT_SIZE)",
      positiveInt,
      env.DECISIOND_CONTEXT_SIZE ? positiveInt(env.DECISIOND_CONTEXT_SIZE) : undefined,
    )
    .option(
      "--threads <n>",
      "CPU threads (env DECISIOND_THREADS; default: physical cores)",
      positiveInt,
      env.DECISIOND_THREADS ? positiveInt(env.DECISIOND_THREADS) : undefined,
    )
    .option(
      "--parallel <n>",
      "question branches evaluated side by side (env DECISIOND_PARALLEL; default 1 on CPU, 16 on GPU)",
      positiveInt,
      env.DECISIOND_PARALLEL ? positiveInt(env.DECISIOND_PARALLEL) : undefined,
    )
    .option(
      "--prefix-cache <size>",
      "memory for snapshots of evaluated prefixes (states), e.g. 512MiB; 0 turns it off (env DECISIOND_PREFIX_CACHE; default 512MiB)",
      byteSize,
      env.DECISIOND_PREFIX_CACHE ? byteSize(env.DECISIOND_PREFIX_CACHE) : undefined,
    )
    .option(
      "--body-limit <size>",
      "largest request body, e.g. 16MiB (env DECISIOND_BODY_LIMIT)",
      byteSize,
      env.DECISIOND_BODY_LIMIT ? byteSize(env.DECISIOND_BODY_LIMIT) : undefined,
    )
    .option(
      "--debias <mode>",
      "option-order debiasing: off, reverse or cyclic (env DECISIOND_DEBIAS)",
      oneOf<DebiasMode>("off", "reverse", "cyclic"),
      (env.DECISIOND_DEBIAS as DebiasMode | undefined) ?? "off",
    )
    .option(
      "--labels <style>",
      "choice labels: words (option ids after an Answer: cue) or fixed (letters) (env DECISIOND_LABELS; default words)",
      oneOf<"words" | "fixed">("words", "fixed"),
      env.DECISIOND_LABELS ? oneOf("words", "fixed")(env.DECISIOND_LABELS) : undefined,
    )
    .option(
      "--content-free <on|off>",
      "contextual calibration against content-free states (env DECISIOND_CONTENT_FREE; default on)",
      oneOf<"on" | "off">("on", "off"),
      env.DECISIOND_CONTENT_FREE ? oneOf("on", "off")(env.DECISIOND_CONTENT_FREE) : undefined,
    )
    .option(
      "--examples <on|off>",
      "in-context examples before every request (env DECISIOND_EXAMPLES; default on)",
      oneOf<"on" | "off">("on", "off"),
      env.DECISIOND_EXAMPLES ? oneOf("on", "off")(env.DECISIOND_EXAMPLES) : undefined,
    )
    .option(
      "--question-contrast <on|off>",
      "yes/no answers read against the state alone (env DECISIOND_QUESTION_CONTRAST; default on)",
      oneOf<"on" | "off">("on", "off"),
      env.DECISIOND_QUESTION_CONTRAST
        ? oneOf("on", "off")(env.DECISIOND_QUESTION_CONTRAST)
        : undefined,
    )
    .option(
      "--log-level <level>",
      "pino log level (env DECISIOND_LOG_LEVEL)",
      env.DECISIOND_LOG_LEVEL ?? "info",
    )
    .option(
      "--auth <on|off>",
      "require API keys; off is for local development and only on a loopback host (env DECISIOND_AUTH)",
      oneOf<"on" | "off">("on", "off"),
      (env.DECISIOND_AUTH as "on" | "off" | undefined) ?? "on",
    )
    .option(
      "--admission-wait <ms>",
      "how long a request may wait while its account has another in flight, then 429 (env DECISIOND_ADMISSION_WAIT)",
      milliseconds,
      env.DECISIOND_ADMISSION_WAIT ? milliseconds(env.DECISIOND_ADMISSION_WAIT) : 0,
    )
    .option(
      "--queue <n>",
      "requests admitted at once (running or waiting for the model); one more gets 503 with Retry-After (default 16; env DECISIOND_QUEUE)",
      positiveInt,
      env.DECISIOND_QUEUE ? positiveInt(env.DECISIOND_QUEUE) : undefined,
    )
    .option(
      "--deadline <ms>",
      "longest a request may wait and run, then 503 and its work is cancelled; 0 for none (default 300000; env DECISIOND_DEADLINE)",
      milliseconds,
      env.DECISIOND_DEADLINE ? milliseconds(env.DECISIOND_DEADLINE) : undefined,
    )
    .option(
      "--request-timeout <ms>",
      "longest time to receive a whole request, headers and body, then 408 (default 30000; env DECISIOND_REQUEST_TIMEOUT)",
      milliseconds,
      env.DECISIOND_REQUEST_TIMEOUT ? milliseconds(env.DECISIOND_REQUEST_TIMEOUT) : undefined,
    )
    .option(
      "--console <on|off>",
      "the web console at /console: API keys, usage, playground (env DECISIOND_CONSOLE)",
      oneOf<"on" | "off">("on", "off"),
      (env.DECISIOND_CONSOLE as "on" | "off" | undefined) ?? "on",
    )
    .addOption(storeOption())
    .option(
      "--drain-timeout <ms>",
      "on SIGTERM, how long requests in flight may take to finish before the process exits anyway (env DECISIOND_DRAIN_TIMEOUT)",
      milliseconds,
      env.DECISIOND_DRAIN_TIMEOUT ? milliseconds(env.DECISIOND_DRAIN_TIMEOUT) : 30_000,
    )
    .option(
      "--admin-token-file <path>",
      "file holding the console's admin token (env DECISIOND_ADMIN_TOKEN_FILE, or the token itself in DECISIOND_ADMIN_TOKEN); none: admin sign-in is off",
      env.DECISIOND_ADMIN_TOKEN_FILE,
    )
    .option(
      "--engine <KIND=URL>",
      "a remote engine to read decisions from instead of loading the model: llama-server=URL or vllm=URL; repeat for several (env DECISIOND_ENGINE, comma-separated)",
      (value: string, previous: EngineSpec[] | undefined) => {
        try {
          // A flag replaces the environment's list; repeated flags add up.
          return [...(previous === envEngines ? [] : (previous ?? [])), parseEngineSpec(value)];
        } catch (error) {
          throw new InvalidArgumentError((error as Error).message);
        }
      },
      envEngines,
    )
    .option(
      "--engine-deadline <ms>",
      "with --engine: longest time one engine call may take, retries on other engines included, before 503 (env DECISIOND_ENGINE_DEADLINE)",
      milliseconds,
      env.DECISIOND_ENGINE_DEADLINE ? milliseconds(env.DECISIOND_ENGINE_DEADLINE) : 30_000,
    )
    .action(async (flags: ServeFlags) => {
      const print = (line: string) => process.stderr.write(line + "\n");
      checkAuthHost(flags); // before any download
      const adminToken = flags.console === "on" ? readAdminToken(flags) : undefined;
      if (flags.engine.length > 0) {
        await serveRemote(flags, adminToken, print);
        return;
      }
      const local = existsSync(flags.model) || flags.model.endsWith(".gguf");
      const entry = local ? undefined : findModel(flags.model);
      if (!local && !entry) {
        throw new Error(
          `unknown model "${flags.model}": give a catalogue name (decisiond pull --help) or a path to a .gguf file`,
        );
      }
      const modelPath = local
        ? resolve(flags.model)
        : await ensureModel(flags.model, { progress: true });
      if (local && !existsSync(modelPath)) throw new Error(`no such model file: ${modelPath}`);
      const mmprojPath = flags.mmproj
        ? resolve(flags.mmproj)
        : entry?.mmproj
          ? await ensureEntry(entry.mmproj, { progress: true })
          : undefined;
      if (mmprojPath && !existsSync(mmprojPath))
        throw new Error(`no such projector file: ${mmprojPath}`);
      const adapterPath = resolveAdapter(flags.adapter, entry);
      const { gate, store, admission } = await openServeGate(flags, print);
      const consoleOptions = serveConsole(flags, adminToken, store, print);
      const service = await startService({
        modelPath,
        ...(mmprojPath ? { mmprojPath } : {}),
        ...(adapterPath ? { adapterPath } : {}),
        ...(flags.imageSize ? { imageSize: flags.imageSize } : {}),
        ...(flags.videoFrames ? { videoFrames: flags.videoFrames } : {}),
        ...(flags.videoMaxSeconds ? { videoMaxSeconds: flags.videoMaxSeconds } : {}),
        ...(entry
          ? { modelId: entry.name, description: entry.description, releaseDate: entry.releaseDate }
          : {}),
        isDefault: entry?.name === DEFAULT_MODEL,
        host: flags.host,
        port: flags.port,
        ...(flags.contextSize ? { contextSize: flags.contextSize } : {}),
        ...(flags.threads ? { threads: flags.threads } : {}),
        ...(flags.parallel ? { parallelBranches: flags.parallel } : {}),
        ...(flags.bodyLimit ? { bodyLimit: flags.bodyLimit } : {}),
        ...operationsOptions(flags, store, admission),
        ...(flags.prefixCache !== undefined ? { prefixCacheBytes: flags.prefixCache } : {}),
        debias: flags.debias,
        readout: readoutOf(flags),
        logger: { level: flags.logLevel },
        ...(gate ? { gate } : {}),
        ...(consoleOptions ? { console: consoleOptions } : {}),
      }).catch(async (error: unknown) => {
        await store?.close();
        throw error;
      });
      const vision = service.engine.model.vision
        ? `; images and MP4 videos, ${service.engine.model.imageSize} px, ${service.engine.model.imageTokens} positions per image`
        : "";
      const adapter = service.engine.model.adapter
        ? ` with adapter ${service.engine.model.adapter}`
        : "";
      process.stderr.write(
        `decisiond: serving ${service.engine.model.id}${adapter} at ${service.url}/v1/systemone (context ${service.engine.model.contextSize} tokens${vision})\n`,
      );
      if (consoleOptions)
        process.stderr.write(
          `decisiond: console at ${service.url}/console/ (sign in with an API key${consoleOptions.adminToken ? " or the admin token" : ""})\n`,
        );
      if (store) process.stderr.write(`decisiond: accounts store ${store.kind}\n`);
      drainOnSignals(service, store, flags.drainTimeout);
    });
}

/**
 * `serve --engine`: decisions read from remote engines (engine/remote/). No model is loaded or
 * pulled; the served name and calibration profile are the catalogue entry's whose file the
 * engine serves (else the engine's model name); `--adapter PATH` says the engine applies that
 * adapter (llama-server `--lora PATH`), which selects the decision-tuned readout and its profile.
 */
async function serveRemote(
  flags: ServeFlags,
  adminToken: string | undefined,
  print: (line: string) => void,
): Promise<void> {
  const remote = await openRemoteEngines(flags.engine, { deadlineMs: flags.engineDeadline });
  const { gate, store, admission } = await openServeGate(flags, print);
  const consoleOptions = serveConsole(flags, adminToken, store, print);
  const common = {
    host: flags.host,
    port: flags.port,
    ...(flags.bodyLimit ? { bodyLimit: flags.bodyLimit } : {}),
    ...operationsOptions(flags, store, admission),
    logger: { level: flags.logLevel },
    ...(gate ? { gate } : {}),
    ...(consoleOptions ? { console: consoleOptions } : {}),
  };
  const urls = flags.engine.map((e) => `${e.kind}=${e.url}`).join(", ");
  let service: Pick<Service, "url" | "drain" | "close">;
  try {
    if (remote.kind === "pass-through") {
      service = await startPassThroughService({
        ...common,
        passThrough: remote.passThrough,
        modelId: flags.model,
        isDefault: flags.model === DEFAULT_MODEL,
      });
      print(
        `decisiond: serving ${urls} (native /v1/systemone, passed through) at ${service.url}/v1/systemone`,
      );
    } else {
      const entry = catalogueEntryOfFile(remote.engine.model.path);
      const adapterPath =
        flags.adapter && flags.adapter !== "none"
          ? resolveAdapter(flags.adapter, entry)
          : undefined;
      const started = await startService({
        ...common,
        engine: remote.engine,
        ...(entry
          ? { modelId: entry.name, description: entry.description, releaseDate: entry.releaseDate }
          : {}),
        isDefault: entry?.name === DEFAULT_MODEL,
        ...(adapterPath ? { adapterPath } : {}),
        debias: flags.debias,
        readout: readoutOf(flags),
      });
      service = started;
      print(
        `decisiond: serving ${started.engine.model.id} from ${urls} at ${started.url}/v1/systemone (context ${started.engine.model.contextSize} tokens)`,
      );
    }
  } catch (error) {
    await store?.close();
    throw error;
  }
  if (store) print(`decisiond: accounts store ${store.kind}`);
  drainOnSignals(service, store, flags.drainTimeout);
}

/** The service options of operations: the work queue, deadlines, readiness and queue depth. */
function operationsOptions(
  flags: ServeFlags,
  store: AccountStore | undefined,
  admission: Admission | undefined,
): Pick<
  ServiceOptions,
  "queueCapacity" | "deadlineMs" | "requestTimeoutMs" | "readiness" | "queueDepth"
> {
  return {
    ...(flags.queue ? { queueCapacity: flags.queue } : {}),
    ...(flags.deadline !== undefined ? { deadlineMs: flags.deadline } : {}),
    ...(flags.requestTimeout ? { requestTimeoutMs: flags.requestTimeout } : {}),
    ...(store ? { readiness: { store: () => store.ping() } } : {}),
    ...(admission ? { queueDepth: () => admission.waiting } : {}),
  };
}

/**
 * Graceful drain on SIGTERM and SIGINT: stop admitting (503, `/readyz` 503), answer what is in
 * flight (up to `drainTimeoutMs`), close the service and the store, then exit 0 (1 when closing
 * fails).
 */
function drainOnSignals(
  service: Pick<Service, "drain" | "close">,
  store: AccountStore | undefined,
  drainTimeoutMs: number,
): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`decisiond: ${signal}: draining (up to ${drainTimeoutMs} ms)\n`);
    void service
      .drain(drainTimeoutMs)
      .then(async (drained) => {
        if (!drained)
          process.stderr.write("decisiond: drain timed out; closing with requests in flight\n");
        await service.close();
        await store?.close();
        process.stderr.write("decisiond: stopped\n");
        process.exit(0);
      })
      .catch((error: unknown) => {
        process.stderr.write(`decisiond: error while stopping: ${String(error)}\n`);
        process.exit(1);
      });
  };
  process.once("SIGINT", () => stop("SIGINT"));
  process.once("SIGTERM", () => stop("SIGTERM"));
}

/** The catalogue entry whose file an engine serves (by file name), if any. */
function catalogueEntryOfFile(path: string): CatalogueEntry | undefined {
  const file = path.split(/[\\/]/).pop();
  return CATALOGUE.find((entry) => entry.file === file);
}
