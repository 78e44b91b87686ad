import { postJson } from "./support/service.js";
import { StubModel, stubAnswer as answer } from "./support/stub-model.js";
import { Ajv2020 } from "ajv/dist/2020.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import { buildApp, type FastifyInstance } from "../src/api/app.js";
import { accountGate } from "../src/api/gate.js";
import { registerKeysCommand } from "../src/cli/keys.js";
import { registerUsageCommands } from "../src/cli/usage.js";
import { runCommand } from "./support/cli.js";

/**
 * Admission, limits and bad input, on the real HTTP stack (Fastify on a loopback port, the real
 * accounts store and gate) with a stand-in model whose `decide` the test holds open: admission
 * does not depend on the model, and holding the call makes "one in flight" observable.
 */

const latches: (() => void)[] = [];

/** A promise the test resolves (and `afterEach` does, should a test fail while holding it). */
function latch(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  latches.push(open);
  return { promise, open };
}

let home: string;
let store: AccountStore;
let model: StubModel;
let app: FastifyInstance;
let url: string;
let logs: string[];

async function start(
  options: { waitMs?: number; bodyLimit?: number; logLevel?: string } = {},
): Promise<void> {
  logs = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      logs.push(chunk.toString());
      callback();
    },
  });
  app = await buildApp({
    models: [model],
    gate: accountGate(new Admission(store, { waitMs: options.waitMs ?? 0 })),
    logger: { level: options.logLevel ?? "info", stream },
    ...(options.bodyLimit ? { bodyLimit: options.bodyLimit } : {}),
  });
  url = await app.listen({ host: "127.0.0.1", port: 0 });
}

beforeEach(async () => {
  home = await mkdtemp(join(tmpdir(), "decisiond-limits-"));
  vi.stubEnv("DECISIOND_HOME", home);
  store = SqliteStore.open(join(home, "decisiond.db"));
  model = new StubModel();
});

