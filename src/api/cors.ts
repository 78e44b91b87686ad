import cors from "@fastify/cors";
import type { FastifyInstance } from "fastify";

/**
 * Cross-origin calls to the API from a browser (CORS), for the origins an operator names
 * (`serve --cors-origin`); with none, nothing is added and a browser on another origin cannot
 * read an answer.
 *
 * @packageDocumentation
 */

/** Whether `url` is one of the API's routes (`/v1/…`); the console, probes and metrics are not. */
export function isApiPath(url: string): boolean {
  return url.startsWith("/v1/");
}

/** Response headers a page may read: the request id (both names) and a refusal's wait (both). */
const EXPOSED_HEADERS = ["x-request-id", "x-typesafe-request-id", "retry-after", "retry-after-ms"];

/** How long a browser may keep a preflight's answer, in seconds (Chromium caps it at 7,200). */
const PREFLIGHT_MAX_AGE_S = 600;

/**
 * Answers CORS for the API's routes (`/v1/…`) only, with `@fastify/cors`: a request whose `Origin` is
 * one of `origins` (or any, for `*`) gets `Access-Control-Allow-Origin`, and its preflight
 * (`OPTIONS` with `Access-Control-Request-Method`) gets 204 with the methods `GET, POST` and the
 * headers it asked for (`Authorization`, `Content-Type`, an SDK's own), before the gate, so a
 * preflight needs no key. No credentials (cookies) are allowed: the API takes its key in a header.
 * A preflight to any other path, or with no origins, gets the API's 404 (app.ts answers it before
 * its body is read). Register before any other `onRequest` hook, so that every answer,
 * a refusal included, carries the headers a browser needs to read it.
 * @param app - the app, before its hooks and routes
 * @param origins - exact origins (`https://app.example.com`), or `*`
 * @example await installCors(app, ["https://app.example.com"]);
 */
export async function installCors(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  if (origins.length === 0) return;
  const origin = origins.includes("*") ? "*" : [...origins];
  await app.register(cors, {
    delegator: (request, done) =>
      done(null, {
        origin: isApiPath(request.url) ? origin : false,
        methods: ["GET", "POST"],
        exposedHeaders: EXPOSED_HEADERS,
        maxAge: PREFLIGHT_MAX_AGE_S,
        strictPreflight: false,
      }),
  });
}

/**
 * Checks one `--cors-origin` entry: `*`, or an origin as a browser sends it in `Origin`
 * (`scheme://host[:port]`, no path, no trailing slash, no wildcard within it).
 * @returns the entry
 * @throws Error saying what an origin looks like, for anything else
 * @example corsOrigin("https://app.example.com:8443") // → "https://app.example.com:8443"
 */
export function corsOrigin(entry: string): string {
  if (entry === "*") return entry;
  let parsed: URL | undefined;
  try {
    parsed = new URL(entry);
  } catch {
    parsed = undefined;
  }
  if (entry.includes("*"))
    throw new Error(
      `"${entry}": a wildcard stands only alone (* for any origin); name each origin, e.g. https://app.example.com`,
    );
  if (parsed === undefined || parsed.origin === "null" || parsed.origin !== entry)
    throw new Error(
      `"${entry}" is not an origin: write it as a browser sends it, scheme://host[:port] with no path or trailing slash (e.g. https://app.example.com), or * for any`,
    );
  return entry;
}
