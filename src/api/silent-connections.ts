import type { FastifyInstance } from "fastify";
import type { Socket } from "node:net";

/** How many connections one remote address may hold before their first requests: 1,024. */
export const SILENT_CONNECTIONS_PER_ADDRESS = 1024;

/**
 * Bounds on connections that have not sent a request yet ("silent": no complete request head).
 * Node answers such a connection 408 once the request timeout has passed, but a client can open
 * thousands within that time: an outside probe held 20,000 from one address, the process ran
 * out of file descriptors and every other client was refused. And once the app is closing, Node
 * stops timing them, so one silent connection held a drain to its deadline. So:
 * - one remote address may hold at most `perAddress` silent connections; one more is closed as
 *   it opens (a client that sends its request at once never comes near this: a connection is
 *   silent for well under a millisecond);
 * - when the app closes, its silent connections are closed at once, so a drain ends when the
 *   requests in flight do (Node's `closeIdleConnections` closes keep-alive connections that have
 *   answered a request, not ones that never sent one).
 * A connection stops being silent when its first request's head has been read (the server's
 * `request` event).
 * @param app - the Fastify app, before it listens
 * @param perAddress - silent connections allowed per remote address
 */
export function boundSilentConnections(
  app: FastifyInstance,
  perAddress: number = SILENT_CONNECTIONS_PER_ADDRESS,
): void {
  /** Each silent connection's remote address. */
  const silent = new Map<Socket, string>();
  const held = new Map<string, number>();
  /** The socket is no longer silent: its address's count goes down. */
  const settle = (socket: Socket) => {
    const address = silent.get(socket);
    if (address === undefined) return;
    silent.delete(socket);
    const left = (held.get(address) ?? 1) - 1;
    if (left === 0) held.delete(address);
    else held.set(address, left);
  };
  app.server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "";
    const count = held.get(address) ?? 0;
    if (count >= perAddress) {
      socket.destroy();
      return;
    }
    held.set(address, count + 1);
    silent.set(socket, address);
    socket.once("close", () => settle(socket));
  });
  app.server.on("request", (request: { socket: Socket }) => settle(request.socket));
  app.addHook("preClose", (done) => {
    for (const socket of [...silent.keys()]) {
      settle(socket);
      socket.destroy();
    }
    done();
  });
}
