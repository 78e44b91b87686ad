import {
  ClientErrorTypes,
  Errors,
  httpStatusErrorType,
  type ValidationDetail,
} from "../protocol/errors.js";
import { SYSTEMONE_PATH } from "../protocol/routes.js";
import type { ModelEntry, SystemOneRequest, SystemOneResponse } from "../protocol/schemas.js";
import type { DecideInput, DecideResponseOf } from "./answers.js";
import { resolveClientConfig, type ResolveOptions } from "./config.js";
import { DecisiondError } from "./errors.js";

export type { Answer, ModelEntry, Question } from "../protocol/schemas.js";

/** The body of `POST /v1/systemone`: model, state, 1–16 questions, optionally one image or video. */
export type DecideRequest = SystemOneRequest;
/** The answer to {@link DecideRequest}: `{model, answers, usage}`. */
export type DecideResponse = SystemOneResponse;

/** Options of {@link DecisiondClient}. */
export interface DecisiondClientOptions {
  /** Base URL of the service, e.g. `http://127.0.0.1:8080` (a trailing slash is ignored). */
  baseUrl: string;
  /** API key sent as `Authorization: Bearer <key>`; none sends no header. */
  apiKey?: string | undefined;
  /** The `fetch` to use; default the global one. */
  fetch?: typeof fetch;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the HTTP request (the server then stops working on it). */
  signal?: AbortSignal | undefined;
}

/**
 * A typed client of the decisiond HTTP API. One method call is one HTTP request: the client never
 * retries and never shortens the state or anything else it is given. Every failure is thrown as a
 * {@link DecisiondError}.
 *
 * @example
 * ```ts
 * const client = DecisiondClient.fromEnv();
 * const { answers } = await client.decide({
 *   model: "decisiond-1.0-experimental",
 *   state: { message: "I was charged twice" },
 *   questions: {
 *     refund: { type: "noul", instructions: "Is this a refund request?" },
 *     team: { type: "choice", criteria: { billing: "payments", technical: null } },
 *   },
 * });
 * answers.refund.noul; // number
 * answers.team.choice; // "billing" | "technical", checked by the compiler
 * ```
 */
export class DecisiondClient {
  /** Base URL without a trailing slash. */
  readonly baseUrl: string;
  readonly #apiKey: string | undefined;
  readonly #fetch: typeof fetch;

