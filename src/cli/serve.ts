import type { Command } from "commander";
import { composeService, type PassThroughService, type Print } from "../service/build.js";
import { serveOptions, toServeConfig, type ServeFlags } from "./serve-config.js";

/**
 * `decisiond serve`: the HTTP service on a model loaded in-process, or in front of remote engines
 * (`--engine`). The flags become one `ServeConfig` (serve-config.ts), which the composition root
 * (src/service/build.ts) builds the service from; this file reports it and stops it on a signal.
 */

/**
 * Adds `serve`: start the HTTP service on a model, pulling the default model first when it is not
 * cached. Every flag has an environment variable (`DECISIOND_*`), listed in `--help`.
 * @example `registerServeCommand(program); await program.parseAsync(["node", "decisiond", "serve"]);`
 */
export function registerServeCommand(program: Command): void {
  const serve = program.command("serve").description("serve POST /v1/systemone on a local model");
  for (const option of serveOptions()) serve.addOption(option);
  serve.action(async (flags: ServeFlags) => {
    const print: Print = (line) => process.stderr.write(line + "\n");
    const config = toServeConfig(flags); // before any download
    const { service, report } = await composeService(config, print);
    for (const line of report) print(line);
    drainOnSignals(service, config.drainTimeoutMs);
  });
}

/** What {@link drainOnSignals} does to the process; tests pass their own. */
export interface ProcessControl {
  /** Calls `listener` on every `signal` (the process is then not ended by it). */
  on(signal: "SIGINT" | "SIGTERM", listener: () => void): void;
  /** Ends the process with `code`. */
  exit(code: number): void;
  /** Writes a line where `serve` reports (stderr). */
  log(line: string): void;
}

const PROCESS: ProcessControl = {
  on: (signal, listener) => void process.on(signal, listener),
  exit: (code) => process.exit(code),
  log: (line) => void process.stderr.write(line + "\n"),
};

// Why the end of the drain cuts what is in flight: docs/decisions/107-a-drain-cut-is-answered-and-recorded.md
/**
 * Milliseconds at the end of a drain kept for cutting what is still in flight: a quarter of the
 * drain's time-out, at most 1 s.
 */
export function cutReserveMs(drainTimeoutMs: number): number {
  return Math.min(1000, Math.floor(drainTimeoutMs / 4));
}

/**
 * Graceful drain on SIGTERM and SIGINT: stop admitting (503, `/readyz` 503), answer what is in
 * flight, close the service (its store with it), then exit 0 (1 when closing fails).
 * `drainTimeoutMs` is a bound, not a wish: when all but its last {@link cutReserveMs} have
 * elapsed, the decisions still running are cut (each answered 503 `shutting_down` and recorded
 * in the ledger), the service is closed, and the process exits 1; at the bound it exits 1
 * whatever is still running (a Kubernetes grace period ends the same way, less politely). A
 * second signal during the drain cuts what is in flight at once, as its end would, and the
 * process exits 1 once the service is closed; later signals are logged and change nothing.
 * Why: docs/decisions/086-store-faults-and-one-sqlite-server.md
 */
export function drainOnSignals(
  service: Pick<PassThroughService, "drain" | "cut" | "close">,
  drainTimeoutMs: number,
  control: ProcessControl = PROCESS,
): void {
  let stopping = false;
  let forced = false;
  let drainEnded = false;
  const stop = (signal: "SIGINT" | "SIGTERM") => {
    if (stopping) {
      // A second signal while requests drain: what is in flight is cut now (answered 503 and
      // recorded), then the exit. Any later signal changes nothing: the service is closing.
      if (forced || drainEnded) {
        control.log(`decisiond: ${signal}: already stopping`);
        return;
      }
      forced = true;
      control.log(`decisiond: ${signal} during the drain: cutting what is in flight now`);
      void service.cut(cutReserveMs(drainTimeoutMs));
      return;
    }
    stopping = true;
    control.log(`decisiond: ${signal}: draining (up to ${drainTimeoutMs} ms)`);
    const deadline = setTimeout(() => {
      control.log(`decisiond: drain timed out after ${drainTimeoutMs} ms; exiting`);
      control.exit(1);
    }, drainTimeoutMs);
    const reserve = cutReserveMs(drainTimeoutMs);
    const run = async () => {
      const drained = await service.drain(drainTimeoutMs - reserve);
      drainEnded = true;
      if (!drained) {
        control.log(
          `decisiond: requests still in flight after ${drainTimeoutMs - reserve} ms; cutting them (503 shutting_down)`,
        );
        await service.cut(reserve);
      }
      await service.close();
      clearTimeout(deadline);
      control.log("decisiond: stopped");
      control.exit(drained && !forced ? 0 : 1);
    };
    run().catch((error: unknown) => {
      clearTimeout(deadline);
      control.log(`decisiond: error while stopping: ${String(error)}`);
      control.exit(1);
    });
  };
  control.on("SIGINT", () => stop("SIGINT"));
  control.on("SIGTERM", () => stop("SIGTERM"));
}
