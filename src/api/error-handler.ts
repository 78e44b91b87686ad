import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { RequestTooLargeError, StateTooLongError } from "../decision/decide.js";
import { MediaInputError } from "../media/errors.js";
import { WWW_AUTHENTICATE } from "../protocol/bearer.js";
import {
  ApiError,
  Errors,
  isCodedError,
  type CodedError,
  errorTypeOf,
  HttpError,
  validationError,
} from "../protocol/errors.js";
import { PromptTextError } from "../protocol/prompt-text.js";
import { DECISIONS_PATH } from "../protocol/routes.js";
import { emptyBodyError } from "./json.js";
import { pathOf } from "./request-log.js";

/**
 * The app's one error handler, and the one mapping of errors to HTTP ({@link toHttpError}): every
 * error a route or hook throws is answered here, through the error table
 * (src/protocol/errors.ts). An {@link HttpError} is sent as it is, with the request id added; a
 * {@link CodedError} (the accounts', the engines', the work queue's) is answered by its code's
 * entry; the domain's validation errors become a 422 saying where; Fastify's own 4xx get the
 * API's error shape; anything else is an internal fault: logged, and answered 500 naming the
 * request id. A store outage (503 `store_unavailable`), a missed deadline (503
 * `deadline_exceeded`) and a drain's cut (503 `shutting_down`) are logged at warn with their
 * `error_type`; only the store outage with its stack.
 */

/** A Fastify error: `statusCode` and `code` (`FST_ERR_…`) when Fastify raised it. */
type FastifyError = Error & { statusCode?: number; code?: string };

/** The methods a path may be served with, as a 405's `Allow` lists them. */
const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] as const;

/** The codes logged at warn: not faults of ours, but an operator must see them. */
const WARN_CODES: ReadonlySet<string> = new Set([
  "storeUnavailable",
  "deadlineExceeded",
  "shuttingDown",
]);

/** Options of {@link installErrorHandler}. */
export interface ErrorHandlerOptions {
  /** The body limit in bytes, for the 413 message. */
  readonly bodyLimit: number;
}

/**
 * Sets the app's error and not-found handlers.
 * @param app - the app, before any plugin that should share the handler is registered
 * @param options - the body limit
 */
export function installErrorHandler(app: FastifyInstance, options: ErrorHandlerOptions): void {
  app.setNotFoundHandler((request, reply) => sendUnrouted(app, request, reply));

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = toHttpError(error);
    if (known && isCodedError(error) && WARN_CODES.has(error.code))
      request.log.warn(
        // A store fault's stack says where; a deadline or a drain's cut is an expected event.
        error.code === "storeUnavailable"
          ? { err: error, error_type: errorTypeOf(known.body) }
          : { error_type: errorTypeOf(known.body) },
        error.message,
      );
    if (known) {
      void reply
        .code(known.statusCode)
        .headers(known.headers)
        .send(withRequestId(known.body, request.id));
      return;
    }
    // Fastify's own refusals (size, media type), in the same shape and with the same id.
    const refused = fastifyClientError(error, options.bodyLimit, request);
    if (refused) {
      void reply.code(refused.statusCode).send(withRequestId(refused.body, request.id));
      return;
    }
    request.log.error({ err: error }, "internal fault");
    const fault = new ApiError(Errors.internal, [request.id]);
    void reply.code(fault.statusCode).send(withRequestId(fault.body, request.id));
  });
}

/**
 * Answers a request no route takes: 405 with `Allow` when its path is served with other methods
 * (RFC 9110 §15.5.6; `GET /v1/systemone`), else 404. A CORS preflight the server does not take
 * stays a 404 (docs/API.md).
 * @returns the reply, sent
 */
export function sendUnrouted(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  const path = pathOf(request.url);
  // A wildcard route (the console's pages) serves its prefix, not this path.
  const allowed = METHODS.filter((method) => {
    const route = app.findRoute({ method, url: path });
    return route !== null && !Object.hasOwn(route.params ?? {}, "*");
  });
  // A route that takes the method and found nothing (`reply.callNotFound()`) is a 404 too.
  const taken = (allowed as readonly string[]).includes(request.method);
  if (allowed.length === 0 || taken || request.method === "OPTIONS")
    return reply.code(404).send(notFoundBody(request));
  const error = new ApiError(Errors.methodNotServed, [request.method, path, allowed.join(", ")]);
  return reply
    .code(error.statusCode)
    .header("allow", allowed.join(", "))
    .send(withRequestId(error.body, request.id));
}

