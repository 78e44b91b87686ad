/**
 * Every error the API answers, declared once (the style of Fastify's `lib/errors.js`): a code
 * (the key), the HTTP status, the wire `error_type` and a message template. Code throws them by
 * code — `throw new ApiError(Errors.concurrencyLimit, [message], headers)` — and one error
 * handler (src/api/error-handler.ts) writes them; no other file spells a status or an
 * `error_type`.
 *
 * Bodies: a 422 is `{"detail": [{loc, msg, type}]}` (FastAPI's shape, {@link ValidationDetail});
 * every other error `{"detail": {"error_type", "message", "request_id"?}}` ({@link ErrorBody}).
 */

/** One entry of the table. */
export interface ErrorSpec {
  /** The HTTP status. */
  readonly status: number;
  /** The wire `error_type`, as clients match it. */
  readonly type: string;
  /** The message; each `%s` takes the next argument, in order. */
  readonly message: string;
}

/** The errors of the API, by code. */
export const Errors = {
  // 400
  /** One of Fastify's own 4xx (a malformed request line, say); answered with the error's status. */
  invalidRequest: { status: 400, type: "invalid_request", message: "%s" },
  invalidBodyEncoding: {
    status: 400,
    type: "invalid_body_encoding",
    message: "the body is not valid %s data: %s",
  },
  // 401
  missingKey: {
    status: 401,
    type: "authentication_error",
    message: "missing API key: send it as Authorization: Bearer <key>",
  },
  malformedAuthorization: {
    status: 401,
    type: "authentication_error",
    message: "the Authorization header must be Bearer <key>",
  },
  /** An unknown or revoked key, in the words of the accounts' admission. */
  keyRefused: { status: 401, type: "authentication_error", message: "%s" },
  consoleSignIn: {
    status: 401,
    type: "authentication_error",
    message: "sign in: send an API key or the admin token as Authorization: Bearer …",
  },
  unknownKey: { status: 401, type: "authentication_error", message: "invalid API key" },
  revokedKey: {
    status: 401,
    type: "authentication_error",
    message: "API key %s… was revoked on %s",
  },
  adminSignInOff: {
    status: 401,
    type: "authentication_error",
    message:
      "that is not an API key, and admin sign-in is off: the server has no admin token (DECISIOND_ADMIN_TOKEN)",
  },
  invalidCredential: {
    status: 401,
    type: "authentication_error",
    message: "invalid API key or admin token",
  },
  // 403
  hostNotAllowed: {
    status: 403,
    type: "host_not_allowed",
    message:
      "Host %s is not a loopback name: with --auth off decisiond answers requests to localhost, 127.0.0.1 or [::1] only (DNS rebinding protection)",
  },
  permissionDenied: {
    status: 403,
    type: "permission_denied",
    message:
      'an API key manages its own account ("%s") only; sign in with the admin token to manage others',
  },
  // 404, 405
  routeNotFound: { status: 404, type: "not_found", message: "no route %s %s" },
  accountNotFound: { status: 404, type: "not_found", message: 'no account "%s"' },
  keyNotFound: { status: 404, type: "not_found", message: "no key with id %s" },
  keyNotFoundInAccount: {
    status: 404,
    type: "not_found",
    message: 'no key with id %s in account "%s"',
  },
  accountsOff: {
    status: 404,
    type: "accounts_off",
    message: "the server runs without accounts (--auth off): there are no keys or usage to manage",
  },
  /** A CONNECT request: decisiond is no proxy. */
  methodNotAllowed: {
    status: 405,
    type: "method_not_allowed",
    message: "%s is not supported: decisiond is an HTTP API, not a proxy",
  },
  // 408
  /** The body did not arrive in full within the request timeout (a slow or stalled upload). */
  requestTimeout: {
    status: 408,
    type: "request_timeout",
    message: "the request was not received in full within %s s: send the body at once",
  },
  // 431
  headersTooLarge: {
    status: 431,
    type: "request_header_too_large",
    message: "the request's headers exceed the server's limit of %s bytes",
  },
  // 413, 415
  requestTooLarge: {
    status: 413,
    type: "request_too_large",
    message: "the request body exceeds the limit of %s bytes (%s MiB)",
  },
  unsupportedMediaType: {
    status: 415,
    type: "unsupported_media_type",
    message: "the body must be JSON sent with Content-Type: application/json",
  },
  unsupportedCharset: {
    status: 415,
    type: "unsupported_media_type",
    message: "the body must be JSON in UTF-8 (RFC 8259), not charset=%s",
  },
  unsupportedContentEncoding: {
    status: 415,
    type: "unsupported_content_encoding",
    message:
      'Content-Encoding "%s" is not supported; send the body uncompressed or as one of gzip, deflate, br, zstd',
  },
  // 422
  /** A body that does not validate; its body is the {@link ValidationDetail} list, not a message. */
  validation: { status: 422, type: "validation_error", message: "the request is not valid" },
  // 429
  /** The account's request in flight, in the words of the accounts' admission. */
  concurrencyLimit: { status: 429, type: "concurrency_limit", message: "%s" },
  /** The account's allowance, in the words of the accounts' admission. */
  allowanceExhausted: { status: 429, type: "allowance_exhausted", message: "%s" },
  // 500
  internal: {
    status: 500,
    type: "internal_error",
    message: "internal error; quote request id %s when reporting it",
  },
  // 503
  overloaded: {
    status: 503,
    type: "overloaded",
    message: "the server has %s requests waiting for the model, its limit; retry in about %s s",
  },
  deadlineExceeded: {
    status: 503,
    type: "deadline_exceeded",
    message: "no answer within the deadline of %s ms; retry later",
  },
  shuttingDown: {
    status: 503,
    type: "shutting_down",
    message:
      "this decisiond replica is shutting down and takes no new requests; retry (another replica will answer)",
  },
  /**
   * The accounts store (keys, ledger, allowance) did not answer: the call is refused, or its
   * answer withheld because its ledger row could not be written. Sent with `Retry-After`.
   */
  storeUnavailable: {
    status: 503,
    type: "store_unavailable",
    message: "the accounts store did not answer; retry in %s s",
  },
  consoleNotBuilt: {
    status: 503,
    type: "console_not_built",
    message: "the console's front end is not built (no %s): run npm run build",
  },
  /** No engine answered, in the engine pool's words. */
  engineUnreachable: { status: 503, type: "engine_unreachable", message: "%s" },
  /** A remote engine's own 4xx whose body is not JSON; answered with the engine's status. */
  engineRefused: { status: 502, type: "engine_refused", message: "%s" },
} as const satisfies Record<string, ErrorSpec>;

