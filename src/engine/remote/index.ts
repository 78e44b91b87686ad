import { baseUrl } from "./http.js";
import { LlamaServerEngine } from "./llama-server.js";
import { EnginePool, type PoolOptions } from "./pool.js";
import { SystemOnePassThrough } from "./systemone.js";
import { VllmEngine } from "./vllm.js";

export { EngineCallError, EngineRequestError } from "./http.js";
export { LlamaServerEngine } from "./llama-server.js";
export { EnginePool } from "./pool.js";
export { SystemOnePassThrough } from "./systemone.js";
export { VllmEngine } from "./vllm.js";

/** The kinds of remote engine `--engine KIND=URL` takes. */
export const ENGINE_KINDS = ["llama-server", "vllm"] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/** One `--engine KIND=URL`. */
export interface EngineSpec {
  readonly kind: EngineKind;
  readonly url: string;
}

/**
 * Parses `KIND=URL`.
 * @throws `Error` saying what is wrong: no `=`, an unknown kind, a URL that is not http(s).
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
  if (!(ENGINE_KINDS as readonly string[]).includes(kind))
    throw new Error(`unknown engine kind "${kind}": one of ${ENGINE_KINDS.join(", ")}`);
  try {
    return { kind: kind as EngineKind, url: baseUrl(url) };
  } catch {
    throw new Error(`engine URL must be an http:// or https:// URL, got "${url}"`);
  }
}

/** Parses `DECISIOND_ENGINE`: comma-separated `KIND=URL`s (empty entries ignored). */
export function parseEngineList(text: string): EngineSpec[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map(parseEngineSpec);
}

/** Options of {@link openRemoteEngines}. */
export interface RemoteOptions extends PoolOptions {
  /** Milliseconds one HTTP call to an engine may take. Default: the deadline. */
  readonly callTimeoutMs?: number;
}

/** What remote engines serve through: an engine pool (decisiond's readout), or a pass-through. */
export type RemoteServing =
  | { readonly kind: "engine"; readonly engine: EnginePool }
  | { readonly kind: "pass-through"; readonly passThrough: SystemOnePassThrough };

/**
 * Opens the remote engines of `--engine`: a pool of them, or, when they are llama-servers that
 * answer `/v1/systemone` themselves, a pass-through.
 * @throws `Error` for engines of different kinds, or of different models.
 * @throws {@link EngineUnavailableError} when none answers.
 */
export async function openRemoteEngines(
  specs: readonly EngineSpec[],
  options: RemoteOptions = {},
): Promise<RemoteServing> {
  if (specs.length === 0) throw new Error("no engine given");
  const kinds = new Set(specs.map((s) => s.kind));
  if (kinds.size > 1)
    throw new Error(`all engines must be of one kind, got ${[...kinds].join(" and ")}`);
  const timeoutMs = options.callTimeoutMs ?? options.deadlineMs ?? 30_000;
  if (specs[0]!.kind === "llama-server") {
    const native = await Promise.all(
      specs.map((s) => SystemOnePassThrough.detect(s.url).catch(() => false)),
    );
    if (native.some(Boolean)) {
      if (!native.every(Boolean))
        throw new Error(
          "some llama-servers answer /v1/systemone natively and some do not: serve them apart",
        );
      return {
        kind: "pass-through",
        passThrough: new SystemOnePassThrough({
          urls: specs.map((s) => s.url),
          ...(options.deadlineMs ? { deadlineMs: options.deadlineMs } : {}),
        }),
      };
    }
  }
  const engine = await EnginePool.open(
    specs.map((spec) => ({
      name: spec.url,
      open: (signal?: AbortSignal) =>
        spec.kind === "llama-server"
          ? LlamaServerEngine.open({ url: spec.url, timeoutMs }, signal)
          : VllmEngine.open({ url: spec.url, timeoutMs }, signal),
    })),
    options,
  );
  return { kind: "engine", engine };
}
