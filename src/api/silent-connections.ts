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
 * - one remote address may hold at most `perAddress` silent connections; one more closes the
 *   oldest of them, not the new one, so that clients sharing an address with a flood (behind one
 *   NAT or proxy) still get in: their connections send their request at once (a connection is
 *   silent for well under a millisecond), where the flood's wait, and are closed first;
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
  /** Each remote address's silent connections, oldest first. */
  const held = new Map<string, Set<Socket>>();
  /** Each silent connection's address and its set (a closed socket's address is gone). */
  const silent = new Map<Socket, { address: string; sockets: Set<Socket> }>();
  /** The socket is no longer silent: it leaves its address's set. */
  const settle = (socket: Socket) => {
    const entry = silent.get(socket);
    if (!entry) return;
    silent.delete(socket);
    entry.sockets.delete(socket);
    if (entry.sockets.size === 0) held.delete(entry.address);
  };
  app.server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "";
    let sockets = held.get(address);
    if (!sockets) held.set(address, (sockets = new Set()));
    sockets.add(socket);
    silent.set(socket, { address, sockets });
    socket.once("close", () => settle(socket));
    if (sockets.size > perAddress) {
      const oldest = sockets.values().next().value!;
      settle(oldest);
      oldest.destroy();
    }
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