afterEach(async () => {
  for (const open of latches.splice(0)) open();
  await app?.close();
  await store.close();
  vi.unstubAllEnvs();
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

interface Reply {
  status: number;
  headers: Headers;
  body: any;
}

function post(
  key: string | undefined,
  body: unknown = REQUEST,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return postJson(`${url}/v1/systemone`, body, {
    ...(key !== undefined ? { authorization: `Bearer ${key}` } : {}),
    ...headers,
  });
}

/** Runs `decisiond <args>` in-process against the test's store; returns stdout and stderr. */
function cli(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return runCommand((program) => {
    registerKeysCommand(program);
    registerUsageCommands(program);
  }, args);
}

function expectError(reply: Reply, status: number, errorType: string): void {
  expect(reply.status).toBe(status);
  expect(reply.body.detail.error_type).toBe(errorType);
  expect(typeof reply.body.detail.message).toBe("string");
  expect(reply.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
}

describe("one request in flight per account", () => {
  it("200 parallel requests: exactly one in flight, every other one a 429, the account usable right after", async () => {
    await start();
    const { key } = await store.createKey("team-a");
    const hold = latch();
    model.impl = async (request) => {
      await hold.promise;
      return answer(request);
    };

    let answered = 0;
    const replies = Array.from({ length: 200 }, () =>
      post(key).then((r) => {
        answered++;
        return r;
      }),
    );
    // Every request but the admitted one is answered while that one is still held in the model.
    await vi.waitFor(() => expect(answered).toBe(199), { timeout: 60_000, interval: 20 });
    expect(model.entered).toBe(1);
    expect(model.inFlight).toBe(1);
    hold.open();
    const all = await Promise.all(replies);

    expect(all.filter((r) => r.status === 200)).toHaveLength(1);
    const refused = all.filter((r) => r.status === 429);
    expect(refused).toHaveLength(199);
    for (const r of refused) {
      expectError(r, 429, "concurrency_limit");
      expect(r.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
      expect(Number(r.headers.get("retry-after-ms"))).toBeGreaterThanOrEqual(1);
    }
    expect(model.maxInFlight).toBe(1);

    // Right after: the next request is admitted and answered.
    const next = await post(key);
    expect(next.status).toBe(200);
    expect(next.body.answers.refund).toEqual({ type: "noul", noul: 0.75 });
    expect(model.maxInFlight).toBe(1);
    // Only admitted calls reach the ledger.
    expect((await store.calls("team-a")).map((c) => c.status)).toEqual([200, 200]);
  });

  it("two accounts run side by side", async () => {
    await start();
    const a = (await store.createKey("team-a")).key;
    const b = (await store.createKey("team-b")).key;
    const hold = latch();
    model.impl = async (request) => {
      await hold.promise;
      return answer(request);
    };
    const first = post(a);
    const second = post(b);
    await vi.waitFor(() => expect(model.inFlight).toBe(2), { timeout: 30_000, interval: 10 });
    // Meanwhile each account is busy on its own.
    expectError(await post(a), 429, "concurrency_limit");
    expectError(await post(b), 429, "concurrency_limit");
    hold.open();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect(model.maxInFlight).toBe(2);
  });

  it("two keys of one account share its one slot", async () => {
    await start();
    const k1 = (await store.createKey("team-a", "one")).key;
    const k2 = (await store.createKey("team-a", "two")).key;
    const hold = latch();
    model.impl = async (request) => {
      await hold.promise;
      return answer(request);
    };
    const first = post(k1);
    await vi.waitFor(() => expect(model.inFlight).toBe(1), { timeout: 30_000, interval: 10 });
    expectError(await post(k2), 429, "concurrency_limit");
    hold.open();
    expect((await first).status).toBe(200);
  });

  it("with a bounded wait, the next request waits for the slot instead of a 429", async () => {
    await start({ waitMs: 60_000 });
    const { key } = await store.createKey("team-a");
    const hold = latch();
    model.impl = async (request) => {
      await hold.promise;
      return answer(request);
    };
    const first = post(key);
    await vi.waitFor(() => expect(model.inFlight).toBe(1), { timeout: 30_000, interval: 10 });
    const second = post(key);
    const third = post(key);
    hold.open();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect((await third).status).toBe(200);
    expect(model.entered).toBe(3);
    expect(model.maxInFlight).toBe(1);
  });

  it("a wait that runs out is a 429", async () => {
    await start({ waitMs: 50 });
    const { key } = await store.createKey("team-a");
    const hold = latch();
    model.impl = async (request) => {
      await hold.promise;
      return answer(request);
    };
    const first = post(key);
    await vi.waitFor(() => expect(model.inFlight).toBe(1), { timeout: 30_000, interval: 10 });
    expectError(await post(key), 429, "concurrency_limit");
    hold.open();
    expect((await first).status).toBe(200);
    expect(model.entered).toBe(1);
  });

  it("a request refused before the model (bad input) frees the slot", async () => {
    await start();
    const { key } = await store.createKey("team-a");
    expect((await post(key, "{not json")).status).toBe(422);
    expect((await post(key, { ...REQUEST, model: "nope" })).status).toBe(422);
    expect((await post(key, "x".repeat(10), { "content-type": "text/plain" })).status).toBe(415);
    expect((await post(key)).status).toBe(200);
    // A body that does not parse never took the slot, so it has no ledger row (issue 31, item 6).
    expect((await store.calls("team-a")).map((c) => [c.status, c.model ?? null])).toEqual([
      [422, null],
      [200, "stub-1"],
    ]);
  });

  it("a client that goes away frees the slot at once; its call is charged when the model lets go", async () => {
    await start();
    const { key } = await store.createKey("team-a");
    // A model that does not stop when asked (a long prefill cannot be interrupted).
    const hold = latch();
    let abortSeen = false;
    model.impl = async (request, signal) => {
      signal?.addEventListener("abort", () => (abortSeen = true));
      await hold.promise;
      return answer(request, { input_tokens: 40, output_tokens: 2 });
    };
    const controller = new AbortController();
    const gone = fetch(`${url}/v1/systemone`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify(REQUEST),
      signal: controller.signal,
    }).catch(() => "aborted");
    await vi.waitFor(() => expect(model.inFlight).toBe(1), { timeout: 30_000, interval: 10 });
    expectError(await post(key), 429, "concurrency_limit");
    controller.abort();
    expect(await gone).toBe("aborted");
    await vi.waitFor(() => expect(abortSeen).toBe(true), { timeout: 30_000, interval: 10 });

    // The client's retry is admitted although the abandoned call is still in the model.
    model.impl = async (request) => answer(request);
    expect((await post(key)).status).toBe(200);
    expect(model.inFlight).toBe(1);
    expect((await store.calls("team-a")).map((c) => c.status)).toEqual([200]);

    hold.open();
    await vi.waitFor(async () => expect(await store.calls("team-a")).toHaveLength(2), {
      timeout: 30_000,
      interval: 10,
    });
    expect((await store.calls("team-a"))[1]).toMatchObject({
      status: 499,
      inputTokens: 40,
      outputTokens: 2,
    });
    expect((await post(key)).status).toBe(200);
  });
});

describe("API keys", () => {
  it("a missing, unknown, malformed or revoked key gets 401 authentication_error", async () => {
    await start();
    const { key, record } = await store.createKey("team-a");
    expect((await post(key)).status).toBe(200);

    const missing = await post(undefined);
    expectError(missing, 401, "authentication_error");
    expect(missing.body.detail.message).toMatch(/Authorization: Bearer/);
    expect(missing.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expectError(await post(`dsk_${"A".repeat(40)}`), 401, "authentication_error");
    expectError(
      await post(key.slice(0, -1) + (key.endsWith("a") ? "b" : "a")),
      401,
      "authentication_error",
    );
    expectError(
      await post(undefined, REQUEST, { authorization: `Basic ${key}` }),
      401,
      "authentication_error",
    );
    expect(model.entered).toBe(1);

    // Revoked from the command line (its own connection to the store), refused on the next request.
    const { stderr } = await cli("keys", "revoke", String(record.id));
    expect(stderr).toMatch(/revoked key/);
    const revoked = await post(key);
    expectError(revoked, 401, "authentication_error");
    expect(revoked.body.detail.message).toMatch(/revoked/);
    expect(model.entered).toBe(1);
  });

  it("a key is refused before its body is read: a 401 costs no upload or parse", async () => {
    await start();
    const reply = await post("dsk_nope", "{this is not even json");
    expectError(reply, 401, "authentication_error");
  });

  it("keys list shows last use; the key itself is never stored", async () => {
    await start();
    const { key } = await store.createKey("team-a", "ci");
    await post(key);
    const { stdout } = await cli("keys", "list", "--json");
    const [listed] = JSON.parse(stdout);
    expect(listed).toMatchObject({
      account: "team-a",
      label: "ci",
      prefix: key.slice(0, 12),
      revoked_at: null,
    });
    expect(listed.last_used_at).toMatch(/^\d{4}-/);
    expect(stdout).not.toContain(key);
  });
});

describe("allowance", () => {
  it("a spent allowance gets 429 allowance_exhausted; lifting it admits again; usage reports it", async () => {
    await start();
    const { key } = await store.createKey("team-a");
    await cli("accounts", "set-allowance", "team-a", "--tokens", "20", "--period", "day");
    expect((await post(key)).status).toBe(200); // 11 tokens
    expect((await post(key)).status).toBe(200); // 22 tokens: admitted while 9 were left
    const spent = await post(key);
    expectError(spent, 429, "allowance_exhausted");
    expect(spent.body.detail.message).toMatch(/22 of 20 tokens today/);
    expect(Number(spent.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(model.entered).toBe(2);

    const usage = JSON.parse((await cli("usage", "--account", "team-a", "--json")).stdout);
    expect(usage).toEqual([
      expect.objectContaining({
        account: "team-a",
        calls: 2,
        input_tokens: 16,
        output_tokens: 6,
        allowance: expect.objectContaining({ tokens: 20, period: "day", used: 22, remaining: 0 }),
      }),
    ]);
    expect((await cli("usage")).stdout).toMatch(/team-a\s+2\s+0\s+16\s+6/);

    await cli("accounts", "set-allowance", "team-a", "--tokens", "100", "--period", "total");
    expect((await post(key)).status).toBe(200);
    await cli("accounts", "set-allowance", "team-a", "--tokens", "0", "--period", "total");
    const none = await post(key);
    expectError(none, 429, "allowance_exhausted");
    expect(none.headers.get("retry-after")).toBeNull(); // a total never renews
    await cli("accounts", "set-allowance", "team-a", "--none");
    expect((await post(key)).status).toBe(200);
  });
});

describe("limits and bad input", () => {
  let key: string;
  beforeEach(async () => {
    await start();
    key = (await store.createKey("team-a")).key;
  });

  it("a 17 MiB body gets 413, with or without Content-Length", async () => {
    const big = JSON.stringify({ ...REQUEST, state: "x".repeat(17 * 1024 * 1024) });
    const sized = await post(key, big);
    expectError(sized, 413, "request_too_large");
    expect(sized.body.detail.message).toMatch(/16 MiB/);

    const chunks = new TextEncoder().encode(big);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < chunks.length; i += 1 << 20)
          controller.enqueue(chunks.subarray(i, i + (1 << 20)));
        controller.close();
      },
    });
    const res = await fetch(`${url}/v1/systemone`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: stream,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).detail.error_type).toBe("request_too_large");
    expect(model.entered).toBe(0);
  });

  it("the body limit is configurable", async () => {
    await app.close();
    await start({ bodyLimit: 1024 });
    expectError(await post(key, { ...REQUEST, state: "y".repeat(2000) }), 413, "request_too_large");
    expect((await post(key)).status).toBe(200);
  });

  it("malformed JSON gets 422 json_invalid saying where (the API's detail[] shape)", async () => {
    const reply = await post(key, '{"model": "stub-1",\n "state": [1, 2,, 3]}');
    expect(reply.status).toBe(422);
    expect(reply.body.detail[0]).toMatchObject({ type: "json_invalid" });
    expect(reply.body.detail[0].msg).toMatch(/line 2, column \d+|2,, 3/);
    const truncated = await post(key, '{"model": "stub-1"');
    expect(truncated.status).toBe(422);
    expect(truncated.body.detail[0].msg).toMatch(/end of the body|line 1/);
    const empty = await post(key, "");
    expect(empty.status).toBe(422);
    expect(empty.body.detail[0]).toMatchObject({ loc: ["body"], type: "missing" });
  });

  it("a wrong content type gets 415", async () => {
    const reply = await post(key, JSON.stringify(REQUEST), { "content-type": "text/plain" });
    expectError(reply, 415, "unsupported_media_type");
    expect(reply.body.detail.message).toMatch(/application\/json/);
    const form = await post(key, "a=b", { "content-type": "application/x-www-form-urlencoded" });
    expectError(form, 415, "unsupported_media_type");
    // The TypeSafe Python SDK's image upload: a JSON part named "request", then the image's bytes.
    const boundary = "ts-boundary";
    const multipart =
      `--${boundary}\r\nContent-Disposition: form-data; name="request"\r\n` +
      `Content-Type: application/json\r\n\r\n${JSON.stringify(REQUEST)}\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="asset-0"; filename="asset-0"\r\n` +
      `Content-Type: image/png\r\n\r\n\x89PNG\r\n--${boundary}--\r\n`;
    const upload = await post(key, multipart, {
      "content-type": `multipart/form-data; boundary=${boundary}`,
    });
    expectError(upload, 415, "unsupported_media_type");
    expect(upload.body.detail.message).toMatch(
      /not multipart\/form-data .*base64 data URL in "images"/,
    );
  });

  it('"assets" (image placeholders) gets 422 saying how to send the image, not an answer without it', async () => {
    const png =
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    const assets = {
      ...REQUEST,
      state: "What is in <image:0123456789abcdef0123456789abcdef>?",
      assets: {
        "<image:0123456789abcdef0123456789abcdef>": {
          type: "image",
          format: "png",
          data_base64: png,
        },
      },
    };
    const text = await post(key, assets);
    expect(text.status).toBe(422);
    expect(text.body.detail).toEqual([
      {
        loc: ["body", "assets"],
        msg: expect.stringMatching(
          /^model stub-1 does not accept images: .*"assets" .*not supported/,
        ),
        type: "value_error",
      },
    ]);
    expect(model.entered).toBe(0);
    // A vision model takes its image in "images" only.
    await app.close();
    model = Object.assign(new StubModel(), { acceptsImages: true });
    await start();
    const vision = await post(key, assets);
    expect(vision.status).toBe(422);
    expect(vision.body.detail[0].msg).toMatch(
      /^"assets" .*not supported by this server: .*"images"/,
    );
  });

  it("an unknown model gets 422 at body.model; other invalid bodies get 422 at their place", async () => {
    const unknown = await post(key, { ...REQUEST, model: "gpt-9" });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toEqual([
      expect.objectContaining({ loc: ["body", "model"], type: "unknown_model" }),
    ]);
    expect(unknown.body.detail[0].msg).toMatch(/gpt-9/);

    const noState: Record<string, unknown> = { ...REQUEST };
    delete noState.state;
    const missing = await post(key, noState);
    expect(missing.status).toBe(422);
    expect(missing.body.detail[0]).toMatchObject({ loc: ["body", "state"], type: "missing" });

    const oneOption = await post(key, {
      ...REQUEST,
      questions: { team: { type: "choice", criteria: { only: null } } },
    });
    expect(oneOption.status).toBe(422);
    expect(oneOption.body.detail[0].loc).toEqual(["body", "questions", "team", "criteria"]);

    const array = await post(key, "[1, 2]");
    expect(array.status).toBe(422);
    expect(array.body.detail[0].loc).toEqual(["body"]);
    expect(model.entered).toBe(0);
  });

  it("gzip, deflate, br and zstd bodies are decompressed", async () => {
    const raw = Buffer.from(JSON.stringify(REQUEST));
    for (const [encoding, body] of [
      ["gzip", gzipSync(raw)],
      ["deflate", deflateSync(raw)],
      ["br", brotliCompressSync(raw)],
      ["zstd", zstdFrame(raw)],
    ] as const) {
      const reply = await post(key, body, { "content-encoding": encoding });
      expect({ encoding, status: reply.status }).toEqual({ encoding, status: 200 });
      expect(Object.keys(reply.body.answers)).toEqual(["refund", "team", "urgency"]);
    }
  });

  it("a zstd body from a real compressor (Huffman and FSE blocks, as the Python client sends) is decoded", async () => {
    // 1558 bytes of JSON compressed at level 19 by the zstd library (python backports.zstd).
    const body = Buffer.from(ZSTD_REQUEST, "base64");
    const reply = await post(key, body, { "content-encoding": "zstd" });
    expect(reply.status).toBe(200);
    expect(Object.keys(reply.body.answers)).toEqual(["refund", "team", "urgency"]);
  });

  it("the body limit applies to the decompressed size: a small gzip or zstd bomb gets 413", async () => {
    const inflated = Buffer.from(
      JSON.stringify({ ...REQUEST, state: " ".repeat(17 * 1024 * 1024) }),
    );
    const gz = gzipSync(inflated);
    expect(gz.length).toBeLessThan(100_000);
    expectError(await post(key, gz, { "content-encoding": "gzip" }), 413, "request_too_large");
    expectError(
      await post(key, zstdRle(17 * 1024 * 1024), { "content-encoding": "zstd" }),
      413,
      "request_too_large",
    );
    expect(model.entered).toBe(0);
    expect((await post(key)).status).toBe(200);
  });

  it("corrupt compressed data gets 400; an unknown Content-Encoding gets 415", async () => {
    const corrupt = await post(key, Buffer.from("definitely not gzip"), {
      "content-encoding": "gzip",
    });
    expectError(corrupt, 400, "invalid_body_encoding");
    expect(corrupt.body.detail.message).toMatch(/gzip/);
    expectError(
      await post(key, Buffer.from("zzzz not zstd at all"), { "content-encoding": "zstd" }),
      400,
      "invalid_body_encoding",
    );
    const unknown = await post(key, JSON.stringify(REQUEST), { "content-encoding": "compress" });
    expectError(unknown, 415, "unsupported_content_encoding");
    expect(unknown.body.detail.message).toMatch(/gzip, deflate, br, zstd/);
  });

  it("an internal fault gets 500 naming the request id, and is logged with it", async () => {
    model.impl = async () => {
      throw new Error("the engine fell over");
    };
    const reply = await post(key);
    expectError(reply, 500, "internal_error");
    const id = reply.headers.get("x-request-id")!;
    expect(reply.headers.get("x-typesafe-request-id")).toBe(id);
    expect(reply.body.detail.request_id).toBe(id);
    expect(reply.body.detail.message).toContain(id);
    expect(reply.body.detail.message).not.toMatch(/fell over/);
    const fault = logs.map((l) => JSON.parse(l)).find((l) => l.msg === "internal fault");
    expect(fault).toMatchObject({ reqId: id, level: 50 });
    expect(fault.err.message).toBe("the engine fell over");
    expect((await store.calls("team-a")).map((c) => c.status)).toEqual([500]);
  });

  it("bad input never gets a 5xx", async () => {
    const bodies: [string, Record<string, string>][] = [
      ["null", {}],
      ['"text"', {}],
      ['{"model": 5, "state": {}, "questions": []}', {}],
      ['{"model": "stub-1", "state": {}, "questions": {"q": {"type": "box"}}}', {}],
      [
        '{"model": "stub-1", "state": {}, "questions": {"q": {"type": "score", "criteria": {"0": "a"}}}}',
        {},
      ],
      ["\u0000\u0001", {}],
      ['{"a":1}', { "content-type": "application/json; charset=latin1" }],
      ["{}", { "content-encoding": "br" }],
    ];
    for (const [body, headers] of bodies) {
      const reply = await post(key, body, headers);
      expect(reply.status, body).toBeGreaterThanOrEqual(400);
      expect(reply.status, body).toBeLessThan(500);
      expect(typeof reply.body, body).toBe("object");
    }
  });
});

describe("auth off", () => {
  it("without a gate every request is admitted, an Authorization header included", async () => {
    app = await buildApp({ models: [model], logger: false });
    url = await app.listen({ host: "127.0.0.1", port: 0 });
    expect((await post("any-key-at-all")).status).toBe(200);
    expect((await post(undefined)).status).toBe(200);
    const doc = (await (await fetch(`${url}/openapi.json`)).json()) as any;
    expect(doc.paths["/v1/systemone"].post.responses["401"]).toBeUndefined();
  });
});

describe("request ids, logs and the OpenAPI document", () => {
  it("every response carries x-request-id", async () => {
    await start();
    const { key } = await store.createKey("team-a");
    const responses = await Promise.all([
      fetch(`${url}/healthz`),
      fetch(`${url}/v1/models`),
      fetch(`${url}/openapi.json`),
      fetch(`${url}/no/such/route`),
      fetch(`${url}/v1/systemone`, { method: "POST" }),
    ]);
    const ok = await post(key);
    const ids = [
      ...responses.map((r) => r.headers.get("x-request-id")),
      ok.headers.get("x-request-id"),
    ];
    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 404, 401]);
  });

  it("health, readiness and metrics polls are not logged at info; the API's requests are", async () => {
    await start();
    const { key } = await store.createKey("team-a");
    for (const path of ["/healthz", "/readyz", "/metrics", "/healthz"])
      expect((await fetch(`${url}${path}`)).status).toBe(200);
    expect((await post(key)).status).toBe(200);
    const urls = logs.flatMap((line) => {
      const entry = JSON.parse(line) as { req?: { url: string } };
      return entry.req ? [entry.req.url] : [];
    });
    expect(urls).toEqual(["/v1/systemone"]);
  });

  it("logs hold no keys and no state contents, even at trace level", async () => {
    await start({ logLevel: "trace" });
    const { key } = await store.createKey("team-a");
    const secret = "SECRET-STATE-d41d8cd98f00";
    expect((await post(key, { ...REQUEST, state: { note: secret } })).status).toBe(200);
    expect((await post(key, { ...REQUEST, model: secret })).status).toBe(422);
    expect((await post(key, `{"state": "${secret}"`)).status).toBe(422);
    await post(`dsk_${secret}`);
    const text = logs.join("");
    expect(logs.length).toBeGreaterThan(4);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(12));
  });

  it("GET /openapi.json is OpenAPI 3.1 from the validating schemas: real requests and answers validate against it", async () => {
    await start();
    const { key } = await store.createKey("team-a");
    const doc = (await (await fetch(`${url}/openapi.json`)).json()) as any;
    expect(doc.openapi).toBe("3.1.0");
    const op = doc.paths["/v1/systemone"].post;
    expect(Object.keys(op.responses).sort()).toEqual([
      "200",
      "400",
      "401",
      "408",
      "413",
      "415",
      "422",
      "429",
      "500",
    ]);
    expect(op.security).toEqual([{ bearer: [] }]);
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
    expect(doc.paths["/v1/models"].get).toBeDefined();
    expect(doc.paths["/healthz"].get).toBeDefined();

    // Every $ref points at a component.
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    for (const ref of refs) {
      const name = /#\/components\/schemas\/([^"]+)"/.exec(ref)?.[1];
      expect(name && doc.components.schemas[name], ref).toBeDefined();
    }

    const ajv = new Ajv2020({ strict: false });
    for (const [name, schema] of Object.entries(doc.components.schemas))
      ajv.addSchema(schema as object, `#/components/schemas/${name}`);
    const check = (name: string, value: unknown) =>
      ajv.validate(`#/components/schemas/${name}`, value);

    expect(check("SystemOneRequest", REQUEST)).toBe(true);
    expect(check("SystemOneRequest", { ...REQUEST, state: [1, { a: null }] })).toBe(true);
    expect(check("SystemOneRequest", { ...REQUEST, questions: { q: { type: "box" } } })).toBe(
      false,
    );
    expect(check("SystemOneRequest", { model: "m", questions: {} })).toBe(false);

    const ok = await post(key);
    expect(check("SystemOneResponse", ok.body)).toBe(true);
    const invalid = await post(key, { ...REQUEST, model: "nope" });
    expect(check("ValidationError", invalid.body)).toBe(true);
    expect(check("Error", (await post("dsk_x")).body)).toBe(true);
  });
});

