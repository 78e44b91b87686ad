/**
 * The shapes of the API's error bodies, and the error types a client names where the server gave
 * none: what the error table (./errors.ts) fills in, apart from the table itself.
 *
 * @packageDocumentation
 */

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

/**
 * Who holds an allowance's reserved tokens, as its messages say: calls admitted and not yet in the
 * ledger, which may be over without a row (their process stopped), and lapse after 10 minutes
 * (`RESERVATION_TTL_MS`, src/accounts/store.ts).
 */
export const RESERVED_BY =
  "calls not yet recorded: in flight, or stopped before their row, whose reservations lapse after 10 minutes";

/** An account's allowance as the allowance messages tell it. */
export interface AllowanceArgs {
  readonly account: string;
  /** Tokens of the allowance per period. */
  readonly tokens: number;
  /** Tokens used in the period. */
  readonly used: number;
  /** Tokens reserved by calls not yet recorded ({@link RESERVED_BY}). */
  readonly reserved: number;
  /** Tokens left: `tokens − used − reserved`, at least 0. */
  readonly remaining: number;
  readonly period: "day" | "month" | "total";
  /** When the allowance renews (ms since the epoch); `undefined` for a `total` allowance. */
  readonly renewsAt: number | undefined;
}

/** Options of `ApiError` (./errors.ts). */
export interface ApiErrorOptions {
  /** Response headers (`retry-after`, `www-authenticate`, …), lower-case names. */
  readonly headers?: Readonly<Record<string, string>>;
  /** The status, for the entries answered with another error's status (`invalidRequest`, `engineRefused`). */
  readonly status?: number;
}

/** Options of `CodedError` (./errors.ts). */
export interface CodedErrorOptions {
  /** How long a retry should wait, ms; answered as `Retry-After`. */
  readonly retryAfterMs?: number;
  /** What failed underneath (a driver's error): kept as `cause`, and named in the message. */
  readonly cause?: unknown;
}
