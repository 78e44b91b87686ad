import fastifyStatic from "@fastify/static";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ApiError, Errors } from "../protocol/errors.js";

/**
 * The console's front end: the files `vite build` writes to `dist/console-app/` (from
 * `console/`), served under `/console/`. Hashed bundles under `/console/assets/` are cached for a
 * year; every other path under `/console/` that is not a file answers `index.html`, so the
 * front end's own routes (`/console/keys`, …) load on a reload. Nothing is fetched from elsewhere.
 */

/** Where `npm run build` puts the built front end: `<package root>/dist/console-app`. */
export function defaultAssetsDir(): string {
  // This module is src/console/assets.ts or dist/console/assets.js: the package root is two up.
  return join(dirname(fileURLToPath(import.meta.url)), "..", "..", "dist", "console-app");
}

/**
 * The headers of every console page and asset: a content security policy allowing this origin
 * only (styles may be inline: the JSON editor injects its own), no framing, no referrer.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
};

/** A top-level file of the build (favicon, …): a plain name, no dot first. */
const TOP_LEVEL_FILE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * Registers the front end's routes on `app` (expected under the prefix `/console`). When the
 * front end is not built, its pages answer 503 saying how to build it.
 */
export async function consoleAssets(app: FastifyInstance, assetsDir: string): Promise<void> {
  app.addHook("onSend", async (_request, reply, payload) => {
    reply.headers(SECURITY_HEADERS);
    return payload;
  });

  const built = existsSync(join(assetsDir, "index.html"));
  if (built && existsSync(join(assetsDir, "assets"))) {
    await app.register(fastifyStatic, {
      root: join(assetsDir, "assets"),
      prefix: "/assets/",
      immutable: true,
      maxAge: "365d",
      index: false,
      decorateReply: false,
    });
  }
  if (built) {
    // sendFile for the pages; its own decoration, not shared with the assets above.
    await app.register(fastifyStatic, { root: assetsDir, serve: false });
  }

  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!built) throw new ApiError(Errors.consoleNotBuilt, [join(assetsDir, "index.html")]);
    const path = (request.params as { "*"?: string })["*"] ?? "";
    if (TOP_LEVEL_FILE.test(path) && path !== "index.html" && isFile(join(assetsDir, path)))
      return reply.sendFile(path, { maxAge: "1h" });
    return reply
      .header("cache-control", "no-cache")
      .sendFile("index.html", { cacheControl: false });
  };

  // "/console/" only: "/console" redirects here (./plugin.ts).
  app.route({ method: "GET", url: "/", prefixTrailingSlash: "slash", handler: page });
  app.get("/*", async (request, reply) => {
    if (request.url.startsWith("/console/api/"))
      throw new ApiError(Errors.routeNotFound, [request.method, request.url]);
    return page(request, reply);
  });
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
