import type { ValidationDetail } from "../protocol/errors.js";

export type { ValidationDetail };

/** The fields of a {@link DecisiondError}. */
export interface DecisiondErrorInit {
  /** HTTP status; 0 when no response arrived (connection refused, DNS, reset, abort). */
  status: number;
  /**
   * The server's `error_type` (the `type` of an entry of `Errors`, src/protocol/errors.ts;
   * `Errors.validation.type` for a 422); for failures without a server body one of
   * `ClientErrorTypes`, or `http_<status>` for a non-JSON error body (a proxy's page, say).
   */
  errorType: string;
  /** The server's message; for a 422, every detail as `loc: msg`, joined with "; ". */
  message: string;
  /** The `x-request-id` of the response (or the body's `request_id`), when there was one. */
  requestId?: string | undefined;
  /** The 422 detail list, verbatim. */
  details?: ValidationDetail[] | undefined;
  /** Seconds from a `Retry-After` header (429, 503), when the server sent one. */
  retryAfter?: number | undefined;
  /** The underlying error (network failures). */
  cause?: unknown;
}

/**
 * Any failure of a decisiond call: an error response from the server, or no response at all
 * (`status` 0). The client never retries; callers decide, e.g. after {@link retryAfter} seconds.
 */
export class DecisiondError extends Error {
  /** HTTP status; 0 when no response arrived. */
  readonly status: number;
  /** The server's `error_type`, or a client-side kind (see {@link DecisiondErrorInit.errorType}). */
  readonly errorType: string;
  /** The response's request id, to quote when reporting a problem. */
  readonly requestId: string | undefined;
  /** The 422 detail list; `undefined` for other errors. */
  readonly details: ValidationDetail[] | undefined;
  /** Seconds the server asked to wait before retrying (`Retry-After`), when it said. */
  readonly retryAfter: number | undefined;

  constructor(init: DecisiondErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "DecisiondError";
    this.status = init.status;
    this.errorType = init.errorType;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryAfter = init.retryAfter;
  }

  /** The error as the API spells it: `{status, error_type, message, request_id, ...}`. */
  toJSON(): Record<string, unknown> {
    return {
      status: this.status,
      error_type: this.errorType,
      message: this.message,
      ...(this.requestId !== undefined ? { request_id: this.requestId } : {}),
      ...(this.details !== undefined ? { detail: this.details } : {}),
      ...(this.retryAfter !== undefined ? { retry_after: this.retryAfter } : {}),
    };
  }

  /**
   * One line for people: `HTTP <status> <error type>: <message> (request id …; retry after 1 s)`,
   * or `<error type>: <message>` when no response arrived.
   */
  describe(): string {
    const head = this.status > 0 ? `HTTP ${this.status} ${this.errorType}` : this.errorType;
    const notes = [
      ...(this.requestId !== undefined ? [`request id ${this.requestId}`] : []),
      ...(this.retryAfter !== undefined ? [`retry after ${this.retryAfter} s`] : []),
    ];
    return `${head}: ${this.message}${notes.length > 0 ? ` (${notes.join("; ")})` : ""}`;
  }
}

/**
 * A client that cannot be configured: the key file is readable by others, unreadable or empty.
 * The message says what to do.
 */
export class ClientConfigError extends Error {
  /** The file at fault, when there is one. */
  readonly path: string | undefined;

  constructor(message: string, path?: string) {
    super(message);
    this.name = "ClientConfigError";
    this.path = path;
  }
}
