import type { Socket } from "node:net";
import { maxHeaderSize, STATUS_CODES, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import { ApiError, Errors } from "../protocol/errors.js";

/**
 * Fastify's `clientErrorHandler`: the answer to a request Node's HTTP parser refused before any
 * route saw it, in the API's error shape (`{"detail": {"error_type", "message"}}`) rather than
 * Fastify's: 408 `request_timeout` for a request not received within the request timeout, 431
 * `request_header_too_large` for oversized headers, else 400 `invalid_request` with the parser's
 * reason (an unknown method, a malformed request line). The socket is closed after it, as Node
 * does.
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
    this.log.debug({ err: error }, "client error");
    if (socket.writable) {
      const body = JSON.stringify(answer.body);
      socket.write(
        `HTTP/1.1 ${answer.statusCode} ${STATUS_CODES[answer.statusCode]}\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\n` +
          `Connection: close\r\n\r\n${body}`,
      );
    }
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
  const answer = new ApiError(Errors.methodNotAllowed, ["CONNECT"]);
  const body = JSON.stringify(answer.body);
  socket.on("error", () => {});
  socket.end(
    `HTTP/1.1 ${answer.statusCode} ${STATUS_CODES[answer.statusCode]}\r\n` +
      `Allow: GET, POST\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Content-Type: application/json\r\nConnection: close\r\n\r\n${body}`,
  );
}
