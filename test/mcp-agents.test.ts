import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { DEFAULT_REQUEST_TIMEOUT_MSEC } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import { buildApp, type FastifyInstance } from "../src/api/app.js";
import { accountGate } from "../src/api/gate.js";
import { StubModel, stubAnswer } from "./support/stub-model.js";

/**
 * Issue 31, item 8: the agent plugin (`decisiond mcp`, the real command over stdio) under the way
 * agents call it, against decisiond's real HTTP stack with auth on (one request in flight per
 * account) and a stand-in model whose calls take as long as the test says.
 */

const CLI = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));

let home: string;
let store: AccountStore;
let app: FastifyInstance;
let model: StubModel;
let env: Record<string, string>;
let client: Client;

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  home = await mkdtemp(join(tmpdir(), "decisiond-mcp-agents-"));
  store = SqliteStore.open(join(home, "decisiond.db"));
  const key = (await store.createKey("agent")).key;
  model = new StubModel();
  app = await buildApp({
    models: [model],
    gate: accountGate(new Admission(store)),
    logger: false,
  });
  const port = Number(new URL(await app.listen({ host: "127.0.0.1", port: 0 })).port);
  env = {
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    SERVICE_BASE_URL: `http://127.0.0.1:${port}`,
    SERVICE_API_KEY: key,
    DECISIOND_MODEL: "stub-1",
    DECISIOND_MCP_PROGRESS_MS: "200",
  };
});

afterEach(async () => {
  await client?.close();
});

afterAll(async () => {
  await app?.close();
  await store?.close();
  await rm(home, { recursive: true, force: true });
});

async function connect(): Promise<Client> {
  client = new Client({ name: "agent-test", version: "0.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [CLI, "mcp"],
      env,
      stderr: "pipe",
    }),
  );
  return client;
}

/** The model takes `ms` per call, or until its signal aborts. */
function slowModel(ms: number): { aborted: () => number } {
  let aborted = 0;
  model.impl = (request, signal) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve(stubAnswer(request)), ms);
      signal?.addEventListener("abort", () => {
        aborted++;
        clearTimeout(timer);
        reject(signal.reason);
      });
    });
  return { aborted: () => aborted };
}

const call = (id: string) => ({
  name: "decide",
  arguments: {
    state: `ticket ${id}`,
    questions: { [id]: { type: "noul", instructions: "Refund?" } },
  },
});

describe("item 8: decisiond mcp under an agent", () => {
  it("three parallel decide calls through one decisiond mcp all succeed, one at a time", async () => {
    slowModel(300);
    model.maxInFlight = 0;
    const mcp = await connect();
    const results = (await Promise.all(
      ["a", "b", "c"].map((id) => mcp.callTool(call(id))),
    )) as CallToolResult[];
    for (const [i, result] of results.entries()) {
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      expect(Object.keys((result.structuredContent as { answers: object }).answers)).toEqual([
        ["a", "b", "c"][i],
      ]);
    }
    expect(model.maxInFlight).toBe(1);
  });

  it("a call longer than the client's request timeout succeeds thanks to progress notifications", async () => {
    slowModel(2500);
    const mcp = await connect();
    const progress: number[] = [];
    // A client on a 1 s timeout that resets it on progress, as MCP clients do with the default
    // 60 s (the 120 s call, scaled down).
    const result = (await mcp.callTool(call("long"), undefined, {
      timeout: 1000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => progress.push(p.progress),
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(progress.length).toBeGreaterThanOrEqual(5);
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
    // Without progress the same call times out.
    await expect(mcp.callTool(call("long"), undefined, { timeout: 1000 })).rejects.toThrow(
      /timed out|timeout/i,
    );
  });

  it("a 120 s call succeeds on the client's default request timeout, reset by progress", async () => {
    // The case at full length: twice the MCP SDK's default request timeout.
    expect(DEFAULT_REQUEST_TIMEOUT_MSEC).toBe(60_000);
    slowModel(120_000);
    const mcp = await connect();
    let notifications = 0;
    const started = Date.now();
    const result = (await mcp.callTool(call("slow"), undefined, {
      resetTimeoutOnProgress: true,
      onprogress: () => notifications++,
    })) as CallToolResult;
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    expect(Date.now() - started).toBeGreaterThanOrEqual(120_000);
    expect(notifications).toBeGreaterThan(0);
  }, 200_000);

  it("a cancelled call aborts its HTTP request, and decisiond cancels the model's work", async () => {
    const model$ = slowModel(10_000);
    const mcp = await connect();
    const controller = new AbortController();
    const pending = mcp.callTool(call("gone"), undefined, { signal: controller.signal });
    await expect.poll(() => model.inFlight, { timeout: 10_000 }).toBe(1);
    controller.abort("the agent changed its mind");
    await expect(pending).rejects.toThrow();
    await expect.poll(() => model$.aborted(), { timeout: 10_000 }).toBe(1);
    await expect.poll(() => model.inFlight, { timeout: 10_000 }).toBe(0);
    // The plugin is free for the next call at once.
    slowModel(10);
    const next = (await mcp.callTool(call("next"))) as CallToolResult;
    expect(next.isError).toBeFalsy();
  });
});
