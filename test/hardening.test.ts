import { mkdtemp, rm } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import { buildApp, type AppOptions, type FastifyInstance } from "../src/api/app.js";
import { accountGate } from "../src/api/gate.js";
import { postJson } from "./support/service.js";
import { StubModel } from "./support/stub-model.js";
import { consoleMount } from "../src/console/plugin.js";

/**
 * Issue 31 (hardening): what an outside probe broke, on the real HTTP stack (Fastify on a loopback
 * port, the real accounts store and gate) with a stand-in model.
 */

let home: string;
let store: AccountStore;
let model: StubModel;
let app: FastifyInstance;
let url: string;
let logs: string[];
let key: string;

async function start(options: Partial<AppOptions> & { waitMs?: number } = {}): Promise<void> {
  logs = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      logs.push(chunk.toString());
      callback();
    },
  });
  const { waitMs, ...rest } = options;
  app = await buildApp({
    models: [model],
    gate: accountGate(new Admission(store, { waitMs: waitMs ?? 0 })),
    logger: { level: "info", stream },
    mounts: [consoleMount({ store, adminToken: undefined })],
    ...rest,
  });
  url = await app.listen({ host: "127.0.0.1", port: 0 });
}

beforeEach(async () => {
  home = await mkdtemp(join(tmpdir(), "decisiond-harden-"));
  store = SqliteStore.open(join(home, "decisiond.db"));
  key = (await store.createKey("team-a")).key;
  model = new StubModel();
});

afterEach(async () => {
  await app?.close();
  await store.close();
  await rm(home, { recursive: true, force: true });
});

const REQUEST = {
  model: "stub-1",
  state: { ticket: "I was charged twice" },
  questions: {
    refund: { type: "noul", instructions: "Does the customer want a refund?" },
    team: {
      type: "choice",
      instructions: "Which team?",
      criteria: { billing: null, tech: "bugs" },
    },
    urgency: { type: "score", instructions: "How urgent?", criteria: ["low", "high"] },
  },
};

function post(
  body: unknown = REQUEST,
  headers: Record<string, string> = {},
  path = "/v1/systemone",
) {
  return postJson(`${url}${path}`, body, { authorization: `Bearer ${key}`, ...headers });
}

/**
 * Sends headers announcing `declaredLength` bytes and only the first bytes of the body, and
 * resolves with the status of the reply, which must come while the body is still incomplete.
 */
function partialPost(
  path: string,
  headers: Record<string, string>,
  firstBytes: Buffer,
  declaredLength: number,
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, {
      method: "POST",
      headers: { ...headers, "content-length": String(declaredLength) },
    });
    req.on("response", (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode!, body: JSON.parse(text) });
      });
    });
    req.on("error", reject);
    req.write(firstBytes); // and never the rest
  });
}

/** A zstd frame whose header declares a 1.875 GiB window, followed by `blocks` 1-byte RLE blocks. */
function zstdWindowBomb(blocks: number): Buffer {
  const parts = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, (20 << 3) | 7])];
  for (let i = 0; i < blocks; i++) {
    const header = (1 << 3) | (1 << 1) | (i === blocks - 1 ? 1 : 0); // RLE, 1 byte
    parts.push(Buffer.from([header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff, 0x20]));
  }
  return Buffer.concat(parts);
}

