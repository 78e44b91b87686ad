import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

/**
 * Issue 47, item 8: a test process that is stopped, however it is stopped, takes the processes
 * it started with it (test/support/cleanup.ts). The process under test is
 * test/fixtures/owned-child.ts, run with vite-node.
 */

let dir: string | undefined;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Whether `pid` runs (a zombie waiting for its reaper does not). */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]![0] !== "Z";
  } catch {
    return false;
  }
}

/** Starts the fixture; resolves with it, the pid of the child it owns, and its marker file. */
async function owner() {
  dir = await mkdtemp(join(tmpdir(), "decisiond-owned-"));
  const marker = join(dir, "stopped");
  const parent = spawn(
    process.execPath,
    [join("node_modules", "vite-node", "vite-node.mjs"), "test/fixtures/owned-child.ts"],
    { env: { ...process.env, OWNED_CHILD_MARKER: marker }, stdio: ["ignore", "pipe", "inherit"] },
  );
  const pid = await new Promise<number>((resolve, reject) => {
    let out = "";
    parent.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /child (\d+)/.exec(out);
      if (match) resolve(Number(match[1]));
    });
    parent.once("exit", (code) => reject(new Error(`the fixture exited (${code}): ${out}`)));
  });
  expect(running(pid)).toBe(true);
  return { parent, pid, marker };
}

describe("tests stop what they start", () => {
  for (const signal of ["SIGKILL", "SIGTERM", "SIGINT"] as const)
    it(`a child dies with its test process when that gets ${signal}`, async () => {
      const { parent, pid, marker } = await owner();
      parent.kill(signal);
      await expect.poll(() => running(pid), { timeout: 5000, interval: 50 }).toBe(false);
      // The registered stops run on a signal that can be caught.
      if (signal !== "SIGKILL") expect(existsSync(marker)).toBe(true);
    }, 60_000);
});