/** The body of the 404 of a request to no route, naming the request's id as every error body does. */
function notFoundBody(request: FastifyRequest): unknown {
  const error = new ApiError(Errors.routeNotFound, [request.method, pathOf(request.url)]);
  return withRequestId(error.body, request.id);
}

/**
 * The answer to an error of ours or of the domain, through the table: the one place errors
 * become HTTP.
 * @returns `undefined` for any other error (Fastify's own, or a fault)
 */
export function toHttpError(error: Error): HttpError | undefined {
  if (error instanceof HttpError) return error;
  if (isCodedError(error))
    return new ApiError(Errors[error.code], error.args, { headers: headersOf(error) });
  if (error instanceof PromptTextError)
    return validationError([
      {
        loc: ["body", error.part === "prefix" ? "state" : "questions"],
        msg: error.message,
        type: "value_error",
      },
    ]);
  if (error instanceof StateTooLongError)
    return validationError([
      {
        loc: error.blamesQuestion
          ? ["body", "questions", error.longestQuestionId!]
          : ["body", "state"],
        msg: error.message,
        type: "state_too_long",
      },
    ]);
  if (error instanceof RequestTooLargeError)
    return validationError([
      {
        loc:
          error.heaviestQuestionId === undefined
            ? ["body", "questions"]
            : ["body", "questions", error.heaviestQuestionId],
        msg: error.message,
        type: "too_many_tokens",
      },
    ]);
  if (error instanceof MediaInputError)
    return validationError([{ loc: [...error.loc], msg: error.message, type: error.type }]);
  return undefined;
}

/**
 * The headers of a coded error's answer: a refused key's challenge; `Retry-After` in whole
 * seconds (at least 1) when the error says when to retry, and `retry-after-ms`, which the
 * official clients prefer, where the wait was measured for the account (its slot, its allowance:
 * the 429s); `Connection: close` when the replica is shutting down, as its drain's refusals say.
 */
function headersOf(error: CodedError): Record<string, string> {
  const status = Errors[error.code].status;
  if (status === 401) return { ...WWW_AUTHENTICATE };
  if (error.retryAfterMs === undefined) return {};
  const ms = Math.max(1, Math.round(error.retryAfterMs));
  const seconds = String(Math.max(1, Math.ceil(ms / 1000)));
  if (status === 429) return { "retry-after": seconds, "retry-after-ms": String(ms) };
  return error.code === "shuttingDown"
    ? { "retry-after": seconds, connection: "close" }
    : { "retry-after": seconds };
}

/** A multipart body's content type. */
const MULTIPART = /^multipart\/form-data\s*(;|$)/i;
/** What a multipart body's 415 adds on each wire: how the image it most likely carries is sent. */
const MULTIPART_HINT = (url: string) =>
  ", not multipart/form-data (how the TypeSafe Python SDK uploads image assets): send one " +
  (url.startsWith(DECISIONS_PATH)
    ? 'image as an "input_image" part whose "image_url" is a base64 data URL'
    : 'image as a base64 data URL in "images", e.g. "images": ["data:image/png;base64,…"]') +
  ", to a vision model";

/**
 * Fastify's own 4xx (size, media type, empty body, a malformed request) in the API's shape; a
 * multipart body's 415 says how to send its image instead.
 * @returns `undefined` for anything else
 */
function fastifyClientError(
  error: FastifyError,
  bodyLimit: number,
  request: FastifyRequest,
): HttpError | undefined {
  if (error.code === "FST_ERR_CTP_EMPTY_JSON_BODY") return emptyBodyError();
  const status = error.statusCode ?? 500;
  if (status < 400 || status >= 500) return undefined;
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ApiError(Errors.requestTooLarge, [bodyLimit, (bodyLimit / 1048576).toFixed(0)], {
        status,
      });
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new ApiError(
        Errors.unsupportedMediaType,
        [MULTIPART.test(request.headers["content-type"] ?? "") ? MULTIPART_HINT(request.url) : ""],
        { status },
      );
    default:
      return new ApiError(Errors.invalidRequest, [error.message], { status });
  }
}

/** An error body with the request id added to its `detail` object (422 lists are left as they are). */
function withRequestId(body: unknown, requestId: string): unknown {
  if (typeof body === "object" && body !== null) {
    const detail = (body as { detail?: unknown }).detail;
    if (typeof detail === "object" && detail !== null && !Array.isArray(detail))
      return { ...body, detail: { ...detail, request_id: requestId } };
  }
  return body;
}
