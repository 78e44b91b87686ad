import { execFile, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { spawnOwned } from "./cleanup.js";

/**
 * A real llama.cpp `llama-server` for the tests, built once by scripts/build-llama-server.sh
 * (cached in ~/.cache/decisiond/llama-server/).
 */

/**
 * Path of the llama-server binary, building it when it is not cached (15–25 minutes).
 * Asynchronous, so a build does not block the test worker past vitest's RPC timeout.
 */
export async function llamaServerBinary(): Promise<string> {
  const script = fileURLToPath(new URL("../../scripts/build-llama-server.sh", import.meta.url));
  const { stdout } = await promisify(execFile)("bash", [script], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout.trim();
}

/** A free loopback port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Options of {@link startLlamaServer}. */
export interface LlamaServerProcessOptions {
  readonly modelPath: string;
  /** Default: a free port. */
  readonly port?: number;
  /** Slots (`--parallel`). Default 1. */
  readonly parallel?: number;
  /** Context per slot. Default 2048. */
  readonly slotContext?: number;
  /** CPU threads. Default 2. */
  readonly threads?: number;
  /** Extra arguments, e.g. `["--lora", path]`. */
  readonly args?: readonly string[];
}

/** A running llama-server. */
export interface LlamaServerProcess {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** Sends `signal` (default SIGKILL) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts llama-server on `modelPath` and waits until `/health` answers 200 (the model is loaded).
 * Decode calls as the embedded engine's (batch and micro-batch 1024), flash attention as it
 * chooses on the CPU (auto), f16 KV cache: the defaults of both.
 * @throws when it exits or is not healthy within 120 s.
 */
export async function startLlamaServer(
  options: LlamaServerProcessOptions,
): Promise<LlamaServerProcess> {
  const binary = await llamaServerBinary();
  const port = options.port ?? (await freePort());
  const parallel = options.parallel ?? 1;
  const child = spawnOwned(
    binary,
    [
      "-m",
      options.modelPath,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--parallel",
      String(parallel),
      "-c",
      String((options.slotContext ?? 2048) * parallel),
      "-t",
      String(options.threads ?? 2),
      "-b",
      "1024",
      "-ub",
      "1024",
      "--no-webui",
      ...(options.args ?? []),
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    log = (log + chunk.toString("utf8")).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const until = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`llama-server exited: ${log}`);
    try {
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
      if (response.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > until) {
      child.kill("SIGKILL");
      throw new Error(`llama-server did not become healthy: ${log}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    port,
    child,
    async kill(signal: NodeJS.Signals = "SIGKILL") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
