/**
 * JSON over HTTP to a remote engine, with a per-call deadline and the caller's AbortSignal: the
 * code every remote engine shares ({@link EngineConnection}, {@link callJson},
 * {@link withDeadline}, {@link DEFAULT_ENGINE_DEADLINE_MS}). What goes wrong is sorted into two
 * kinds: the engine could not answer ({@link EngineCallError}: no connection, reset, timeout, 5xx
 * — another engine may serve the call) and the engine refused the call
 * ({@link EngineRequestError}: 4xx — another engine would refuse it too).
 *
 * @packageDocumentation
 */

/**
 * Milliseconds one HTTP call to a remote engine may take when nothing else is said (a
 * pass-through's decision is one such call; opening a pool's engines is bounded by it too).
 * `serve --engine-deadline` defaults to it.
 */
export const DEFAULT_ENGINE_DEADLINE_MS = 30_000;

/**
 * A signal that aborts when the caller's `signal` does or when `ms` milliseconds pass.
 * @returns `signal`, the one to pass on, and `deadline`, whose `aborted` says the time is up
 *   (as opposed to the caller giving up)
 * @example
 * ```ts
 * const { signal, deadline } = withDeadline(5000, callerSignal);
 * ```
 */
export function withDeadline(
  ms: number,
  signal?: AbortSignal,
): { readonly signal: AbortSignal; readonly deadline: AbortSignal } {
  const deadline = AbortSignal.timeout(ms);
  return { signal: signal ? AbortSignal.any([signal, deadline]) : deadline, deadline };
}

/** An engine did not answer: refused or lost connection, timed out, or answered 5xx. */
export class EngineCallError extends Error {
  constructor(
    /** The engine's base URL. */
    readonly url: string,
    message: string,
    /** Whether the deadline of the call passed (as opposed to a refusal or a 5xx). */
    readonly timedOut = false,
  ) {
    super(`engine ${url}: ${message}`);
    this.name = "EngineCallError";
  }
}

/** An engine answered 4xx: the call itself is wrong (e.g. a prompt over its context). */
export class EngineRequestError extends Error {
  constructor(
    readonly url: string,
    readonly status: number,
    readonly body: string,
  ) {
    super(`engine ${url} refused the call (${status}): ${body.slice(0, 300)}`);
    this.name = "EngineRequestError";
  }
}

/** Options of {@link callJson}. */
export interface CallOptions {
  /** The caller's signal; its abort rejects with its reason (an `AbortError`). */
  readonly signal?: AbortSignal | undefined;
  /** Milliseconds before the call counts as unanswered ({@link EngineCallError}, `timedOut`). */
  readonly timeoutMs: number;
  /** Extra request headers (e.g. `authorization` for a vLLM started with `--api-key`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Sends `body` as JSON (`GET` without a body) to `base + path` and parses the JSON answer.
 * @returns the parsed body of a 2xx answer.
 * @throws {@link EngineCallError} no connection, reset, timeout, 5xx, or a body that is not JSON.
 * @throws {@link EngineRequestError} a 4xx answer.
 * @throws the signal's reason when `options.signal` aborts.
 * @example
 * ```ts
 * await callJson("http://127.0.0.1:8081", "/tokenize", { content: "hi" }, { timeoutMs: 5000 });
 * ```
 */
export async function callJson<T>(
  base: string,
  path: string,
  body: unknown,
  options: CallOptions,
): Promise<T> {
  options.signal?.throwIfAborted();
  const { signal, deadline } = withDeadline(options.timeoutMs, options.signal);
  let response: Response;
  let text: string;
  try {
    response = await fetch(base + path, {
      method: body === undefined ? "GET" : "POST",
      headers: {
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...options.headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal,
    });
    text = await response.text();
  } catch (error) {
    if (options.signal?.aborted) throw options.signal.reason;
    if (deadline.aborted)
      throw new EngineCallError(base, `no answer within ${options.timeoutMs} ms`, true);
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new EngineCallError(base, cause?.code ?? cause?.message ?? (error as Error).message);
  }
  if (response.status >= 500)
    throw new EngineCallError(base, `${path} answered ${response.status}: ${text.slice(0, 200)}`);
  if (response.status >= 400) throw new EngineRequestError(base, response.status, text);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new EngineCallError(base, `${path} answered a body that is not JSON`);
  }
}

/** `url` without trailing slashes. @throws `TypeError` when it is not an http(s) URL. */
export function baseUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new TypeError(`engine URL must be http:// or https://, got ${url}`);
  return parsed.toString().replace(/\/+$/, "");
}

/**
 * One remote engine's HTTP API as its calls see it: the base URL, the deadline of each call and
 * the headers every call carries (an `authorization` for a server started with an API key).
 * Calls after {@link EngineConnection.close} are refused.
 */
export class EngineConnection {
  private closed = false;

  constructor(
    /** Base URL, without trailing slashes ({@link baseUrl}). */
    readonly url: string,
    /** Milliseconds one call may take ({@link CallOptions.timeoutMs}). */
    readonly timeoutMs: number,
    private readonly headers: Readonly<Record<string, string>> = {},
  ) {}

  /**
   * {@link callJson} to `url + path`, with this engine's deadline and headers.
   * @throws `Error` once the connection is closed; otherwise as {@link callJson} does.
   */
  call<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    if (this.closed) return Promise.reject(new Error("the engine is closed"));
    return callJson<T>(this.url, path, body, {
      timeoutMs: this.timeoutMs,
      headers: this.headers,
      ...(signal ? { signal } : {}),
    });
  }

  /** Refuses every later call. */
  close(): void {
    this.closed = true;
  }
}