describe("item 1: compressed bodies and bodies that are never read", () => {
  it("a 70-byte zstd frame declaring a 1.9 GiB window is refused before it is allocated", async () => {
    await start();
    const bomb = zstdWindowBomb(16);
    expect(bomb.length).toBe(70);
    const before = process.memoryUsage().rss;
    const reply = await post(bomb, { "content-encoding": "zstd" });
    const grown = process.memoryUsage().rss - before;
    expect(reply.status).toBe(400);
    expect(reply.body.detail.error_type).toBe("invalid_body_encoding");
    expect(reply.body.detail.message).toMatch(/window/);
    expect(grown).toBeLessThan(256 * 1024 * 1024);
    expect(model.entered).toBe(0);
  });

  it("a frame that declares more content than the body limit gets 413; one with too many blocks 400", async () => {
    await start({ bodyLimit: 64 * 1024 });
    // Single segment, 4-byte content size of 1 MiB.
    const declared = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0, 0, 0x10, 0, 0x01, 0, 0, 0x20]);
    const big = await post(declared, { "content-encoding": "zstd" });
    expect(big.status).toBe(413);
    expect(big.body.detail.error_type).toBe("request_too_large");
    // 1 KiB window, thousands of empty raw blocks.
    const parts = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00])];
    for (let i = 0; i < 5000; i++) parts.push(Buffer.from([0, 0, 0]));
    parts.push(Buffer.from([1, 0, 0]));
    const many = await post(Buffer.concat(parts), { "content-encoding": "zstd" });
    expect(many.status).toBe(400);
    expect(many.body.detail.message).toMatch(/blocks/);
  });

  it("a console route refuses a request without a credential before reading its body", async () => {
    await start();
    const reply = await partialPost(
      "/console/api/keys",
      { "content-type": "application/json", "content-encoding": "zstd" },
      zstdWindowBomb(4),
      10_000_000,
    );
    expect(reply.status).toBe(401);
    expect(reply.body.detail.error_type).toBe("authentication_error");
  });

  it("an unknown route answers 404 without reading its body", async () => {
    await start();
    const reply = await partialPost(
      "/no/such/route",
      { "content-type": "application/json", "content-encoding": "zstd" },
      zstdWindowBomb(4),
      10_000_000,
    );
    expect(reply.status).toBe(404);
    expect(reply.body.detail.error_type).toBe("not_found");
  });

  it("a served path asked with another method answers 405 naming the methods it takes", async () => {
    await start();
    const get = await fetch(`${url}/v1/systemone?x=1`);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    const body = (await get.json()) as { detail: { error_type: string; message: string } };
    expect(body.detail).toMatchObject({
      error_type: "method_not_allowed",
      message: "GET is not served at /v1/systemone: it takes POST",
    });
    const post = await fetch(`${url}/healthz`, { method: "POST", body: "{}" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    expect((await fetch(`${url}/v1/decisions`, { method: "DELETE" })).status).toBe(405);
    // A CORS preflight the server does not take, and a path it does not serve: 404.
    expect((await fetch(`${url}/v1/systemone`, { method: "OPTIONS" })).status).toBe(404);
    expect((await fetch(`${url}/v1/nothing`)).status).toBe(404);
    expect((await fetch(`${url}/v1/nothing`, { method: "POST", body: "{}" })).status).toBe(404);
    expect((await fetch(`${url}/*/q/Y/c`, { method: "HEAD" })).status).toBe(404);
  });
});

/** JSON text of a value nested `depth` arrays deep around a string. */
function nested(depth: number): string {
  return "[".repeat(depth) + '"x"' + "]".repeat(depth);
}

/** REQUEST as JSON text with `state` replaced by JSON text (JSON.stringify cannot nest 10,000 deep). */
function withState(state: string, extra = ""): string {
  return JSON.stringify(REQUEST)
    .replace('{"model"', `{${extra}"model"`)
    .replace('{"ticket":"I was charged twice"}', state);
}