  constructor(options: DecisiondClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#apiKey = options.apiKey || undefined;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /**
   * A client configured from the environment: `SERVICE_BASE_URL`, `SERVICE_API_KEY` or the key
   * file (see {@link resolveClientConfig}).
   * @throws {@link ClientConfigError} when the key file is refused (mode wider than 0600, unreadable,
   *   empty) or `SERVICE_BASE_URL` is not an http(s) URL.
   */
  static fromEnv(options: ResolveOptions & { fetch?: typeof fetch } = {}): DecisiondClient {
    const config = resolveClientConfig(options);
    return new DecisiondClient({
      baseUrl: config.baseUrl,
      apiKey: config.apiKey,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  }

  /** Whether requests carry an `Authorization` header. */
  get hasApiKey(): boolean {
    return this.#apiKey !== undefined;
  }

  /**
   * `POST /v1/systemone`: answers every question of the request about its state.
   * @param request - the body; written in place (or `as const`), its question map types the
   *   answers ({@link DecideResponseOf})
   * @returns the response body as sent: `{model, answers: {<question id>: answer}, usage}`, each
   *   answer typed by its question: a choice's `choice` is one of its option ids.
   * @throws {@link DecisiondError} on an error response (status, `error_type`, message, request id; a
   *   422 carries `details`), or with status 0 when no response arrived (refused, reset, aborted).
   */
  async decide<const R extends DecideInput>(
    request: R,
    options: CallOptions = {},
  ): Promise<DecideResponseOf<R>> {
    const { body, status, requestId } = await this.#call("POST", SYSTEMONE_PATH, request, options);
    if (!isObject(body) || !isObject(body.answers) || typeof body.model !== "string")
      throw invalidResponse("the response has no model and answers", body, status, requestId);
    return body as unknown as DecideResponseOf<R>;
  }

  /**
   * `GET /v1/models`: the models the service answers with.
   * @throws {@link DecisiondError} as {@link decide} does.
   */
  async models(options: CallOptions = {}): Promise<ModelEntry[]> {
    const { body, status, requestId } = await this.#call("GET", "/v1/models", undefined, options);
    if (!isObject(body) || !Array.isArray(body.models))
      throw invalidResponse("the response has no models list", body, status, requestId);
    return body.models as ModelEntry[];
  }

  /** One HTTP request; the parsed JSON body of a 2xx. @throws {@link DecisiondError} otherwise. */
  async #call(
    method: "GET" | "POST",
    path: string,
    body: unknown,
    options: CallOptions,
  ): Promise<{ body: unknown; status: number; requestId: string | undefined }> {
    const url = this.baseUrl + path;
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.#apiKey !== undefined) headers.authorization = `Bearer ${this.#apiKey}`;
    let response: Response;
    let text: string;
    try {
      response = await this.#fetch(url, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
      text = await response.text();
    } catch (error) {
      throw networkError(error, url, options.signal);
    }
    const requestId = response.headers.get("x-request-id") ?? undefined;
    let parsed: unknown;
    let isJson = true;
    try {
      parsed = text === "" ? undefined : JSON.parse(text);
    } catch {
      isJson = false;
    }
    if (response.ok) {
      if (!isJson)
        throw new DecisiondError({
          status: response.status,
          errorType: ClientErrorTypes.invalidResponse,
          message: `the response to ${method} ${url} is not JSON: ${text}`,
          requestId,
        });
      return { body: parsed, status: response.status, requestId };
    }
    throw errorFromResponse(response, isJson ? parsed : undefined, text, requestId);
  }
}

/** A {@link DecisiondError} from an error response, whatever its body. */
function errorFromResponse(
  response: Response,
  body: unknown,
  text: string,
  requestId: string | undefined,
): DecisiondError {
  const status = response.status;
  const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
  const detail = isObject(body) ? body.detail : undefined;
  if (Array.isArray(detail)) {
    const details = detail.filter(isObject).map((d): ValidationDetail => ({
      loc: Array.isArray(d.loc)
        ? d.loc.filter((p) => typeof p === "string" || typeof p === "number")
        : [],
      msg: typeof d.msg === "string" ? d.msg : JSON.stringify(d.msg),
      type: typeof d.type === "string" ? d.type : "value_error",
    }));
    return new DecisiondError({
      status,
      errorType: Errors.validation.type,
      message:
        details.map((d) => `${d.loc.join(".")}: ${d.msg}`).join("; ") || "the request is not valid",
      details,
      requestId,
      retryAfter,
    });
  }
  if (isObject(detail) && typeof detail.message === "string") {
    return new DecisiondError({
      status,
      errorType:
        typeof detail.error_type === "string" ? detail.error_type : httpStatusErrorType(status),
      message: detail.message,
      requestId:
        requestId ?? (typeof detail.request_id === "string" ? detail.request_id : undefined),
      retryAfter,
    });
  }
  const reason = response.statusText ? ` ${response.statusText}` : "";
  return new DecisiondError({
    status,
    errorType: httpStatusErrorType(status),
    message: `HTTP ${status}${reason}${text ? `: ${text}` : ""}`,
    requestId,
    retryAfter,
  });
}

/** A {@link DecisiondError} with status 0 for a request that got no response. */
function networkError(
  error: unknown,
  url: string,
  signal: AbortSignal | undefined,
): DecisiondError {
  if (signal?.aborted)
    return new DecisiondError({
      status: 0,
      errorType: ClientErrorTypes.aborted,
      message: `the request to ${url} was aborted`,
      cause: signal.reason ?? error,
    });
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const reason =
    cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
  return new DecisiondError({
    status: 0,
    errorType: ClientErrorTypes.connection,
    message: `no response from ${url} (${reason}); is decisiond running there? (SERVICE_BASE_URL sets the address)`,
    cause: error,
  });
}

function invalidResponse(
  what: string,
  body: unknown,
  status: number,
  requestId: string | undefined,
): DecisiondError {
  return new DecisiondError({
    status,
    errorType: ClientErrorTypes.invalidResponse,
    message: `${what}: ${JSON.stringify(body)}`,
    requestId,
  });
}

/** Seconds from `Retry-After` (delta-seconds or an HTTP date); `undefined` if absent or unreadable. */
function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
