/**
 * Every error the API answers, declared once (the style of Fastify's `lib/errors.js`): a code
 * (the key), the HTTP status, the wire `error_type` and the message, whose words live here only.
 * Code throws them by code — `throw new ApiError(Errors.routeNotFound, [method, url])` in the API,
 * `throw new CodedError("storeUnavailable", [2])` below it — and every thrown error carries its
 * code; one mapping (src/api/error-handler.ts) answers them; no other file spells a status or an
 * `error_type`. Why: docs/decisions/090-one-composition-root.md
 *
 * Bodies: a 422 is `{"detail": [{loc, msg, type}]}` (FastAPI's shape, {@link ValidationDetail});
 * every other error `{"detail": {"error_type", "message", "request_id"?}}` ({@link ErrorBody}).
 */

import type * as Shapes from "./error-shapes.js";
import { formatMessage, RESERVED_BY } from "./error-shapes.js";

export * from "./error-shapes.js";

/** One entry of the table. */
export interface ErrorSpec {
  /** The HTTP status. */
  readonly status: number;
  /** The wire `error_type`, as clients match it. */
  readonly type: string;
  /** The message: a template whose each `%s` takes the next argument, or a function of them. */
  readonly message: string | ((args: never) => string);
}

/** The arguments of an entry's message: its function's, else one value per `%s`. */
export type MessageArgs<S extends ErrorSpec> = S["message"] extends (args: infer A) => string
  ? A
  : readonly (string | number)[];

/** The words of an allowance's period. */
function periodText(period: Shapes.AllowanceArgs["period"]): string {
  return { day: "today (UTC)", month: "this month (UTC)", total: "in total" }[period];
}

/** `; it renews at <ISO time>`, or "" for an allowance that does not renew. */
function renewsText(renewsAt: number | undefined): string {
  return renewsAt !== undefined ? `; it renews at ${new Date(renewsAt).toISOString()}` : "";
}