describe("items 3 and 7: deep nesting, Infinity and __proto__ are refused with a 422 where they are", () => {
  it("a state or instructions 10,000 deep gets 422 too_deep at its loc, not 500", async () => {
    await start();
    const deepState = await post(withState(nested(10_000)));
    expect(deepState.status).toBe(422);
    expect(deepState.body.detail[0].type).toBe("too_deep");
    expect(deepState.body.detail[0].loc.slice(0, 3)).toEqual(["body", "state", 0]);
    const deepInstructions = await post(
      `{"model":"stub-1","state":"s","questions":{"refund":{"type":"noul","instructions":{"why":${nested(10_000)}}}}}`,
    );
    expect(deepInstructions.status).toBe(422);
    expect(deepInstructions.body.detail[0].loc.slice(0, 5)).toEqual([
      "body",
      "questions",
      "refund",
      "instructions",
      "why",
    ]);
    // With an unknown field the body skips the fast check and goes to zod: same answer.
    const viaZod = await post(withState(nested(10_000), '"extra":1,'));
    expect(viaZod.status).toBe(422);
    expect(viaZod.body.detail[0].type).toBe("too_deep");
    expect(model.entered).toBe(0);
    // 60 deep is fine.
    expect((await post(withState(nested(60)))).status).toBe(200);
  });

  it("1e999999 (Infinity) gets 422 from both validators", async () => {
    await start();
    const raw = JSON.stringify(REQUEST).replace('"I was charged twice"', "1e999999");
    const fast = await post(raw);
    expect(fast.status).toBe(422);
    expect(fast.body.detail[0]).toMatchObject({
      loc: ["body", "state", "ticket"],
      type: "finite_number",
    });
    const viaZod = await post(raw.replace('{"model"', '{"extra": 1, "model"'));
    expect(viaZod.status).toBe(422);
    expect(viaZod.body.detail[0].loc).toEqual(["body", "state", "ticket"]);
    expect(model.entered).toBe(0);
  });

  it("__proto__ as a question or option id is refused with 422, never dropped", async () => {
    await start();
    const question = await post(
      '{"model":"stub-1","state":"s","questions":{"ok":{"type":"noul","instructions":"q?"},"__proto__":{"type":"noul","instructions":"dropped?"}}}',
    );
    expect(question.status).toBe(422);
    expect(question.body.detail[0].loc).toEqual(["body", "questions", "__proto__"]);
    const option = await post(
      '{"model":"stub-1","state":"s","extra":1,"questions":{"team":{"type":"choice","criteria":{"a":null,"b":null,"__proto__":"c"}}}}',
    );
    expect(option.status).toBe(422);
    expect(option.body.detail[0].loc).toEqual([
      "body",
      "questions",
      "team",
      "criteria",
      "__proto__",
    ]);
    expect(model.entered).toBe(0);
  });
});

describe("item 11: conformance of error shapes and score levels", () => {
  it("invalid JSON gets 422 with detail[] (json_invalid at the offset), not 400", async () => {
    await start();
    const reply = await post('{"model": "stub-1",\n "state": [1,, 2]}');
    expect(reply.status).toBe(422);
    // Node 20's JSON.parse names no position for this error; its excerpt says where.
    expect(reply.body.detail).toEqual([
      { loc: ["body"], msg: expect.stringMatching(/\[1,, 2\]/), type: "json_invalid" },
    ]);
    const truncated = await post('{"model": "stub-1"');
    expect(truncated.body.detail).toEqual([
      { loc: ["body", 18], msg: expect.stringMatching(/end of the body/), type: "json_invalid" },
    ]);
  });

  it("a null score level is accepted; an object level comes back in legend as the object", async () => {
    await start();
    const levels = ["Calm", null, { label: "Furious", note: "shouting" }];
    const reply = await post({
      ...REQUEST,
      questions: { anger: { type: "score", instructions: "How angry?", criteria: levels } },
    });
    expect(reply.status).toBe(200);
    expect(reply.body.answers.anger.legend).toEqual({
      "0": "Calm",
      "1": "",
      "2": { label: "Furious", note: "shouting" },
    });
    // Through zod (an unknown field) too.
    const viaZod = await post({
      ...REQUEST,
      extra: true,
      questions: { anger: { type: "score", criteria: levels } },
    });
    expect(viaZod.status).toBe(200);
  });
});

