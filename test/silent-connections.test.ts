import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { buildApp, type AppOptions, type FastifyInstance } from "../src/api/app.js";
import { StubModel } from "./support/stub-model.js";

/**
 * Connections that send nothing (src/api/silent-connections.ts), on the real HTTP stack with a
 * stand-in model: an outside probe held 20,000 of them until every other client was refused,
 * and one of them held a drain for its whole timeout.
 */

let app: FastifyInstance | undefined;
let port = 0;
const sockets: Socket[] = [];

async function start(options: Partial<AppOptions> = {}): Promise<FastifyInstance> {
  app = await buildApp({ models: [new StubModel()], logger: false, ...options });
  port = Number(new URL(await app.listen({ host: "127.0.0.1", port: 0 })).port);
  return app;
}

/** A connection that sends nothing, once it is open. */
async function silent(): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  sockets.push(socket);
  socket.on("error", () => {}); // a reset by the server is what some tests expect
  await once(socket, "connect");
  return socket;
}

/** Resolves when the server has closed `socket` (it ends or resets), to "closed". */
const closed = (socket: Socket) =>
  new Promise<"closed">((resolve) => {
    if (socket.destroyed) resolve("closed");
    socket.once("close", () => resolve("closed"));
  });

/** Resolves to "waiting" after `ms` milliseconds: the other side of a race that must not win. */
const after = (ms: number) =>
  new Promise<"waiting">((resolve) => setTimeout(() => resolve("waiting"), ms).unref());

/** GET /healthz on a fresh connection: its status, or the error that stopped it. */
async function health(): Promise<number | string> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/healthz`);
    return response.status;
  } catch (error) {
    return String((error as Error).cause ?? error);
  }
}

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await app?.close();
  app = undefined;
});

describe("connections that send nothing", () => {
  it("are answered 408 and closed once the request timeout has passed", async () => {
    await start({ requestTimeoutMs: 300 });
    const socket = await silent();
    const replies: string[] = [];
    socket.on("data", (chunk: Buffer) => replies.push(chunk.toString()));
    expect(await Promise.race([closed(socket), after(10_000)])).toBe("closed");
    expect(replies.join("")).toMatch(/^HTTP\/1\.1 408 [\s\S]*"request_timeout"/);
    expect(await health()).toBe(200);
  });

  it("beyond the bound for one address close the oldest: a client behind a flood gets in", async () => {
    await start({ silentConnectionsPerAddress: 3 });
    const held = [await silent(), await silent(), await silent()];
    // A fourth from the same address (a client behind the same NAT) closes the oldest.
    const fourth = await silent();
    expect(await Promise.race([closed(held[0]!), after(10_000)])).toBe("closed");
    for (const socket of [...held.slice(1), fourth]) expect(socket.destroyed).toBe(false);
    fourth.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    const [reply] = (await once(fourth, "data")) as [Buffer];
    expect(reply.toString()).toMatch(/^HTTP\/1\.1 200 /);
    // A flood that keeps opening cannot keep a client out: each new connection is answered.
    for (let i = 0; i < 5; i++) {
      await silent();
      expect(await health()).toBe(200);
    }
    // The ones that went on sending nothing were closed, oldest first; at most three are held.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const open = sockets.filter((socket) => !socket.destroyed && socket !== fourth);
    expect(open.length).toBeLessThanOrEqual(3);
  });

  it("do not hold the app's close", async () => {
    const served = await start(); // the default request timeout: 30 s
    const socket = await silent();
    expect(await Promise.race([served.close().then(() => "closed"), after(10_000)])).toBe("closed");
    app = undefined;
    expect(await Promise.race([closed(socket), after(1_000)])).toBe("closed");
  });
});
