import { isIP } from "node:net";
import type { FastifyInstance } from "fastify";
import { ApiError, Errors } from "../protocol/errors.js";

/**
 * Whether `host` names this machine's loopback only: `localhost`, 127.0.0.0/8 or ::1 (also as
 * `::ffff:127.x.y.z` or in brackets). Other names under `.localhost` do not count: nothing makes
 * a resolver answer them with loopback, so they could point anywhere.
 * @example isLoopbackName("127.0.0.1") // → true; isLoopbackName("evil.localhost") // → false
 */
export function isLoopbackName(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1");
  if (h === "localhost" || h === "localhost.") return true;
  const v4 = h.startsWith("::ffff:") && isIP(h.slice(7)) === 4 ? h.slice(7) : h;
  if (isIP(v4) === 4) return v4.split(".")[0] === "127";
  if (isIP(h) === 6) return /^(0{0,4}:){2,7}0{0,3}1$/.test(h) || h === "::1";
  return false;
}

/** The host part of a Host header (`name`, `name:port`, `[v6]:port`). */
export function hostOfHeader(header: string): string {
  const bracketed = /^\[([^\]]*)\](:\d+)?$/.exec(header.trim());
  if (bracketed) return bracketed[1]!;
  const colon = header.lastIndexOf(":");
  // One colon: name:port. Several without brackets: a bare IPv6 address.
  return colon > -1 && header.indexOf(":") === colon ? header.slice(0, colon) : header;
}

/**
 * Refuses ({@link Errors.hostNotAllowed}) every request whose Host header does not name loopback, for a
 * server without authentication that listens on loopback: a web page on another origin can make
 * the browser send requests to it by DNS rebinding (its own name resolving to 127.0.0.1), and
 * such requests carry the page's name in Host.
 */
export function requireLoopbackHost(app: FastifyInstance): void {
  app.addHook("onRequest", async (request) => {
    const header = request.headers.host ?? "";
    if (!isLoopbackName(hostOfHeader(header)))
      throw new ApiError(Errors.hostNotAllowed, [JSON.stringify(header)]);
  });
}
