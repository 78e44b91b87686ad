import type { FastifyRequest } from "fastify";

/**
 * What the log keeps of a request: its path, never its query string, which may carry a
 * credential a client put there (`?api_key=…` is refused, but it was written to the log inside
 * the URL; issue 47, item 7).
 */

/**
 * A request target without its query string.
 * @example pathOf("/v1/models?api_key=dsk_x") // → "/v1/models"
 */
export function pathOf(url: string): string {
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}

/**
 * Fastify's `req` log serializer with the path in place of the URL: method, path, host, the
 * client's address and port.
 */
export function requestLogFields(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: pathOf(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}
