import { randomUUID } from "node:crypto";
import type { Socket } from "node:net";
import { maxHeaderSize, STATUS_CODES, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import type { ErrorBody } from "../protocol/error-shapes.js";
import { ApiError, Errors } from "../protocol/errors.js";

/**
 * Fastify's `clientErrorHandler`: the answer to a request Node's HTTP parser refused before any
 * route saw it, in the API's error shape (`{"detail": {"error_type", "message", "request_id"}}`)
 * rather than Fastify's: 408 `request_timeout` for a request not received within the request
 * timeout, 431 `request_header_too_large` for oversized headers, else 400 `invalid_request` with
 * the parser's reason (an unknown method, a malformed request line). Its debug log line names the
 * answer's request id as `reqId`. The socket is closed after it, as Node does.
 * @param timeoutMs - the server's request timeout, for the 408's message
 * @returns the handler, to be called with the Fastify instance as `this`
 */
export function clientErrorHandler(timeoutMs: number) {
  return function (
    this: { log: FastifyBaseLogger },
    error: Error & { code?: string },
    socket: Socket,
  ): void {
    if (error.code === "ECONNRESET" || socket.destroyed) return;
    const answer =
      error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? new ApiError(Errors.requestTimeout, [timeoutMs / 1000])
        : error.code === "HPE_HEADER_OVERFLOW"
          ? new ApiError(Errors.headersTooLarge, [maxHeaderSize])
          : new ApiError(Errors.invalidHttp, [error.message]);
    const { text, requestId } = rawAnswer(answer);
    this.log.debug({ err: error, reqId: requestId }, "client error");
    if (socket.writable) socket.write(text);
    socket.destroy();
  };
}

/**
 * The answer to a `CONNECT` request (Node hands it to the server's `connect` listener, and
 * without one closes the socket unanswered): 405 `method_not_allowed` in the API's error shape,
 * then the socket is closed.
 * @example app.server.on("connect", refuseConnect);
 */
export function refuseConnect(_request: IncomingMessage, socket: Duplex): void {
  socket.on("error", () => {});
  socket.end(
    rawAnswer(new ApiError(Errors.methodNotAllowed, ["CONNECT"]), "Allow: GET, POST").text,
  );
}

/**
 * An error written straight to a socket, with `Connection: close`: like every answer the app
 * sends, it carries a request id (new: no id can be adopted from headers that were not parsed) in
 * `x-request-id`, `x-typesafe-request-id` and the body's `request_id`.
 * @param answer - the error
 * @param header - one more header line, without its CRLF
 * @returns the whole HTTP/1.1 response, and its request id
 */
function rawAnswer(answer: ApiError, header?: string): { text: string; requestId: string } {
  const requestId = randomUUID();
  const { detail } = answer.body as ErrorBody;
  const body = JSON.stringify({ detail: { ...detail, request_id: requestId } });
  const text =
    `HTTP/1.1 ${answer.statusCode} ${STATUS_CODES[answer.statusCode]}\r\n` +
    (header === undefined ? "" : `${header}\r\n`) +
    `Content-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\n` +
    `X-Request-Id: ${requestId}\r\nX-TypeSafe-Request-Id: ${requestId}\r\n` +
    `Connection: close\r\n\r\n${body}`;
  return { text, requestId };
}
