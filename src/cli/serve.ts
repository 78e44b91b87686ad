import type { Command } from "commander";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { Admission } from "../accounts/admission.js";
import { ensureFirstKey } from "../accounts/keyfile.js";
import { describeStore, openStore, parseStoreUrl } from "../accounts/open.js";
import type { AccountStore } from "../accounts/store.js";
import type { Gate } from "../api/app.js";
import { accountGate } from "../api/gate.js";
import type { ConsoleOptions } from "../console/plugin.js";
import { openRemoteEngines } from "../decision/backends/remote.js";
import { resolveAdapter } from "../models/adapters.js";
import { CATALOGUE, DEFAULT_MODEL, findModel, type CatalogueEntry } from "../models/catalogue.js";
import { ensureEntry, ensureModel } from "../models/pull.js";
import {
  startPassThroughService,
  startService,
  type Service,
  type ServiceOptions,
} from "../server.js";
import { serveOptions, toServeConfig, type ServeConfig, type ServeFlags } from "./serve-config.js";

/**
 * `decisiond serve`: the HTTP service on a model loaded in-process, or in front of remote engines
 * (`--engine`). The flags become one {@link ServeConfig} (serve-config.ts); this file opens what
 * it names (model files, accounts store, engines) and starts the service with it.
 */

/** A line on stderr, where `serve` reports. */
type Print = (line: string) => void;

/** The accounts side of a service: none of it with `--auth off`. */
export interface ServeAccounts {
  readonly gate: Gate | undefined;
  readonly store: AccountStore | undefined;
  readonly admission: Admission | undefined;
}

/**
 * The admission gate of `serve`: with auth on, the accounts store of `--store` (default the SQLite
 * file `$DECISIOND_HOME/decisiond.db`; on first start an account and key are created and the key
 * is written to the key file, never printed); with auth off, none.
 * @throws Error for a bad `--store`, or a store that cannot be opened.
 * @example `const accounts = await openServeGate(config, print);`
 */
export async function openServeGate(
  config: Pick<ServeConfig, "auth" | "admissionWaitMs" | "store">,
  print: Print,
): Promise<ServeAccounts> {
  if (config.auth === "off") {
    print("decisiond: auth is off: requests need no API key (loopback only)");
    return { gate: undefined, store: undefined, admission: undefined };
  }
  const location = parseStoreUrl(config.store);
  let store: AccountStore;
  try {
    store = await openStore(location, { serving: true });
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
      waitMs: config.admissionWaitMs,
      onError: (error) =>
        print(`decisiond: could not record a call in the usage ledger: ${String(error)}`),
    });
    return { gate: accountGate(admission), store, admission };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * The console of `serve`: none with `--console off`; else the accounts store (none with
 * `--auth off`, where the admin token has nothing to manage and is dropped) and the admin token.
 */
export function serveConsole(
  config: Pick<ServeConfig, "console">,
  adminToken: string | undefined,
  store: AccountStore | undefined,
  print: Print,
): ConsoleOptions | undefined {
  if (config.console === "off") return undefined;
  if (adminToken !== undefined && !store) {
    print("decisiond: auth is off: the admin token is not used (there are no accounts)");
    return { store, adminToken: undefined };
  }
  return { store, adminToken };
}

/**
 * Adds `serve`: start the HTTP service on a model, pulling the default model first when it is not
 * cached. Every flag has an environment variable (`DECISIOND_*`), listed in `--help`.
 * @example `registerServeCommand(program); await program.parseAsync(["node", "decisiond", "serve"]);`
 */
export function registerServeCommand(program: Command): void {
  const serve = program.command("serve").description("serve POST /v1/systemone on a local model");
  for (const option of serveOptions()) serve.addOption(option);
  serve.action(async (flags: ServeFlags) => {
    const print: Print = (line) => process.stderr.write(line + "\n");
    const config = toServeConfig(flags); // before any download
    await (config.engines.length > 0 ? serveRemote(config, print) : serveLocal(config, print));
  });
}