/** A code of the table. */
export type ErrorCode = keyof typeof Errors;

/**
 * Kinds of failure a client reports where no server `error_type` exists (no response, an
 * unreadable one). They never travel on the wire; they are here so that every `error_type` a
 * caller can see is spelled in this file.
 */
export const ClientErrorTypes = {
  /** No response: connection refused, DNS, reset. */
  connection: "connection_error",
  /** The console front end's name for {@link ClientErrorTypes.connection}. */
  network: "network_error",
  /** The caller aborted the request. */
  aborted: "aborted",
  /** A response that is not the JSON the API answers. */
  invalidResponse: "invalid_response",
  /** The console front end's name for an error body it cannot read. */
  unknown: "error",
} as const;

/**
 * The `error_type` a client gives an error response without an `error_type` (a proxy's page).
 * @param status - the HTTP status
 * @returns `http_<status>`
 * @example httpStatusErrorType(502) // → "http_502"
 */
export function httpStatusErrorType(status: number): string {
  return `http_${status}`;
}

/** One entry of a 422 body, FastAPI's shape: where (`loc`, starting with "body"), what, and a type. */
export interface ValidationDetail {
  /** Where: `"body"` (or `"query"`, `"path"`), then the keys and indexes down to the value. */
  loc: (string | number)[];
  /** What is wrong, for people. */
  msg: string;
  /** What is wrong, for programs: pydantic's names (`missing`, `string_type`, `value_error`, …). */
  type: string;
}