/** The errors of the API, by code. */
export const Errors = {
  // 400
  /** One of Fastify's own 4xx, in Fastify's words; answered with the error's status. */
  invalidRequest: { status: 400, type: "invalid_request", message: "the request is not valid: %s" },
  /** A request Node's HTTP parser refused (an unknown method, a malformed request line). */
  invalidHttp: {
    status: 400,
    type: "invalid_request",
    message: "the request is not valid HTTP/1.1 (%s)",
  },
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
  accountNotFound: { status: 404, type: "not_found", message: "no account %s" },
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
  /** A method a path is not served with (its answer's `Allow` names those it is). */
  methodNotServed: {
    status: 405,
    type: "method_not_allowed",
    message: "%s is not served at %s: it takes %s",
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
    message: "the request was not received in full within %s s: send its headers and body at once",
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
    message: "the body must be JSON sent with Content-Type: application/json%s",
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
  /** The account has a request in flight (here or on another replica): its name, seconds to wait. */
  concurrencyLimit: {
    status: 429,
    type: "concurrency_limit",
    message:
      'account "%s" already has a request in flight; decisiond answers one request at a time per account: retry in about %s s',
  },
  /** The account's allowance for the period is used up. */
  allowanceExhausted: {
    status: 429,
    type: "allowance_exhausted",
    message: (a: Shapes.AllowanceArgs) =>
      `account "${a.account}" has used its allowance: ${a.used} of ${a.tokens} tokens ${periodText(a.period)}` +
      (a.reserved > 0 ? ` (${a.reserved} more reserved by ${RESERVED_BY})` : "") +
      renewsText(a.renewsAt),
  },
  /** The call's tokens would take the account past its allowance: it is not run. */
  allowanceOverrun: {
    status: 429,
    type: "allowance_exhausted",
    message: (a: Shapes.AllowanceArgs & { readonly needed: number }) =>
      `this call needs ${a.needed} tokens but account "${a.account}" has ${a.remaining} of its ${a.tokens} left ${periodText(a.period)}` +
      (a.reserved > 0 ? ` (${a.reserved} reserved by ${RESERVED_BY})` : "") +
      `: it was not run${renewsText(a.renewsAt)}`,
  },
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
    message: "the server is at its limit of requests in progress (%s); retry in about %s s",
  },
  deadlineExceeded: {
    status: 503,
    type: "deadline_exceeded",
    message: "no answer within the deadline of %s ms; retry later",
  },
  /** Refused at the door while draining; `cut`: stopped part way, at its answer or its body. */
  shuttingDown: {
    status: 503,
    type: "shutting_down",
    message: ({ cut }: { cut?: "answer" | "body" }) =>
      `this decisiond replica is shutting down and ${{ none: "takes no new requests", answer: "stopped this request before its answer", body: "stopped reading this request's body" }[cut ?? "none"]}; retry (another replica will answer)`,
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
  /** No remote engine could be reached: each engine and its error. */
  engineUnreachable: {
    status: 503,
    type: "engine_unreachable",
    message: "no engine is reachable (%s)",
  },
  /** No remote engine answered within the engine deadline (`--engine-deadline`, ms). */
  engineDeadline: {
    status: 503,
    type: "engine_unreachable",
    message: "no engine answered within %s ms",
  },
  /** A remote engine's own 4xx whose body is not JSON: its text; answered with the engine's status. */
  engineRefused: { status: 502, type: "engine_refused", message: "the engine refused: %s" },
} as const satisfies Record<string, ErrorSpec>;

/** A code of the table. */
export type ErrorCode = keyof typeof Errors;

/**
 * The message of an entry for its arguments: its template filled in, or its function's answer.
 * @example messageOf(Errors.routeNotFound, ["GET", "/x"]) // → "no route GET /x"
 */
export function messageOf<S extends ErrorSpec>(spec: S, args: MessageArgs<S>): string {
  const message = spec.message as string | ((args: MessageArgs<S>) => string);
  return typeof message === "string"
    ? formatMessage(message, args as readonly (string | number)[])
    : message(args);
}

/** The code of each entry of the table, by the entry. */
const CODES = new Map<ErrorSpec, ErrorCode>(
  Object.entries(Errors).map(([code, spec]) => [spec, code as ErrorCode]),
);

/**
 * The code of an entry of the table.
 * @throws Error for a spec that is not one of {@link Errors}
 */
function codeOf(spec: ErrorSpec): ErrorCode {
  const code = CODES.get(spec);
  if (code === undefined) throw new Error(`not an entry of the error table: ${spec.type}`);
  return code;
}

/**
 * An error of the table thrown by code that knows no HTTP (accounts/, engine/, the work queue):
 * it carries its entry's code and the message's arguments (Fastify's `FST_ERR_*` habit), and the
 * API's one mapping (src/api/error-handler.ts) answers it through the entry. Its own message, for
 * logs, is the entry's, followed by its cause's.
 * @example `throw new CodedError("deadlineExceeded", [deadlineMs], { retryAfterMs: 1000 });`
 */
export class CodedError<C extends ErrorCode = ErrorCode> extends Error {
  /** The message's arguments, as the entry takes them. */
  readonly args: MessageArgs<(typeof Errors)[C]>;
  /** How long a retry should wait, ms; `undefined` when the entry says none. */
  readonly retryAfterMs: number | undefined;

  /**
   * @param code - the entry's code, e.g. `"storeUnavailable"`
   * @param args - the message's arguments
   * @param options - the retry delay, and the cause
   */
  constructor(
    readonly code: C,
    args: MessageArgs<(typeof Errors)[C]>,
    options: Shapes.CodedErrorOptions = {},
  ) {
    const cause = options.cause;
    super(
      messageOf<ErrorSpec>(Errors[code], args as MessageArgs<ErrorSpec>) +
        (cause === undefined
          ? ""
          : ` (${cause instanceof Error ? cause.message : JSON.stringify(cause)})`),
      cause === undefined ? undefined : { cause },
    );
    this.name = new.target.name;
    this.args = args;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** Whether `error` is a {@link CodedError}, of any code. */
export function isCodedError(error: unknown): error is CodedError {
  return error instanceof CodedError;
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
   * @param code - the code of its entry of the table; `undefined` for a body of another wire's
   *   table (src/protocol/decisions-errors.ts) or an engine's own
   */
  constructor(
    readonly statusCode: number,
    readonly body: unknown,
    readonly headers: Readonly<Record<string, string>> = {},
    readonly code: ErrorCode | undefined = undefined,
  ) {
    super(typeof body === "object" && body !== null ? JSON.stringify(body) : String(body));
    this.name = "HttpError";
  }
}

/**
 * An error of the table, thrown by the API's own code; its `code` is the entry's.
 * @example throw new ApiError(Errors.routeNotFound, [request.method, request.url]);
 */
export class ApiError<S extends ErrorSpec = ErrorSpec> extends HttpError {
  /**
   * @param spec - the table's entry, e.g. `Errors.routeNotFound`
   * @param args - the message's arguments: the values of its `%s`, in order, or its function's
   * @param options - headers, and the status where the entry takes another error's
   * @throws Error for a spec that is not an entry of {@link Errors}
   */
  constructor(
    readonly spec: S,
    args: MessageArgs<S> = [] as MessageArgs<S>,
    options: Shapes.ApiErrorOptions = {},
  ) {
    const body: Shapes.ErrorBody = {
      detail: { error_type: spec.type, message: messageOf(spec, args) },
    };
    super(options.status ?? spec.status, body, options.headers, codeOf(spec));
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
export function validationError(detail: Shapes.ValidationDetail[]): HttpError {
  const body: Shapes.ValidationErrorBody = { detail };
  return new HttpError(Errors.validation.status, body, {}, "validation");
}

/**
 * The `error_type` of an error body (sent as JSON text, or parsed): its `detail.error_type`, a 422
 * list's {@link Errors.validation} type, OpenAI's `error.code` (./decisions-errors.ts), else "".
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