/** The files `serve` loads: the model's, its projector's and its adapter's, and its entry. */
interface ModelFiles {
  readonly modelPath: string;
  readonly mmprojPath: string | undefined;
  readonly adapterPath: string | undefined;
  /** The catalogue entry; `undefined` for a `--model PATH`. */
  readonly entry: CatalogueEntry | undefined;
}

/**
 * The files of `--model`, `--mmproj` and `--adapter`, pulling a catalogue model (and its
 * projector) when it is not cached.
 * @throws Error for an unknown model name, or a model or projector file that does not exist.
 */
async function modelFiles(config: ServeConfig): Promise<ModelFiles> {
  const local = existsSync(config.model) || config.model.endsWith(".gguf");
  const entry = local ? undefined : findModel(config.model);
  if (!local && !entry) {
    throw new Error(
      `unknown model "${config.model}": give a catalogue name (decisiond pull --help) or a path to a .gguf file`,
    );
  }
  const modelPath = local
    ? resolve(config.model)
    : await ensureModel(config.model, { progress: true });
  if (local && !existsSync(modelPath)) throw new Error(`no such model file: ${modelPath}`);
  const mmprojPath = config.mmproj
    ? resolve(config.mmproj)
    : entry?.mmproj
      ? await ensureEntry(entry.mmproj, { progress: true })
      : undefined;
  if (mmprojPath && !existsSync(mmprojPath))
    throw new Error(`no such projector file: ${mmprojPath}`);
  return { modelPath, mmprojPath, adapterPath: resolveAdapter(config.adapter, entry), entry };
}

/** `serve` without `--engine`: the model loaded in-process. */
async function serveLocal(config: ServeConfig, print: Print): Promise<void> {
  const { modelPath, mmprojPath, adapterPath, entry } = await modelFiles(config);
  const accounts = await openServeGate(config, print);
  const parts = serviceParts(config, accounts, print);
  const service = await startService({
    ...config.service,
    ...parts,
    ...servedEntry(entry),
    modelPath,
    mmprojPath,
    adapterPath,
  }).catch(async (error: unknown) => {
    await accounts.store?.close();
    throw error;
  });
  const model = service.engine.model;
  const vision = model.vision
    ? `; images and MP4 videos, ${model.imageSize} px, ${model.imageTokens} positions per image`
    : "";
  const adapter = model.adapter ? ` with adapter ${model.adapter}` : "";
  print(
    `decisiond: serving ${model.id}${adapter} at ${service.url}/v1/systemone (context ${model.contextSize} tokens${vision})`,
  );
  if (parts.console)
    print(
      `decisiond: console at ${service.url}/console/ (sign in with an API key${parts.console.adminToken ? " or the admin token" : ""})`,
    );
  if (accounts.store) print(`decisiond: accounts store ${accounts.store.kind}`);
  drainOnSignals(service, accounts.store, config.drainTimeoutMs);
}

/**
 * `serve --engine`: decisions read from remote engines (engine/remote/). No model is loaded or
 * pulled; the served name and calibration profile are the catalogue entry's whose file the
 * engine serves (else the engine's model name); `--adapter PATH` says the engine applies that
 * adapter (llama-server `--lora PATH`), which selects the decision-tuned readout and its profile.
 */
async function serveRemote(config: ServeConfig, print: Print): Promise<void> {
  const remote = await openRemoteEngines(config.engines, { deadlineMs: config.engineDeadlineMs });
  const accounts = await openServeGate(config, print);
  const parts = serviceParts(config, accounts, print);
  const urls = config.engines.map((e) => `${e.kind}=${e.url}`).join(", ");
  let service: Pick<Service, "url" | "drain" | "close">;
  try {
    if (remote.kind === "pass-through") {
      service = await startPassThroughService({
        ...config.service,
        ...parts,
        passThrough: remote.passThrough,
        modelId: config.model,
        isDefault: config.model === DEFAULT_MODEL,
      });
      print(
        `decisiond: serving ${urls} (native /v1/systemone, passed through) at ${service.url}/v1/systemone`,
      );
    } else {
      const entry = catalogueEntryOfFile(remote.engine.model.path);
      const adapterPath =
        config.adapter && config.adapter !== "none"
          ? resolveAdapter(config.adapter, entry)
          : undefined;
      const started = await startService({
        ...config.service,
        ...parts,
        ...servedEntry(entry),
        engine: remote.engine,
        adapterPath,
      });
      service = started;
      print(
        `decisiond: serving ${started.engine.model.id} from ${urls} at ${started.url}/v1/systemone (context ${started.engine.model.contextSize} tokens)`,
      );
    }
  } catch (error) {
    await accounts.store?.close();
    throw error;
  }
  if (accounts.store) print(`decisiond: accounts store ${accounts.store.kind}`);
  drainOnSignals(service, accounts.store, config.drainTimeoutMs);
}

