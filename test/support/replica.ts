import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { spawnOwned } from "./cleanup.js";

/**
 * A real `decisiond serve` process (the built CLI, dist/cli/main.js) for tests that need several
 * replicas, SIGTERM or SIGKILL. Its stderr is kept for the test's messages.
 */
export interface Replica {
  readonly url: string;
  readonly process: ChildProcess;
  /** Everything it wrote to stderr so far. */
  log(): string;
  /** Resolves with the exit code (or the signal's name) once the process has exited. */
  readonly exited: Promise<number | string>;
}

/**
 * Starts `decisiond serve --port 0 …args` and waits for its "serving … at URL" line.
 * @param env extra environment (DECISIOND_HOME, XDG_CONFIG_HOME, DECISIOND_STORE…)
 * @throws when the process exits or prints nothing usable within `timeoutMs`.
 */
export async function startReplica(
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 180_000,
): Promise<Replica> {
  const main = join(import.meta.dirname, "..", "..", "dist", "cli", "main.js");
  const child = spawnOwned(process.execPath, [main, "serve", "--port", "0", ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  const exited = once(child, "exit").then(([code, signal]) =>
    code === null ? String(signal) : Number(code),
  );
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`decisiond serve did not start in ${timeoutMs} ms:\n${stderr}`)),
      timeoutMs,
    );
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
      const match = /serving .* at (http:\/\/[^/\s]+)\/v1\/systemone/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`decisiond serve exited (${code}) before serving:\n${stderr}`));
    });
  });
  return { url, process: child, log: () => stderr, exited };
}
