import type { FastifyInstance } from "fastify";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

// Why: docs/decisions/111-bounds-on-what-a-client-holds.md (last paragraph)
/**
 * Closes a connection once the last request it may carry (`maxRequestsPerSocket`) has been
 * answered and its body read. Node marks that answer `Connection: close` and answers requests
 * pipelined past it with a bare 503, but leaves the socket open until the keep-alive timeout.
 * The socket is ended on the turn after that answer (what was written, the 503s included, is
 * flushed first) and destroyed once flushed; a client that reads nothing is cut off when the
 * keep-alive timeout would have closed it.
 * @param app - the Fastify app, before it listens; a server without `maxRequestsPerSocket` is
 *   left as it is
 */
export function closeAfterLastRequest(app: FastifyInstance): void {
  const max = app.server.maxRequestsPerSocket;
  if (!max) return;
  const served = new WeakMap<Socket, number>();
  const close = (socket: Socket) => {
    if (socket.destroyed) return;
    const bound = setTimeout(() => socket.destroy(), app.server.keepAliveTimeout || 5_000);
    bound.unref();
    socket.once("close", () => clearTimeout(bound));
    socket.end(() => socket.destroy());
  };
  // Requests counted as Node counts them, those it answers 417 itself included.
  const count = (request: IncomingMessage, response: ServerResponse) => {
    if (request.httpVersionMajor !== 1) return;
    const socket = request.socket;
    const answered = (served.get(socket) ?? 0) + 1;
    served.set(socket, answered);
    if (answered < max) return;
    // Node caps no HTTP/1.0 keep-alive connection: its last answer is marked to close here,
    // before it is written (this listener runs before the app's).
    if (request.httpVersionMinor === 0) response.shouldKeepAlive = false;
    response.once("finish", () => {
      // An answer given before its body arrived (early-reply.ts) waits for the body's end, so
      // the client finishes sending and reads it.
      if (request.complete) setImmediate(close, socket);
      else request.once("end", () => setImmediate(close, socket));
    });
  };
  app.server.prependListener("request", count);
  // An `Expect:` other than 100-continue: Node's own answer (417, no `request` event), counted.
  app.server.on("checkExpectation", (request: IncomingMessage, response: ServerResponse) => {
    count(request, response);
    response.writeHead(417);
    response.end();
  });
}
