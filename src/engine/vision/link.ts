import { fork, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { DONE_LINE, type FromWorker, type ToWorker } from "./protocol.js";

/** Marks a reply that stands for the worker's exit. */
const EXITED = "\u0000exited";

/**
 * The vision engine's end of its worker process (./worker.ts): forks it with stdout
 * discarded and stderr read line by line, sends {@link ToWorker} messages over IPC and matches
 * each answer to its request. A score request settles once both its answer and its `DONE_LINE`
 * log line have arrived, so the image-encoding lines of that request are counted before it
 * returns. When the worker exits, every waiting request rejects with the reason.
 */
export class WorkerLink {
  private exited: Error | undefined;
  private closing = false;
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { result?: FromWorker; logDone: boolean; settle: (message: FromWorker) => void }
  >();
  private readyWaiter: ((message: FromWorker) => void) | undefined;

  /**
   * @param worker - a forked ./worker.js with an IPC channel and a piped stderr
   * @param onImageEncoded - called with the milliseconds of each `image slice encoded in N ms` line
   */
  private constructor(
    private readonly worker: ChildProcess,
    private readonly onImageEncoded: (ms: number) => void,
  ) {
    worker.on("message", (message: FromWorker) => this.onMessage(message));
    worker.on("exit", (code, signal) => this.onExit(code, signal));
    const lines = createInterface({ input: worker.stderr! });
    lines.on("line", (line) => this.onLogLine(line));
  }

  /**
   * Forks the worker script.
   * @throws when the worker is not built (see {@link workerScript})
   */
  static start(onImageEncoded: (ms: number) => void): WorkerLink {
    const worker = fork(workerScript(), [], {
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      serialization: "json",
    });
    return new WorkerLink(worker, onImageEncoded);
  }

  /**
   * Sends a message and waits for its answer and for the end of its log lines. An aborted request
   * still runs to its end in the worker (the next one queues behind it); its answer is dropped.
   */
  request(message: ToWorker, signal: AbortSignal | undefined): Promise<FromWorker> {
    if (this.exited) return Promise.reject(this.exited);
    return new Promise<FromWorker>((resolve, reject) => {
      const onAbort = () => reject(signal!.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      const settle = (reply: FromWorker) => {
        signal?.removeEventListener("abort", onAbort);
        if (reply.type === "error" && reply.message === EXITED)
          reject(this.exited ?? new Error("the vision worker exited"));
        else resolve(reply);
      };
      if (message.type === "score") {
        const id = this.nextId++;
        this.pending.set(id, { logDone: false, settle });
        this.worker.send({ ...message, id });
      } else {
        this.readyWaiter = settle;
        this.worker.send(message);
      }
    });
  }

  private onMessage(message: FromWorker): void {
    if (message.type === "ready" || message.id === undefined) {
      const waiter = this.readyWaiter;
      this.readyWaiter = undefined;
      waiter?.(message);
      return;
    }
    const entry = this.pending.get(message.id);
    if (!entry) return;
    entry.result = message;
    this.finish(message.id);
  }

  private onLogLine(line: string): void {
    const encoded = /image slice encoded in (\d+) ms/.exec(line);
    if (encoded) {
      this.onImageEncoded(Number(encoded[1]));
      return;
    }
    if (line.startsWith(DONE_LINE)) {
      const id = Number(line.slice(DONE_LINE.length));
      const entry = this.pending.get(id);
      if (entry) {
        entry.logDone = true;
        this.finish(id);
      }
    }
  }

  /** Settles a request once both its answer and its last log line have arrived. */
  private finish(id: number): void {
    const entry = this.pending.get(id);
    if (!entry?.result || !entry.logDone) return;
    this.pending.delete(id);
    entry.settle(entry.result);
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.exited = new Error(
      `the vision worker exited (${signal ?? `code ${code}`})` +
        (this.closing ? "" : "; restart the service"),
    );
    const failed: FromWorker = { type: "error", message: EXITED };
    for (const [id, entry] of this.pending) {
      this.pending.delete(id);
      entry.settle(failed);
    }
    this.readyWaiter?.(failed);
    this.readyWaiter = undefined;
  }

  /** Asks the worker to exit and waits for it; killed after 10 s. Idempotent. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.worker.once("exit", () => resolve()));
    this.worker.send({ type: "close" } satisfies ToWorker);
    const timer = setTimeout(() => this.worker.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * The worker script: the compiled ./worker.js beside this module, or, when this module
 * runs from its TypeScript source (the tests), the build's copy in dist/ (`npm test` builds first).
 */
function workerScript(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const sibling = join(here, "worker.js");
  if (existsSync(sibling)) return sibling;
  const built = join(here, "..", "..", "..", "dist", "engine", "vision", "worker.js");
  if (existsSync(built)) return built;
  throw new Error(`the vision worker is not built (${built}); run npm run build`);
}