/**
 * What a service takes from its accounts: the gate, the console, the store's `/readyz` check and
 * the depth of the admission's queue for `/metrics`.
 */
function serviceParts(
  config: ServeConfig,
  accounts: ServeAccounts,
  print: Print,
): Pick<ServiceOptions, "gate" | "console" | "readiness" | "queueDepth"> {
  const { gate, store, admission } = accounts;
  return {
    gate,
    console: serveConsole(config, config.adminToken, store, print),
    readiness: store ? { store: () => store.ping() } : undefined,
    queueDepth: admission ? () => admission.waiting : undefined,
  };
}

/** How a catalogue model is served: its name (the default's also as the public name) and card. */
function servedEntry(
  entry: CatalogueEntry | undefined,
): Pick<ServiceOptions, "modelId" | "description" | "releaseDate" | "isDefault"> {
  return {
    modelId: entry?.name,
    description: entry?.description,
    releaseDate: entry?.releaseDate,
    isDefault: entry?.name === DEFAULT_MODEL,
  };
}

/** What {@link drainOnSignals} does to the process; tests pass their own. */
export interface ProcessControl {
  /** Calls `listener` on the first `signal`. */
  once(signal: "SIGINT" | "SIGTERM", listener: () => void): void;
  /** Ends the process with `code`. */
  exit(code: number): void;
  /** Writes a line where `serve` reports (stderr). */
  log(line: string): void;
}

const PROCESS: ProcessControl = {
  once: (signal, listener) => void process.once(signal, listener),
  exit: (code) => process.exit(code),
  log: (line) => void process.stderr.write(line + "\n"),
};

/**
 * Graceful drain on SIGTERM and SIGINT: stop admitting (503, `/readyz` 503), answer what is in
 * flight, close the service and the store, then exit 0 (1 when closing fails). `drainTimeoutMs`
 * is a bound, not a wish: when it elapses the process exits 1 whatever is still running, its
 * requests in flight cut (a Kubernetes grace period ends the same way, less politely).
 * Why: docs/decisions/086-store-faults-and-one-sqlite-server.md
 */
export function drainOnSignals(
  service: Pick<Service, "drain" | "close">,
  store: AccountStore | undefined,
  drainTimeoutMs: number,
  control: ProcessControl = PROCESS,
): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    control.log(`decisiond: ${signal}: draining (up to ${drainTimeoutMs} ms)`);
    const deadline = setTimeout(() => {
      control.log(
        `decisiond: drain timed out after ${drainTimeoutMs} ms; exiting with the requests in flight cut`,
      );
      control.exit(1);
    }, drainTimeoutMs);
    void service
      .drain(drainTimeoutMs)
      .then(async (drained) => {
        if (!drained) return; // the deadline ends the process
        await service.close();
        await store?.close();
        clearTimeout(deadline);
        control.log("decisiond: stopped");
        control.exit(0);
      })
      .catch((error: unknown) => {
        clearTimeout(deadline);
        control.log(`decisiond: error while stopping: ${String(error)}`);
        control.exit(1);
      });
  };
  control.once("SIGINT", () => stop("SIGINT"));
  control.once("SIGTERM", () => stop("SIGTERM"));
}

/** The catalogue entry whose file an engine serves (by file name), if any. */
function catalogueEntryOfFile(path: string): CatalogueEntry | undefined {
  const file = path.split(/[\\/]/).pop();
  return CATALOGUE.find((entry) => entry.file === file);
}
