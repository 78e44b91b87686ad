import type { FastifyInstance } from "fastify";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/**
 * Closes a connection once the last request it may carry (`maxRequestsPerSocket`) has been
 * answered. Node marks that answer `Connection: close` and answers requests pipelined past it
 * with a bare 503, but leaves the socket open until the keep-alive timeout: the tenth outside
 * probe's connection of 40 pipelined requests was held 73 s after its last answer. The socket is
 * ended (its written answers, the 503s included, are flushed first) on the turn after that
 * answer is finished.
 * @param app - the Fastify app, before it listens; a server without `maxRequestsPerSocket`
 *   is left as it is
 */
export function closeAfterLastRequest(app: FastifyInstance): void {
  const max = app.server.maxRequestsPerSocket;
  if (!max) return;
  const served = new WeakMap<Socket, number>();
  app.server.on("request", (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    const count = (served.get(socket) ?? 0) + 1;
    served.set(socket, count);
    if (count < max) return;
    response.once("finish", () => setImmediate(() => socket.end()));
  });
}