describe("content types and encodings found by the fuzz suite", () => {
  it("a charset parameter on application/json is accepted", async () => {
    await start();
    for (const type of [
      "application/json; charset=utf-8",
      "application/json;charset=UTF-8",
      "Application/JSON",
    ]) {
      const reply = await post(JSON.stringify(REQUEST), { "content-type": type });
      expect({ type, status: reply.status }).toEqual({ type, status: 200 });
    }
  });

  it("a charset other than UTF-8 gets 415 naming it; a UTF-8 byte order mark is ignored", async () => {
    await start();
    const utf16 = await post(Buffer.from(`\uFEFF${JSON.stringify(REQUEST)}`, "utf16le"), {
      "content-type": "application/json; charset=utf-16",
    });
    expect(utf16.status).toBe(415);
    expect(utf16.body.detail.error_type).toBe("unsupported_media_type");
    expect(utf16.body.detail.message).toMatch(/UTF-8.*charset=utf-16/);
    const latin1 = await post(Buffer.from(JSON.stringify(REQUEST), "latin1"), {
      "content-type": "application/json; charset=ISO-8859-1",
    });
    expect(latin1.status).toBe(415);
    const bom = await post(`\uFEFF${JSON.stringify(REQUEST)}`, {
      "content-type": "application/json",
    });
    expect(bom.status).toBe(200);
  });

  it("bytes that are not UTF-8 get 422 json_invalid naming the byte, not U+FFFD", async () => {
    await start();
    const text = JSON.stringify({ ...REQUEST, state: "caf#" });
    const at = Buffer.byteLength(text.slice(0, text.indexOf("#")));
    const bytes = Buffer.from(text, "utf8");
    bytes[at] = 0xff;
    const reply = await post(bytes, { "content-type": "application/json" });
    expect(reply.status).toBe(422);
    expect(reply.body.detail).toEqual([
      { loc: ["body"], msg: expect.stringContaining(`byte ${at} (0xFF)`), type: "json_invalid" },
    ]);
    expect(model.entered).toBe(0);
    // Two names that would both read U+FFFD are the same fault, not a name given twice.
    const names = Buffer.from('{"model":"stub-1","state":{"#":1,"#":2}}', "latin1");
    names[names.indexOf("#")] = 0xff;
    names[names.lastIndexOf("#")] = 0xfe;
    const twice = await post(names, { "content-type": "application/json" });
    expect(twice.body.detail[0]).toMatchObject({
      type: "json_invalid",
      msg: expect.stringContaining("(0xFF) begins no character"),
    });
    // The same text in UTF-8, an accent included, is answered.
    const ok = await post(Buffer.from(text.replace("#", "\u00e9"), "utf8"), {
      "content-type": "application/json",
    });
    expect(ok.status).toBe(200);
  });

  it("an image given as a URL is refused saying that nothing is fetched", async () => {
    await start();
    for (const url of ["https://example.com/a.png", "file:///etc/passwd"]) {
      const reply = await post({ ...REQUEST, images: [url] });
      expect(reply.status).toBe(422);
      expect(reply.body.detail[0]).toMatchObject({
        loc: ["body", "images", 0],
        msg: expect.stringContaining("decisiond fetches nothing"),
      });
    }
    const other = await post({ ...REQUEST, images: ["iVBORw0KGgo="] });
    expect(other.body.detail[0].msg).toMatch(/^Input should be a base64 data URL/);
  });

  it("a corrupt compressed body with a content type no route parses gets 415, and the server stays up", async () => {
    await start();
    for (const encoding of ["gzip", "zstd", "br", "deflate"]) {
      const reply = await post(Buffer.from("definitely not compressed"), {
        "content-type": "text/plain",
        "content-encoding": encoding,
      });
      expect({ encoding, status: reply.status }).toEqual({ encoding, status: 415 });
    }
    expect((await post()).status).toBe(200);
  });
});

/** Resolves when `signal` aborts. */
function aborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (!signal) return;
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