/** The body of every error but a 422. */
export interface ErrorBody {
  detail: { error_type: string; message: string; request_id?: string };
}

/** The body of a 422. */
export interface ValidationErrorBody {
  detail: ValidationDetail[];
}

/**
 * `template` with each `%s` replaced by the next of `args` (missing ones by "").
 * @example formatMessage("no route %s %s", ["GET", "/x"]) // → "no route GET /x"
 */
export function formatMessage(template: string, args: readonly (string | number)[]): string {
  let next = 0;
  return template.replace(/%s/g, () => String(args[next++] ?? ""));
}

/**
 * An error the API answers with a status, headers and a JSON body; never logged as a fault. The
 * error handler sends `body` as it is, adding the request id to an object `detail`.
 */
export class HttpError extends Error {
  /**
   * @param statusCode - the HTTP status
   * @param body - the JSON body
   * @param headers - response headers, lower-case names
   */
  constructor(
    readonly statusCode: number,
    readonly body: unknown,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(typeof body === "object" && body !== null ? JSON.stringify(body) : String(body));
    this.name = "HttpError";
  }
}

/** Options of {@link ApiError}. */
export interface ApiErrorOptions {
  /** Response headers (`retry-after`, `www-authenticate`, …), lower-case names. */
  readonly headers?: Readonly<Record<string, string>>;
  /** The status, for the entries answered with another error's status (`invalidRequest`, `engineRefused`). */
  readonly status?: number;
}

/**
 * An error of the table, thrown by code.
 * @example throw new ApiError(Errors.routeNotFound, [request.method, request.url]);
 */
export class ApiError extends HttpError {
  /**
   * @param spec - the table's entry, e.g. `Errors.concurrencyLimit`
   * @param args - the values of the message's `%s`, in order
   * @param options - headers, and the status where the entry takes another error's
   */
  constructor(
    readonly spec: ErrorSpec,
    args: readonly (string | number)[] = [],
    options: ApiErrorOptions = {},
  ) {
    const body: ErrorBody = {
      detail: { error_type: spec.type, message: formatMessage(spec.message, args) },
    };
    super(options.status ?? spec.status, body, options.headers);
    this.name = "ApiError";
  }
}

/**
 * A 422 listing what is wrong with the request, {@link Errors.validation}.
 * @param detail - one entry per problem
 * @returns the error to throw; its body is `{"detail": detail}`
 * @example
 * ```ts
 * throw validationError([{ loc: ["body", "model"], msg: "Field required", type: "missing" }]);
 * ```
 */
export function validationError(detail: ValidationDetail[]): HttpError {
  const body: ValidationErrorBody = { detail };
  return new HttpError(Errors.validation.status, body);
}

/**
 * The `error_type` of an error body: its `detail.error_type`, {@link Errors.validation}'s type for
 * a 422 list, the `error.code` of OpenAI's shape (the Decisions wire, ./decisions-errors.ts), ""
 * when it has none.
 * @param body - an error body as sent (JSON text) or parsed
 */
export function errorTypeOf(body: unknown): string {
  let parsed = body;
  if (typeof body === "string") {
    try {
      parsed = JSON.parse(body);
    } catch {
      return "";
    }
  }
  const detail = (parsed as { detail?: unknown } | null | undefined)?.detail;
  if (Array.isArray(detail)) return Errors.validation.type;
  const code = (parsed as { error?: { code?: unknown } } | null | undefined)?.error?.code;
  if (typeof code === "string") return code;
  const type = (detail as { error_type?: unknown } | null | undefined)?.error_type;
  return typeof type === "string" ? type : "";
}
