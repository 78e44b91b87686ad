import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { gpuIsUsable } from "../src/engine/llama/index.js";
import { spawnOwned } from "./support/cleanup.js";

/**
 * Issue 31, item 4: `decisiond serve` with the default model stays at or under 600 MiB resident at
 * idle, on this CPU-only machine; and a GPU backend without a device (node-llama-cpp's report on a
 * CPU-only machine with a Vulkan loader) is not taken for a GPU. With a Vulkan loader present for
 * real: set DECISIOND_TEST_VULKAN_LIBS to a folder holding libvulkan.so.1 and a software ICD
 * (e.g. Debian's libvulkan1 and mesa-vulkan-drivers unpacked there with `dpkg -x`) and
 * DECISIOND_TEST_VK_ICD to that ICD's JSON; the second case then runs with them.
 */

const CLI = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));
const LIMIT_MIB = 600;

let child: ChildProcess | undefined;
let home: string | undefined;

afterEach(async () => {
  child?.kill("SIGTERM");
  child = undefined;
  if (home) await rm(home, { recursive: true, force: true });
  home = undefined;
});

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

/** Resident set size of a process in MiB (VmRSS of /proc/PID/status). */
function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

const REFUND = {
  model: "jev-latest",
  state: "I was charged twice for my order",
  questions: { refund: { type: "noul", instructions: "Is a refund requested?" } },
};

/** One choice of 200 described queues: a list read in windows (decision 113). */
const QUEUES = {
  model: "jev-latest",
  state: "My refund has not arrived.",
  questions: {
    queue: {
      type: "choice",
      instructions: "Which queue owns this ticket?",
      criteria: Object.fromEntries(
        Array.from({ length: 200 }, (_, i) => [
          `queue_${i + 1}`,
          `Tickets about product area number ${i + 1}: its invoices, outages and refunds`,
        ]),
      ),
    },
  },
};

/**
 * Starts `decisiond serve` (default model, auth off) and returns its RSS 2 s after answering
 * `body`, with the answer's Server-Timing and the process's id.
 */
async function idleRss(
  extraEnv: Record<string, string> = {},
  body: object = REFUND,
): Promise<{ rss: number; timing: string; pid: number }> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  home = await mkdtemp(join(tmpdir(), "decisiond-memory-"));
  const port = await freePort();
  let stderr = "";
  child = spawnOwned(
    process.execPath,
    [CLI, "serve", "--auth", "off", "--console", "off", "--port", String(port)],
    {
      env: { ...process.env, DECISIOND_HOME: home, ...extraEnv },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  await expect
    .poll(
      async () => {
        if (child?.exitCode !== null) throw new Error(`serve exited: ${stderr}`);
        return fetch(`${url}/healthz`).then(
          (r) => r.status,
          () => 0,
        );
      },
      { timeout: 300_000, interval: 500 },
    )
    .toBe(200);
  const reply = await fetch(`${url}/v1/systemone`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(reply.status).toBe(200);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const rss = rssMiB(child.pid!);
  console.log(`decisiond serve idle RSS: ${rss.toFixed(0)} MiB ${JSON.stringify(extraEnv)}`);
  return { rss, timing: reply.headers.get("server-timing") ?? "", pid: child.pid! };
}

describe("item 4: memory at idle", () => {
  it("a GPU backend with no device or no VRAM is not a GPU", () => {
    expect(gpuIsUsable({ gpu: "vulkan", devices: [], vramTotal: 0 })).toBe(false);
    expect(
      gpuIsUsable({ gpu: "vulkan", devices: ["llvmpipe (LLVM 15.0.6, 256 bits)"], vramTotal: 0 }),
    ).toBe(false);
    expect(gpuIsUsable({ gpu: false, devices: [], vramTotal: 0 })).toBe(false);
    expect(gpuIsUsable({ gpu: "cuda", devices: ["NVIDIA H100"], vramTotal: 80e9 })).toBe(true);
  });

  it(`decisiond serve with the default model: idle RSS ≤ ${LIMIT_MIB} MiB`, async () => {
    expect((await idleRss()).rss).toBeLessThanOrEqual(LIMIT_MIB);
  }, 600_000);

  // The state its windows are written into (about 120 MB here) is a file, removed once loaded.
  it(`after a long option list read in windows: back at ≤ ${LIMIT_MIB} MiB within 30 s`, async () => {
    const { timing, pid } = await idleRss({}, QUEUES);
    expect(Number(/windows;desc=(\d+)/.exec(timing)?.[1])).toBeGreaterThan(1);
    await expect
      .poll(() => rssMiB(pid), { timeout: 30_000, interval: 1000 })
      .toBeLessThanOrEqual(LIMIT_MIB);
  }, 600_000);

  it.runIf(process.env.DECISIOND_TEST_VULKAN_LIBS)(
    `with a Vulkan loader and no GPU: idle RSS ≤ ${LIMIT_MIB} MiB`,
    async () => {
      const libs = process.env.DECISIOND_TEST_VULKAN_LIBS!;
      const { rss } = await idleRss({
        LD_LIBRARY_PATH: `${libs}${process.env.LD_LIBRARY_PATH ? `:${process.env.LD_LIBRARY_PATH}` : ""}`,
        ...(process.env.DECISIOND_TEST_VK_ICD
          ? { VK_ICD_FILENAMES: process.env.DECISIOND_TEST_VK_ICD }
          : {}),
      });
      expect(rss).toBeLessThanOrEqual(LIMIT_MIB);
    },
    600_000,
  );
});