describe("item 5: overload, deadlines and hang-ups", () => {
  it("a full queue answers 503 overloaded with Retry-After; the queue frees as work ends", async () => {
    await start({ queue: { capacity: 2, deadlineMs: 0 } });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    model.impl = async (request) => {
      await held;
      return (await import("./support/stub-model.js")).stubAnswer(request);
    };
    const keyB = (await store.createKey("team-b")).key;
    const first = post();
    const second = postJson(`${url}/v1/systemone`, REQUEST, { authorization: `Bearer ${keyB}` });
    await expect.poll(() => model.inFlight).toBe(2);
    // Past a typical decision (1 s before any has been answered): about as long again as they ran.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const keyC = (await store.createKey("team-c")).key;
    const third = await postJson(`${url}/v1/systemone`, REQUEST, {
      authorization: `Bearer ${keyC}`,
    });
    expect(third.status).toBe(503);
    expect(third.body.detail.error_type).toBe("overloaded");
    expect(third.body.detail.message).toMatch(
      /at its limit of requests in progress \(2\); retry in about [3-9] s/,
    );
    expect(third.headers.get("retry-after")).toMatch(/^[3-9]$/);
    expect(Number(third.headers.get("retry-after-ms"))).toBeGreaterThanOrEqual(2500);
    expect(model.entered).toBe(2);
    release();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect(
      (await postJson(`${url}/v1/systemone`, REQUEST, { authorization: `Bearer ${keyC}` })).status,
    ).toBe(200);
  });

  it("past its deadline a request gets 503 deadline_exceeded and the engine's signal aborts", async () => {
    await start({ queue: { deadlineMs: 300 } });
    let seen: AbortSignal | undefined;
    model.impl = async (_request, signal) => {
      seen = signal;
      await aborted(signal);
      throw signal!.reason;
    };
    const reply = await post();
    expect(reply.status).toBe(503);
    expect(reply.body.detail.error_type).toBe("deadline_exceeded");
    expect(seen?.aborted).toBe(true);
    expect(logs.join("")).not.toMatch(/internal fault/);
  });

  it("a client hang-up aborts the engine's signal and is logged at info, not as an internal fault", async () => {
    await start();
    let seen: AbortSignal | undefined;
    model.impl = async (_request, signal) => {
      seen = signal;
      await aborted(signal);
      throw signal!.reason;
    };
    const controller = new AbortController();
    const gone = fetch(`${url}/v1/systemone`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify(REQUEST),
      signal: controller.signal,
    }).catch(() => "aborted");
    await expect.poll(() => model.inFlight).toBe(1);
    controller.abort();
    expect(await gone).toBe("aborted");
    await expect.poll(() => seen?.aborted).toBe(true);
    await expect.poll(() => model.inFlight).toBe(0);
    const lines = logs.map((l) => JSON.parse(l));
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    expect(lines.find((l) => /closed the connection/.test(l.msg))).toMatchObject({ level: 30 });
    await expect
      .poll(async () => (await store.calls("team-a")).map((c) => c.status))
      .toEqual([499]);
  });
});

