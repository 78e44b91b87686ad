import type { FastifyInstance } from "fastify";
import { readFileSync } from "node:fs";

/** File descriptors kept for the process's own use beside its connections: 256. */
export const FD_HEADROOM = 256;

// Why a cap, and why not per address or a shorter keep-alive: docs/decisions/111
/**
 * The most connections the server holds at once, so that clients cannot take the file
 * descriptors the process needs for itself (the accounts store, snapshot files, the model): the
 * soft limit on open files less {@link FD_HEADROOM}, at least half the limit.
 * @param limits - the text of `/proc/self/limits` (Linux)
 * @returns the cap, or `undefined` when the limit is not known or unlimited
 * @example
 * ```ts
 * connectionCap("Max open files            1024                 524288               files\n"); // → 768
 * ```
 */
export function connectionCap(limits: string): number | undefined {
  const soft = /^Max open files\s+(\d+)\s/m.exec(limits)?.[1];
  if (soft === undefined) return undefined;
  const n = Number(soft);
  return Math.max(Math.floor(n / 2), n - FD_HEADROOM);
}

/** This process's open-file limit as `/proc/self/limits` gives it; "" where there is none. */
function processLimits(): string {
  try {
    return readFileSync("/proc/self/limits", "utf8");
  } catch {
    return "";
  }
}

/**
 * Caps the app's connections at {@link connectionCap} (Node's `server.maxConnections`: one more is
 * closed as it opens) and logs a warning, at most once a minute, while connections are refused.
 * @param app - the Fastify app, before it listens
 * @param cap - the most connections held at once; default from this process's open-file limit
 */
export function capConnections(
  app: FastifyInstance,
  cap: number | undefined = connectionCap(processLimits()),
): void {
  if (cap === undefined) return;
  app.server.maxConnections = cap;
  let warnedAt = -Infinity;
  let dropped = 0;
  app.server.on("drop", () => {
    dropped++;
    const now = Date.now();
    if (now - warnedAt < 60_000) return;
    warnedAt = now;
    app.log.warn(
      { maxConnections: cap, dropped },
      `connections refused: the server holds its most (${cap}, below the open-file limit)`,
    );
  });
}
