import type { FastifyInstance } from "fastify";
import { outagesAsErrors, type AccountStore } from "../accounts/store.js";
import { consoleApi } from "./api.js";
import { checkAdminToken } from "./auth.js";
import { consoleAssets, defaultAssetsDir } from "./assets.js";

/**
 * The web console: its JSON API under `/console/api/` and its front end under `/console/`.
 * Register it with `app.register(consolePlugin, options)` after the app's error handler is set,
 * so its errors have the API's shapes.
 */

/** Options of {@link consolePlugin}. */
export interface ConsoleOptions {
  /** The accounts store; `undefined` when the server runs without accounts (`--auth off`). */
  readonly store: AccountStore | undefined;
  /**
   * The admin token (checked with {@link checkAdminToken}); `undefined` turns admin sign-in off,
   * leaving sign-in with an account's API key.
   */
  readonly adminToken?: string | undefined;
  /** The built front end. Default `dist/console-app` in the package. */
  readonly assetsDir?: string;
  /** The clock. Default `Date.now`. */
  readonly now?: () => number;
}

/**
 * The console as a mount for `buildApp`'s `mounts` (src/api/options.ts `AppMount`), which the
 * composition root (src/service/build.ts) passes; the API layer never imports the console.
 * @example `buildApp({ models, gate, mounts: [consoleMount({ store, adminToken })] })`
 */
export function consoleMount(options: ConsoleOptions): (app: FastifyInstance) => Promise<void> {
  return async (app) => {
    await app.register(consolePlugin, options);
  };
}

/**
 * Registers the console under `/console`.
 * @throws {@link Error} for a weak admin token (see {@link checkAdminToken}).
 */
export async function consolePlugin(app: FastifyInstance, options: ConsoleOptions): Promise<void> {
  if (options.adminToken !== undefined) checkAdminToken(options.adminToken);
  app.get("/console", async (_request, reply) => reply.redirect("/console/", 308));
  await app.register(
    async (scope) =>
      consoleApi(scope, {
        // A store that does not answer is 503 store_unavailable, as on the decision routes.
        store: options.store && outagesAsErrors(options.store),
        adminToken: options.adminToken,
        ...(options.now ? { now: options.now } : {}),
      }),
    { prefix: "/console/api" },
  );
  await app.register(
    async (scope) => consoleAssets(scope, options.assetsDir ?? defaultAssetsDir()),
    { prefix: "/console" },
  );
}

export { checkAdminToken };