describe("item 6: slow bodies time out and hold no slot", () => {
  /** The metrics count one 408 request_timeout, and no 499: not as a client that left. */
  async function expectCountedAs408() {
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(
      /decisiond_requests_total\{route="\/v1\/systemone",status="408",error_type="request_timeout"\} 1/,
    );
    expect(metrics).not.toMatch(/status="499"/);
  }

  it("a body that never completes gets 408 at the request timeout, and the account's slot stays free", async () => {
    await start({ requestTimeoutMs: 1000 });
    const slow = partialPost(
      "/v1/systemone",
      { "content-type": "application/json", authorization: `Bearer ${key}` },
      Buffer.from('{"model": "stub-1", "state": "'),
      100_000,
    ).catch((error: Error) => ({ status: 0, body: error.message }));
    // While the upload hangs, the same account is answered: no slot was taken for it.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await post()).status).toBe(200);
    const reply = await slow;
    expect(reply.status).toBe(408);
    expect(reply.body.detail.error_type).toBe("request_timeout");
    expect(model.entered).toBe(1);
    await expectCountedAs408();
  });

  it("a request cut by the body deadline after slow headers is counted as its 408, not a 499", async () => {
    await start({ requestTimeoutMs: 1000 });
    // Node times a request from its first byte, the body deadline from when the body is read; a
    // request Fastify has taken is cut by the body deadline (Node's own check does not answer it).
    const head = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(new URL(url).port), "127.0.0.1");
      let text = "";
      socket.write(`POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
      setTimeout(() => {
        socket.write(
          `Authorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
            `Content-Length: 1000\r\n\r\n{"model": "stub-1", "state": "`,
        );
      }, 700);
      socket.on("data", (chunk: Buffer) => (text += chunk.toString()));
      socket.on("error", reject);
      socket.on("close", () => resolve(text));
    });
    expect(head).toMatch(/^HTTP\/1\.1 408 [\s\S]*"request_timeout"/);
    await expectCountedAs408();
  });

  it("a body trickled a byte at a time gets 408 request_timeout while it is still arriving", async () => {
    await start({ requestTimeoutMs: 1000 });
    const reply = await new Promise<{ head: string; body: any; sent: number }>(
      (resolve, reject) => {
        const socket = connect(Number(new URL(url).port), "127.0.0.1");
        let text = "";
        let sent = 0;
        const body = JSON.stringify(REQUEST);
        socket.write(
          `POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
        );
        // One byte every 100 ms: the whole body would take tens of seconds.
        const trickle = setInterval(() => {
          if (!socket.destroyed && sent < body.length) socket.write(body[sent++]!);
        }, 100);
        socket.on("data", (chunk: Buffer) => (text += chunk.toString()));
        socket.on("error", reject);
        socket.on("close", () => {
          clearInterval(trickle);
          const [head, json] = text.split("\r\n\r\n");
          resolve({ head: head!, body: JSON.parse(json!), sent });
        });
      },
    );
    expect(reply.head).toMatch(/^HTTP\/1\.1 408 /);
    expect(reply.head.toLowerCase()).toContain("connection: close");
    expect(reply.body.detail.error_type).toBe("request_timeout");
    expect(reply.sent).toBeLessThan(JSON.stringify(REQUEST).length);
    expect(model.entered).toBe(0);
    expect((await post()).status).toBe(200);
  });

  it("requests Node's parser refuses are answered in the API's error shape", async () => {
    await start();
    const raw = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(new URL(url).port), "127.0.0.1");
        let got = "";
        socket.on("data", (chunk: Buffer) => (got += chunk.toString()));
        socket.on("error", reject);
        socket.on("close", () => resolve(got));
        socket.write(text);
      });
    const method = await raw("FOO /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    expect(method).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(method.split("\r\n\r\n")[1]!).detail).toMatchObject({
      error_type: "invalid_request",
      message: expect.stringMatching(/Invalid method/),
    });
    const headers = await raw(
      `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
    );
    expect(headers).toMatch(/^HTTP\/1\.1 431 /);
    const detail = JSON.parse(headers.split("\r\n\r\n")[1]!).detail;
    expect(detail.error_type).toBe("request_header_too_large");
    // The id a support request would quote is in the body and the header alike.
    expect(detail.request_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(headers).toContain(`\r\nX-Request-Id: ${detail.request_id}\r\n`);
  });
});

describe("item 7: --auth off checks the Host header (DNS rebinding)", () => {
  it("without a gate, a request whose Host is not a loopback name gets 403", async () => {
    await start({ gate: undefined });
    const port = new URL(url).port;
    const send = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest(`${url}/v1/systemone`, {
          method: "POST",
          headers: { host, "content-type": "application/json" },
        });
        req.on("response", (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on("error", reject);
        req.end(JSON.stringify(REQUEST));
      });
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, "localhost"])
      expect({ host, status: await send(host) }).toEqual({ host, status: 200 });
    for (const host of [`evil.example:${port}`, `evil.localhost:${port}`, "10.0.0.1"])
      expect({ host, status: await send(host) }).toEqual({ host, status: 403 });
  });

  it("with a gate (keys required) any Host is answered", async () => {
    await start();
    const reply = await post(REQUEST, { host: "decisiond.example.com" });
    expect(reply.status).toBe(200);
  });
});