/** A zstd frame of raw blocks (no compression; enough to exercise the decoder). */
function zstdFrame(data: Buffer): Buffer {
  const parts: Buffer[] = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38])]; // magic, no FCS, 128 KiB window
  for (let offset = 0; ; offset += 1 << 17) {
    const chunk = data.subarray(offset, offset + (1 << 17));
    const last = offset + (1 << 17) >= data.length ? 1 : 0;
    const header = (chunk.length << 3) | last; // block type 0: raw
    parts.push(Buffer.from([header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff]), chunk);
    if (last) return Buffer.concat(parts);
  }
}

/** A zstd frame of RLE blocks: `size` spaces in a few bytes per 128 KiB. */
function zstdRle(size: number): Buffer {
  const parts = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38])];
  for (let left = size; left > 0; left -= 1 << 17) {
    const n = Math.min(left, 1 << 17);
    const header = (n << 3) | (1 << 1) | (left - n === 0 ? 1 : 0); // block type 1: RLE
    parts.push(Buffer.from([header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff, 0x20]));
  }
  return Buffer.concat(parts);
}

const ZSTD_REQUEST =
  "KLUv/WAWBe0JALZSNx1QbxtjHZShIevzCUUaGfKZCwjxPlxIiX5MY2YmhC4ALQAwAO3zNT+F4fInelqihC3JXSx9QsugaitdSen4nSx+vaSj+4rRBvDEd01H3UId6SWMrntiQ7kf+1EJV/Kn8in2+FlJ6Ry/pyPIZcp9I4WkoxbY79w0Gc1A+9dROgevi1T5T0kJN+r3uHyboSvC98cu9tN0dCmWh16ULPTX/L6xoslMkaZRJBAHQ4EwaDLTNEW0MamdQj6lbsBebllvGYyTOotPW87Fl46yx87xoxjuM1yLbIvbYxd3W5HaJiCQJJjgvBxDpEEBGX3l14/Az7REwQW2PRWkWbiMWuEkDaOXwwE7nIV99YNMPJFsrjhnqzPqeYBJlFlJrHROYk4SI52RmJHESGeSFYrLy+JQwfzSlHbXPeSqXV8Y";
