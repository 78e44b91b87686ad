import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { buildApp, MAX_REQUESTS_PER_SOCKET, type FastifyInstance } from "../src/api/app.js";
import { connectionCap, FD_HEADROOM } from "../src/api/connection-cap.js";
import { StubModel } from "./support/stub-model.js";

/**
 * Bounds on what clients can hold (src/api/connection-cap.ts, `maxRequestsPerSocket` in
 * src/api/app.ts), on the real HTTP stack with a stand-in model: an outside probe held 20,000
 * idle keep-alive connections until the process ran out of file descriptors, and pipelined
 * 500 requests on each of 80 connections without reading until it grew to 3.1 GiB.
 */

let app: FastifyInstance | undefined;
let port = 0;
const sockets: Socket[] = [];

async function start(maxConnections?: number): Promise<void> {
  app = await buildApp({
    models: [new StubModel()],
    logger: false,
    ...(maxConnections !== undefined ? { maxConnections } : {}),
  });
  port = Number(new URL(await app.listen({ host: "127.0.0.1", port: 0 })).port);
}

/** A connection that has sent one request and read its answer (an idle keep-alive one). */
async function idle(): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  sockets.push(socket);
  socket.on("error", () => {});
  await once(socket, "connect");
  socket.write("GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
  const [chunk] = (await once(socket, "data")) as [Buffer];
  expect(chunk.toString()).toMatch(/^HTTP\/1\.1 200/);
  return socket;
}

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await app?.close();
  app = undefined;
});

describe("the connection cap", () => {
  it("is the open-file limit less a headroom, at least half of it", () => {
    const limits = (soft: string) =>
      `Limit                     Soft Limit           Hard Limit           Units\nMax open files            ${soft}                 524288               files\n`;
    expect(connectionCap(limits("20000"))).toBe(20000 - FD_HEADROOM);
    expect(connectionCap(limits("1024"))).toBe(1024 - FD_HEADROOM);
    expect(connectionCap(limits("256"))).toBe(128);
    expect(connectionCap(limits("unlimited"))).toBeUndefined();
    expect(connectionCap("")).toBeUndefined();
  });

  it("closes a connection past it as it opens, and takes more once one has gone", async () => {
    await start(3);
    const held = [await idle(), await idle(), await idle()];
    const refused = connect(port, "127.0.0.1");
    sockets.push(refused);
    refused.on("error", () => {});
    await once(refused, "close");
    held[0]!.destroy();
    await once(held[0]!, "close");
    await expect
      .poll(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status)
      .toBe(200);
  });
});

describe("requests pipelined on one connection", () => {
  it("are answered up to the cap, the rest with a short 503, then the connection is closed", async () => {
    await start();
    // A client that keeps its own side open: the server closes the connection all the same.
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    sockets.push(socket);
    socket.on("error", () => {});
    await once(socket, "connect");
    const count = MAX_REQUESTS_PER_SOCKET + 20;
    socket.write("GET /openapi.json HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".repeat(count));
    let text = "";
    socket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")));
    const ended = once(socket, "end");
    const statuses = () => [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    await expect.poll(() => statuses().length, { timeout: 30_000 }).toBe(count);
    expect(statuses().filter((s) => s === "200")).toHaveLength(MAX_REQUESTS_PER_SOCKET);
    expect(
      statuses()
        .slice(MAX_REQUESTS_PER_SOCKET)
        .every((s) => s === "503"),
    ).toBe(true);
    // The last answer served says the connection closes, and the server closes it after the
    // 503s (Node held it to the keep-alive timeout, 72 s, past this test's bound).
    expect(text.split("HTTP/1.1 200").at(-1)).toMatch(/connection: close/i);
    const open = () =>
      new Promise<number>((resolve) => app!.server.getConnections((_, n) => resolve(n)));
    await expect.poll(open, { timeout: 30_000 }).toBe(0);
    await ended;
    expect(statuses()).toHaveLength(count);
  });

  /** Pipelines `requests` on a new connection; resolves with the statuses once `count` came. */
  async function pipelined(requests: string, count: number): Promise<string> {
    const socket = connect({ port, host: "127.0.0.1" });
    sockets.push(socket);
    socket.on("error", () => {});
    await once(socket, "connect");
    socket.write(requests);
    let text = "";
    socket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")));
    await expect
      .poll(() => [...text.matchAll(/HTTP\/1\.\d (\d{3})/g)].length, { timeout: 30_000 })
      .toBe(count);
    return text;
  }
  const open = () =>
    new Promise<number>((resolve) => app!.server.getConnections((_, n) => resolve(n)));

  it("closes an HTTP/1.0 keep-alive connection after its last answer too", async () => {
    await start();
    // Node caps no HTTP/1.0 connection: without this, pipelined requests pile up unanswered.
    const request = "GET /healthz HTTP/1.0\r\nhost: 127.0.0.1\r\nconnection: keep-alive\r\n\r\n";
    const text = await pipelined(
      request.repeat(MAX_REQUESTS_PER_SOCKET + 8),
      MAX_REQUESTS_PER_SOCKET,
    );
    const answers = text.split(/(?=HTTP\/1\.1 )/);
    expect(answers.slice(0, -1).every((a) => /connection: keep-alive/i.test(a))).toBe(true);
    expect(answers.at(-1)).toMatch(/^HTTP\/1\.1 200[^]*connection: close/i);
    await expect.poll(open, { timeout: 30_000 }).toBe(0);
  });

  it("counts a request Node answers 417 itself, and closes after the last one", async () => {
    await start();
    const odd = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nexpect: tea\r\n\r\n";
    const plain = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";
    const text = await pipelined(
      odd + plain.repeat(MAX_REQUESTS_PER_SOCKET - 1),
      MAX_REQUESTS_PER_SOCKET,
    );
    expect(text).toMatch(/^HTTP\/1\.1 417/);
    expect(text.split("HTTP/1.1 200").at(-1)).toMatch(/connection: close/i);
    await expect.poll(open, { timeout: 30_000 }).toBe(0);
  });
});