describe("item 7: the ffprobe error names no server path", () => {
  it("a video ffprobe cannot read gets a message without the temporary file's path", async () => {
    const { sampleVideo, VideoError } = await import("../src/media/video.js");
    const { toolsAvailable } = await import("../src/media/tools.js");
    if (!(await toolsAvailable())) throw new Error("ffprobe/ffmpeg are needed for this test");
    const error = await sampleVideo(Buffer.from("this is not a video at all"), {
      frames: 2,
      maxSeconds: 60,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VideoError);
    const message = (error as Error).message;
    expect(message).toMatch(/not a readable video/);
    expect(message).not.toContain(tmpdir());
    expect(message).not.toMatch(/decisiond-video-|input\.mp4/);
  });
});

describe("item 9: decisiond ask", () => {
  it("a colon inside an option (a URL, a time) stays in the option; a question may hold ': '", async () => {
    const { parseQuestionSpec } = await import("../src/cli/ask.js");
    expect(
      parseQuestionSpec("choice", "src=Where to look?:docs=https://example.com/a,faq=see 10:30"),
    ).toEqual([
      "src",
      {
        type: "choice",
        instructions: "Where to look?",
        criteria: { docs: "https://example.com/a", faq: "see 10:30" },
      },
    ]);
    expect(parseQuestionSpec("score", "t=When: roughly?:9:00,noon")).toEqual([
      "t",
      { type: "score", instructions: "When: roughly?", criteria: ["9:00", "noon"] },
    ]);
  });

  it("--image promises no GIF (the server refuses it)", async () => {
    const { Command } = await import("commander");
    const { registerAskCommand } = await import("../src/cli/ask.js");
    const program = new Command().exitOverride();
    const ask = registerAskCommand(program);
    expect(ask.helpInformation()).not.toMatch(/GIF/i);
  });

  it("the 422 for an image sent to a text-only model says how to serve a vision model", async () => {
    await start();
    const reply = await post({ ...REQUEST, images: ["data:image/png;base64,AAAA"] });
    expect(reply.status).toBe(422);
    expect(reply.body.detail[0].loc).toEqual(["body", "images"]);
    expect(reply.body.detail[0].msg).toMatch(/decisiond serve --model smolvlm-256m-instruct/);
  });
});

describe("item 10: the README says how to raise the official clients' 10 s timeout", () => {
  it("names the JS SDK's `timeout` (ms) and the Python SDK's `timeout` (s), whose default is still 10 s", async () => {
    const { readFile } = await import("node:fs/promises");
    const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
    const types = await readFile(
      new URL("../node_modules/@typesafe-ai/sdk/dist/index.d.mts", import.meta.url),
      "utf8",
    );
    // If the SDK's default changes, the README's advice must be revisited.
    expect(types).toMatch(/timeout\?: number;/);
    expect(types).toMatch(/Default: 10000\./);
    const section = readme.slice(readme.indexOf("raise their 10 s timeout"));
    expect(section).toMatch(/new TypeSafeClient\(\{[^}]*timeout: 120_000 \}\)/);
    expect(section).toMatch(/systemOne\(request, \{ timeout: 120_000 \}\)/);
    expect(section).toMatch(/TypeSafeClient\(base_url=[^)]*timeout=120\.0\)/);
  });
});
