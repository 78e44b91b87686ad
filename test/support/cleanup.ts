import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { existsSync } from "node:fs";

/**
 * Tests stop what they start, also when the run is interrupted (issue 47, item 8: a stopped
 * vitest left its worker and two `llama-server` children running under PID 1).
 *
 * - {@link spawnOwned} starts a child that the kernel kills when this process dies, however it
 *   dies (SIGKILL included): `setpriv --pdeathsig SIGKILL` sets it before the program runs, and
 *   the program keeps the pid.
 * - {@link stopOnExit} registers a synchronous stop (a cluster that daemonized, a directory) run
 *   when this process exits, is interrupted (SIGINT, SIGTERM, SIGHUP) or loses vitest, its
 *   parent (the IPC channel of a forked worker closes).
 */

const stops = new Set<() => void>();
let installed = false;

/** Runs every registered stop once; a stop that throws does not keep the others from running. */
function stopAll(): void {
  for (const stop of [...stops]) {
    stops.delete(stop);
    try {
      stop();
    } catch {
      // best effort: the process is going away
    }
  }
}

function install(): void {
  if (installed) return;
  installed = true;
  process.once("exit", stopAll);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const)
    process.once(signal, () => {
      stopAll();
      // Die of the signal as if no one had listened.
      process.kill(process.pid, signal);
    });
  // A forked vitest worker whose parent went away: nothing will stop its children otherwise.
  process.once("disconnect", stopAll);
}

/**
 * Registers `stop` to run (synchronously) when this process exits or is interrupted.
 * @returns a function that unregisters it, for a test that stopped the thing itself
 */
export function stopOnExit(stop: () => void): () => void {
  install();
  stops.add(stop);
  return () => void stops.delete(stop);
}

/** `setpriv`, when this system has it (util-linux; Linux only). */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((path) => existsSync(path));

/**
 * `child_process.spawn` of a child that does not outlive this process: killed by the kernel when
 * this process dies (where `setpriv` exists), and by {@link stopOnExit} on exit or interruption.
 * @example const child = spawnOwned(binary, ["--port", "8081"], { stdio: "ignore" });
 */
export function spawnOwned(
  command: string,
  args: readonly string[],
  options: SpawnOptions = {},
): ChildProcess {
  const child = SETPRIV
    ? spawn(SETPRIV, ["--pdeathsig", "SIGKILL", "--", command, ...args], options)
    : spawn(command, args, options);
  const forget = stopOnExit(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  child.once("exit", forget);
  return child;
}
