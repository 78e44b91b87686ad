import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildApp, type FastifyInstance, type Gate, type ServedModel } from "../api/app.js";
import { Lifecycle } from "../api/lifecycle.js";
import type { ServiceSettings } from "../cli/service-settings.js";
import { consoleMount, type ConsoleOptions } from "../console/plugin.js";

/**
 * The HTTP side of a service, as the composition root (./build.ts) starts it: the app over the
 * one served model, listening.
 *
 * @packageDocumentation
 */

/** The options of {@link listenApp}: those of a service that concern its HTTP side. */
export interface AppServiceOptions extends Pick<
  ServiceSettings,
  | "host"
  | "port"
  | "bodyLimit"
  | "logger"
  | "queueCapacity"
  | "deadlineMs"
  | "requestTimeoutMs"
  | "corsOrigins"
> {
  /** Admission control; none (open, loopback only) when absent. */
  readonly gate?: Gate | undefined;
  /** The web console under `/console`; none when absent. */
  readonly console?: ConsoleOptions | undefined;
  /** `/readyz` checks by name. */
  readonly readiness?: Readonly<Record<string, () => Promise<void>>>;
  /** Decision requests waiting for their account's slot, for `/metrics`. */
  readonly queueDepth?: (() => number) | undefined;
}

/**
 * Builds the app serving one model, with a drain state of its own, and listens.
 * @returns the app, its URL (`http://host:port`, the bound port when `port` is 0) and its
 *   {@link Lifecycle}.
 * @throws when the app cannot listen (the port is taken, the host not local).
 */
export async function listenApp(
  served: ServedModel,
  options: AppServiceOptions,
): Promise<{ app: FastifyInstance; url: string; lifecycle: Lifecycle }> {
  const lifecycle = new Lifecycle();
  const app = await buildApp({
    lifecycle,
    readiness: options.readiness,
    queueDepth: options.queueDepth,
    models: [served],
    bodyLimit: options.bodyLimit,
    queue: { capacity: options.queueCapacity, deadlineMs: options.deadlineMs },
    requestTimeoutMs: options.requestTimeoutMs,
    corsOrigins: options.corsOrigins,
    logger: options.logger,
    gate: options.gate,
    mounts: options.console ? [consoleMount(options.console)] : [],
    version: packageVersion(),
  });
  const host = options.host ?? "127.0.0.1";
  try {
    await app.listen({ host, port: options.port ?? 8080 });
  } catch (error) {
    await app.close();
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return { app, url: `http://${urlHost}:${port}`, lifecycle };
}

/** decisiond's version, from its package.json. */
export function packageVersion(): string {
  const file = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "package.json");
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}
