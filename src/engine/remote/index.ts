import type { Engine } from "../types.js";
import { baseUrl, DEFAULT_ENGINE_DEADLINE_MS } from "./http.js";
import { LlamaServerEngine } from "./llama-server.js";
import { EnginePool, type PoolOptions } from "./pool.js";
import { VllmEngine } from "./vllm.js";

/**
 * Engines across the network: the kinds `serve --engine KIND=URL` takes
 * ({@link REMOTE_ENGINE_KINDS}), and a pool of engines of one kind ({@link openEnginePool}).
 * Decision backends built on them (the pass-through to an engine that answers decisions itself)
 * live beside the decision layer, in src/decision/backends/.
 * Why one registry and no decision here: docs/decisions/089
 *
 * @packageDocumentation
 */

export {
  baseUrl,
  callJson,
  DEFAULT_ENGINE_DEADLINE_MS,
  EngineCallError,
  EngineConnection,
  EngineRequestError,
  withDeadline,
} from "./http.js";
export { LlamaServerEngine } from "./llama-server.js";
export { EnginePool } from "./pool.js";
export { VllmEngine } from "./vllm.js";

/** What opening one remote engine takes, whatever its kind. */
export interface RemoteEngineOptions {
  /** Milliseconds one HTTP call to the engine may take. */
  readonly timeoutMs: number;
  /** The engine's API key, for a kind that takes one ({@link RemoteEngineKind.apiKeyVariable}). */
  readonly apiKey?: string | undefined;
  /**
   * The LoRA adapter decisiond reads the answers for (a file path, or `"none"`), which a kind that
   * says what it loads (llama-server) must have loaded, and every call names; absent: not checked.
   */
  readonly adapter?: string | undefined;
  /** Told what decisiond uses differently from what the engine offers (e.g. fewer slots). */
  readonly onNotice?: ((message: string) => void) | undefined;
  /**
   * The engine opened on the same URL before, which this one replaces (a pool opens an engine
   * again after an outage): a llama-server's slots are taken over, not probed beside its calls.
   */
  readonly replaces?: Engine | undefined;
}

/** One kind of remote engine: how to open one. */
export interface RemoteEngineKind {
  /**
   * The environment variable the configuration reads an API key for engines of this kind from
   * (src/cli/serve-config.ts); absent for a kind that takes none.
   */
  readonly apiKeyVariable?: string;
  /**
   * Connects to the engine at `url` and reads its model.
   * @throws `EngineCallError` when it does not answer.
   */
  open(url: string, options: RemoteEngineOptions, signal?: AbortSignal): Promise<Engine>;
}

/**
 * The kinds of remote engine, by the name `--engine KIND=URL` gives them. A new kind is one
 * entry here (and its engine class).
 */
export const REMOTE_ENGINE_KINDS = {
  "llama-server": {
    open: (url, options, signal) =>
      LlamaServerEngine.open(
        {
          url,
          timeoutMs: options.timeoutMs,
          adapter: options.adapter,
          onNotice: options.onNotice,
          replaces: options.replaces instanceof LlamaServerEngine ? options.replaces : undefined,
        },
        signal,
      ),
  },
  vllm: {
    apiKeyVariable: "VLLM_API_KEY",
    open: (url, options, signal) =>
      VllmEngine.open({ url, timeoutMs: options.timeoutMs, apiKey: options.apiKey }, signal),
  },
} as const satisfies Record<string, RemoteEngineKind>;

/** The name of a kind of remote engine. */
export type EngineKind = keyof typeof REMOTE_ENGINE_KINDS;

/** The kinds of remote engine `--engine KIND=URL` takes, in the order `--help` names them. */
export const ENGINE_KINDS = Object.keys(REMOTE_ENGINE_KINDS) as readonly EngineKind[];

/** One `--engine KIND=URL`, with the API key the configuration found for its kind. */
export interface EngineSpec {
  readonly kind: EngineKind;
  readonly url: string;
  /** The engine's API key (`VLLM_API_KEY` for vLLM); absent when none is set. */
  readonly apiKey?: string;
}

/**
 * Parses `KIND=URL`.
 * @throws `Error` saying what is wrong: no `=`, an unknown kind, a URL that is not http(s) or
 *   that holds credentials, a query or a fragment.
 * @example
 * ```ts
 * parseEngineSpec("llama-server=http://127.0.0.1:8081"); // → { kind: "llama-server", url: "http://127.0.0.1:8081" }
 * ```
 */
export function parseEngineSpec(text: string): EngineSpec {
  const at = text.indexOf("=");
  if (at < 0)
    throw new Error(`expected KIND=URL (KIND one of ${ENGINE_KINDS.join(", ")}), got "${text}"`);
  const kind = text.slice(0, at).trim();
  const url = text.slice(at + 1).trim();
  if (!Object.hasOwn(REMOTE_ENGINE_KINDS, kind))
    throw new Error(`unknown engine kind "${kind}": one of ${ENGINE_KINDS.join(", ")}`);
  let parsed: URL;
  try {
    parsed = new URL(baseUrl(url));
  } catch {
    throw new Error(`engine URL must be an http:// or https:// URL, got "${url}"`);
  }
  // What follows the URL is a path of the engine's API; a secret in it would be shown by /readyz.
  if (parsed.username || parsed.password)
    throw new Error(
      `engine URL ${parsed.host}: remove the user:password@ part, which fetch cannot send ` +
        `(a vLLM key goes in VLLM_API_KEY)`,
    );
  if (parsed.search || parsed.hash)
    throw new Error(`engine URL ${parsed.host}: a query or fragment (?, #) has no place in it`);
  return { kind: kind as EngineKind, url: baseUrl(url) };
}

/** Parses `DECISIOND_ENGINE`: comma-separated `KIND=URL`s (empty entries ignored). */
export function parseEngineList(text: string): EngineSpec[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map(parseEngineSpec);
}

/** Options of {@link openEnginePool}. */
export interface RemoteOptions extends PoolOptions {
  /** Milliseconds one HTTP call to an engine may take. Default: the deadline. */
  readonly callTimeoutMs?: number;
  /** The adapter the engines must have loaded ({@link RemoteEngineOptions.adapter}). */
  readonly adapter?: string | undefined;
  /** {@link RemoteEngineOptions.onNotice}, for every engine: each distinct message once. */
  readonly onNotice?: ((message: string) => void) | undefined;
}

/**
 * Opens the engines of `--engine` as one pool.
 * @throws `Error` for engines of different kinds, or of different models.
 * @throws `EngineUnavailableError` when none answers.
 * @example
 * ```ts
 * const pool = await openEnginePool([{ kind: "llama-server", url: "http://127.0.0.1:8081" }]);
 * ```
 */
export async function openEnginePool(
  specs: readonly EngineSpec[],
  options: RemoteOptions = {},
): Promise<EnginePool> {
  checkEngineSpecs(specs);
  const timeoutMs = options.callTimeoutMs ?? options.deadlineMs ?? DEFAULT_ENGINE_DEADLINE_MS;
  // Engines are opened again after each outage: each notice is said once.
  const said = new Set<string>();
  const onNotice = (message: string) => {
    if (said.has(message)) return;
    said.add(message);
    options.onNotice?.(message);
  };
  return EnginePool.open(
    specs.map((spec) => {
      let opened: Engine | undefined;
      const open = async (signal?: AbortSignal) =>
        (opened = await REMOTE_ENGINE_KINDS[spec.kind].open(
          spec.url,
          { timeoutMs, apiKey: spec.apiKey, adapter: options.adapter, onNotice, replaces: opened },
          signal,
        ));
      return { name: spec.url, open };
    }),
    options,
  );
}

/**
 * Checks the engines of `--engine` (`DECISIOND_ENGINE`) as a whole: some, all of one kind, each
 * once. One engine given twice would be two members of a pool on one server: its calls in flight
 * counted apart, and on a llama-server, calls for one slot sent at once (docs/OPERATIONS.md).
 * Only URLs written alike are caught (after {@link baseUrl}), not two names of one host.
 * @throws `Error` when `specs` is empty, names engines of different kinds, or one URL twice.
 */
export function checkEngineSpecs(specs: readonly EngineSpec[]): void {
  if (specs.length === 0) throw new Error("no engine given");
  const kinds = new Set(specs.map((s) => s.kind));
  if (kinds.size > 1)
    throw new Error(`--engine: all engines must be of one kind, got ${[...kinds].join(" and ")}`);
  const twice = specs.find((s, i) => specs.findIndex((t) => t.url === s.url) !== i);
  if (twice)
    throw new Error(`--engine (DECISIOND_ENGINE) names ${twice.url} twice: give each engine once`);
}
