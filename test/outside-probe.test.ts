import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import {
  buildApp,
  type AppOptions,
  type FastifyInstance,
  type ServedModel,
} from "../src/api/app.js";
import { accountGate } from "../src/api/gate.js";
import { JsonBodyScanner, MAX_JSON_VALUES, MAX_SCANNED_DEPTH } from "../src/protocol/json-scan.js";
import { postJson } from "./support/service.js";
import { stubAnswer, StubModel } from "./support/stub-model.js";

/**
 * Issue 47 (a second outside probe) on the real HTTP stack with a stand-in model: no answer
 * without its ledger row, a store outage answered 503 with Retry-After, a missed deadline logged
 * at warn. test/store-outage.test.ts repeats the outage on a real PostgreSQL under load.
 */

/** Store methods that reject while listed, as a database that went away does. */
type Faults = Set<keyof AccountStore>;

/** `store` with every method in `faults` rejecting with a driver-like connection error. */
function faulty(store: AccountStore, faults: Faults): AccountStore {
  return new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) =>
        faults.has(name as keyof AccountStore)
          ? Promise.reject(
              Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), {
                code: "ECONNREFUSED",
              }),
            )
          : (value as (...a: unknown[]) => unknown).apply(target, args);
    },
  });
}

let home: string;
let sqlite: SqliteStore;
let faults: Faults;
let model: StubModel;
let app: FastifyInstance;
let url: string;
let logs: { level: number; msg: string; error_type?: string; reqId?: string }[];
let key: string;

async function start(options: Partial<AppOptions> = {}): Promise<void> {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      logs.push(JSON.parse(chunk.toString()));
      callback();
    },
  });
  app = await buildApp({
    models: [model],
    gate: accountGate(new Admission(faulty(sqlite, faults))),
    logger: { level: "info", stream },
    ...options,
  });
  url = await app.listen({ host: "127.0.0.1", port: 0 });
}

beforeEach(async () => {
  home = await mkdtemp(join(tmpdir(), "decisiond-probe2-"));
  sqlite = SqliteStore.open(join(home, "decisiond.db"));
  key = (await sqlite.createKey("team-a")).key;
  faults = new Set();
  model = new StubModel();
  logs = [];
});

afterEach(async () => {
  await app?.close();
  await sqlite.close();
  await rm(home, { recursive: true, force: true });
});

const REQUEST = {
  model: "stub-1",
  state: { ticket: "I was charged twice" },
  questions: { refund: { type: "noul", instructions: "Does the customer want a refund?" } },
};

const post = (body: unknown = REQUEST, headers: Record<string, string> = {}) =>
  postJson(`${url}/v1/systemone`, body, { authorization: `Bearer ${key}`, ...headers });

/** A 503 `store_unavailable` with a Retry-After of whole seconds. */
function expectStoreUnavailable(reply: Awaited<ReturnType<typeof post>>) {
  expect(reply.status).toBe(503);
  expect(reply.body.detail.error_type).toBe("store_unavailable");
  expect(reply.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
  expect(reply.body.detail.message).not.toMatch(/ECONNREFUSED|5432/);
}

describe("item 2: an answer is sent only with its ledger row written", () => {
  it("a ledger write that fails withholds the answer: 503, and nothing answered goes unrecorded", async () => {
    await start();
    faults.add("recordCall");
    const reply = await post();
    expectStoreUnavailable(reply);
    expect(reply.body.answers).toBeUndefined();
    expect(model.entered).toBe(1);
    expect(await sqlite.calls("team-a")).toEqual([]);
    // The store is back: the account's slot was freed, the next call is answered and recorded.
    faults.clear();
    const next = await post();
    expect(next.status).toBe(200);
    expect((await sqlite.calls("team-a")).map((c) => c.status)).toEqual([200]);
    const line = logs.find((l) => l.error_type === "store_unavailable");
    expect(line?.level).toBe(40);
  });

  it("every 200 a client got has its row, while the store fails every other write", async () => {
    await start();
    let writes = 0;
    const store = faulty(sqlite, faults);
    const recordCall = store.recordCall.bind(store);
    // Fails the 2nd, 4th, … ledger write.
    sqlite.recordCall = (...args) =>
      ++writes % 2 === 0 ? Promise.reject(new Error("gone")) : recordCall(...args);
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      const reply = await post();
      statuses.push(reply.status);
      if (reply.status !== 200) expectStoreUnavailable(reply);
    }
    const ok = statuses.filter((s) => s === 200).length;
    expect(ok).toBe(5);
    expect((await sqlite.calls("team-a")).filter((c) => c.status === 200)).toHaveLength(ok);
  });
});

describe("item 3: a store outage is 503 store_unavailable with Retry-After, never 500", () => {
  for (const method of ["findKey", "allowanceState", "tryLockAccount", "touchKey"] as const)
    it(`when ${method} fails`, async () => {
      await start();
      faults.add(method);
      const reply = await post();
      expectStoreUnavailable(reply);
      expect(model.entered).toBe(0);
      faults.clear();
      expect((await post()).status).toBe(200);
    });

  it("on the console's routes too", async () => {
    const { consoleMount } = await import("../src/console/plugin.js");
    await start({
      mounts: [consoleMount({ store: faulty(sqlite, faults), adminToken: undefined })],
    });
    const usage = () =>
      fetch(`${url}/console/api/usage`, { headers: { authorization: `Bearer ${key}` } });
    expect((await usage()).status).toBe(200);
    for (const method of ["findKey", "usage"] as const) {
      faults.add(method);
      const res = await usage();
      expectStoreUnavailable({ status: res.status, headers: res.headers, body: await res.json() });
      faults.clear();
    }
  });

  it("when reserving the allowance fails, before the model runs", async () => {
    let ran = 0;
    // Reserves through the gate's ticket before it runs, as the Decider's beforeScore hook does.
    const reserving: ServedModel = {
      ...model,
      names: ["stub-1"],
      decide: async (request, _signal, hooks) => {
        await hooks?.beforeScore?.({ input_tokens: 8, output_tokens: 3 });
        ran++;
        return stubAnswer(request);
      },
    };
    await start({ models: [reserving] });
    await sqlite.setAllowance("team-a", { tokens: 1000, period: "day" });
    faults.add("reserveTokens");
    expectStoreUnavailable(await post());
    expect(ran).toBe(0);
    faults.clear();
    expect((await post()).status).toBe(200);
    expect(ran).toBe(1);
  });
});

describe("item 11: a request past its deadline is logged at warn with its error_type", () => {
  it("logs deadline_exceeded at warn", async () => {
    await start({ queue: { deadlineMs: 200 } });
    model.impl = (_request, signal) =>
      new Promise((_resolve, reject) =>
        signal?.addEventListener("abort", () => reject(signal.reason as Error), { once: true }),
      );
    const reply = await post();
    expect(reply.status).toBe(503);
    expect(reply.body.detail.error_type).toBe("deadline_exceeded");
    const line = logs.find((l) => l.error_type === "deadline_exceeded");
    expect(line).toMatchObject({ level: 40 });
    expect(logs.filter((l) => l.level >= 50)).toEqual([]);
  });
});

describe("item 5: --drain-timeout is a bound", () => {
  /** A process stand-in: the signal listeners it was given, and when and how it exited. */
  function control() {
    const listeners = new Map<string, () => void>();
    let exited: { code: number; at: number } | undefined;
    return {
      on: (signal: string, listener: () => void) => void listeners.set(signal, listener),
      exit: (code: number) => void (exited ??= { code, at: performance.now() }),
      log: () => {},
      signal: (name: string) => listeners.get(name)?.(),
      get exited() {
        return exited;
      },
    };
  }

  /**
   * The app with a lifecycle, one request in the model (`impl`), and `drainOnSignals` on it with
   * `timeoutMs`, as `serve` has it: closing closes the app, or never ends (`close: "hangs"`).
   */
  async function draining(
    impl: StubModel["impl"],
    timeoutMs: number,
    close: "closes" | "hangs" = "closes",
  ) {
    const { Lifecycle } = await import("../src/api/lifecycle.js");
    const { drainOnSignals } = await import("../src/cli/serve.js");
    const lifecycle = new Lifecycle();
    await start({ lifecycle });
    model.impl = impl;
    const inFlight = post();
    await expect.poll(() => model.inFlight).toBe(1);
    const proc = control();
    const state = { inFlight, proc, closed: false };
    drainOnSignals(
      {
        drain: (ms) => lifecycle.drain(ms),
        cut: (ms) => lifecycle.cut(ms),
        close:
          close === "hangs"
            ? () => new Promise(() => {})
            : async () => {
                await app.close();
                state.closed = true;
              },
      },
      timeoutMs,
      proc,
    );
    return state;
  }

  it("keeps a quarter of the bound for the cut, at most 1 s", async () => {
    const { cutReserveMs } = await import("../src/cli/serve.js");
    expect([30_000, 2000, 400, 3].map(cutReserveMs)).toEqual([1000, 500, 100, 0]);
  });

  /** A model call that never answers, nor minds its signal. */
  const never = () => new Promise<never>(() => {});

  it(
    "cuts what is still in flight near its end: answered 503, recorded, exit 1 in time",
    {
      timeout: 10_000,
    },
    async () => {
      const service = await draining(never, 2000);
      const signalled = performance.now();
      service.proc.signal("SIGTERM");
      const reply = await service.inFlight;
      const answered = performance.now() - signalled;
      expect(reply.status).toBe(503);
      expect(reply.body.detail.error_type).toBe("shutting_down");
      expect(reply.headers.get("retry-after")).toBe("1");
      expect(reply.headers.get("connection")).toBe("close");
      // Cut with the last quarter of the bound left (at most 1 s; here 500 ms), not before.
      expect(answered).toBeGreaterThanOrEqual(1500 - 5);
      expect((await sqlite.calls("team-a")).map((c) => c.status)).toEqual([503]);
      await expect.poll(() => service.proc.exited, { timeout: 5000, interval: 20 }).toBeDefined();
      expect(service.proc.exited!.code).toBe(1);
      expect(service.closed).toBe(true);
      expect(service.proc.exited!.at - signalled).toBeLessThan(2000);
    },
  );

  it("cuts what is in flight at a second signal: answered 503, recorded, exit 1", async () => {
    const service = await draining(never, 20_000);
    const signalled = performance.now();
    service.proc.signal("SIGTERM");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(service.proc.exited).toBeUndefined();
    service.proc.signal("SIGTERM");
    // A third changes nothing, and does not end the process before the service is closed.
    service.proc.signal("SIGINT");
    const reply = await service.inFlight;
    expect(reply.status).toBe(503);
    expect(reply.body.detail.error_type).toBe("shutting_down");
    expect(performance.now() - signalled).toBeLessThan(2000);
    expect((await sqlite.calls("team-a")).map((c) => c.status)).toEqual([503]);
    await expect.poll(() => service.proc.exited, { timeout: 5000, interval: 20 }).toBeDefined();
    expect(service.proc.exited!.code).toBe(1);
    expect(service.closed).toBe(true);
  });

  it("exits at the bound when closing does not end (it was 19.5 s for 3 s)", async () => {
    const service = await draining(never, 300, "hangs");
    const signalled = performance.now();
    service.proc.signal("SIGTERM");
    await expect.poll(() => service.proc.exited, { timeout: 5000, interval: 20 }).toBeDefined();
    expect(service.proc.exited!.code).toBe(1);
    expect(service.proc.exited!.at - signalled).toBeGreaterThanOrEqual(300 - 5);
    expect(service.proc.exited!.at - signalled).toBeLessThan(300 + 250);
    expect((await service.inFlight).status).toBe(503);
  });

  it("exits 0 once what is in flight is answered and the service closed, within the bound", async () => {
    let open!: () => void;
    const held = new Promise<void>((resolve) => (open = resolve));
    const service = await draining(async (request) => {
      await held;
      return stubAnswer(request);
    }, 5000);
    service.proc.signal("SIGINT");
    open();
    expect((await service.inFlight).status).toBe(200);
    await expect.poll(() => service.proc.exited, { timeout: 5000, interval: 20 }).toBeDefined();
    expect(service.proc.exited!.code).toBe(0);
    expect(service.closed).toBe(true);
  });
});

describe("item 4: a Node client reads the 413 of a body it is still sending", () => {
  /** Runs `fetch` in another process (as a client would), `tries` times per body; statuses or error codes. */
  function fetchFromChild(bodies: { size: number; gzip: boolean }[], tries: number) {
    const script = `
      const zlib = require("node:zlib");
      const [url, key, spec, tries] = process.argv.slice(1);
      (async () => {
        const out = [];
        for (const { size, gzip } of JSON.parse(spec)) {
          const raw = Buffer.alloc(size, 0x20);
          const body = gzip ? zlib.gzipSync(raw, { level: 0 }) : raw;
          const tally = {};
          for (let i = 0; i < Number(tries); i++) {
            const got = await fetch(url, {
              method: "POST",
              headers: { "content-type": "application/json", authorization: "Bearer " + key,
                ...(gzip ? { "content-encoding": "gzip" } : {}) },
              body,
            }).then(async (res) => { await res.arrayBuffer(); return String(res.status); },
                    (e) => String(e.cause?.code ?? e.message));
            tally[got] = (tally[got] ?? 0) + 1;
          }
          out.push(tally);
        }
        console.log(JSON.stringify(out));
      })();`;
    return new Promise<Record<string, number>[]>((resolve, reject) => {
      execFile(
        process.execPath,
        ["-e", script, `${url}/v1/systemone`, key, JSON.stringify(bodies), String(tries)],
        { maxBuffer: 1 << 20 },
        (error, stdout) => (error ? reject(error) : resolve(JSON.parse(stdout))),
      );
    });
  }

  it("413 every time at 17 MiB and 16.5 MiB, and for a gzip body past the limit (EPIPE before)", async () => {
    await start();
    const MiB = 1024 * 1024;
    const tallies = await fetchFromChild(
      [
        { size: 17 * MiB, gzip: false },
        { size: 16.5 * MiB, gzip: false },
        { size: 20 * MiB, gzip: true },
      ],
      10,
    );
    expect(tallies).toEqual([{ 413: 10 }, { 413: 10 }, { 413: 10 }]);
    // The client is gone: no connection of its is left reading (a paused one lingered 30 s).
    const open = () => new Promise((resolve) => app.server.getConnections((_e, n) => resolve(n)));
    await expect.poll(open, { timeout: 2000 }).toBe(0);
    expect((await post()).status).toBe(200);
  }, 120_000);

  /** Sends `head` on a raw connection and resolves with everything received until `until` matches. */
  function raw(head: string, until: RegExp, then?: (socket: Socket, got: string) => void) {
    return new Promise<string>((resolve, reject) => {
      const socket = connect(Number(new URL(url).port), "127.0.0.1");
      let got = "";
      socket.on("data", (chunk: Buffer) => {
        got += chunk.toString();
        then?.(socket, got);
        if (until.test(got)) {
          socket.destroy();
          resolve(got);
        }
      });
      socket.on("error", reject);
      socket.on("close", () => resolve(got));
      socket.write(head);
    });
  }

  it("Expect: 100-continue gets the 413 without a 100 Continue; a body within the limit gets its 100", async () => {
    await start();
    const refused = await raw(
      `POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${17 * 1024 * 1024}\r\nExpect: 100-continue\r\n\r\n`,
      /\r\n\r\n\{.*\}$/s,
    );
    expect(refused).toMatch(/^HTTP\/1\.1 413 /);
    expect(refused).not.toMatch(/100 Continue/);
    const body = JSON.stringify(REQUEST);
    let sent = false;
    const answered = await raw(
      `POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`,
      /HTTP\/1\.1 200 .*\r\n\r\n\{.*\}$/s,
      (socket, got) => {
        if (!sent && /^HTTP\/1\.1 100 Continue\r\n\r\n/.test(got)) {
          sent = true;
          socket.write(body);
        }
      },
    );
    expect(answered).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    // Refused before the body: no 100 either.
    const unauthorized = await raw(
      `POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer nope\r\n` +
        `Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n`,
      /\r\n\r\n\{.*\}$/s,
    );
    expect(unauthorized).toMatch(/^HTTP\/1\.1 401 /);
  });
});

describe("item 7: smaller faults", () => {
  it("a key sent in the query string is not written to the log", async () => {
    await start();
    const secret = "dsk_inTheQueryString0123456789";
    const refused = await postJson(`${url}/v1/systemone?api_key=${secret}`, REQUEST);
    expect(refused.status).toBe(401);
    const missing = await fetch(`${url}/no/such/route?api_key=${secret}`);
    expect(missing.status).toBe(404);
    expect(await missing.text()).not.toContain(secret);
    expect(JSON.stringify(logs)).not.toContain(secret);
    const incoming = logs.filter((l) => l.msg === "incoming request") as unknown as {
      req: { url: string };
    }[];
    expect(incoming.map((l) => l.req.url)).toEqual(["/v1/systemone", "/no/such/route"]);
  });

  it("a zstd bomb (64 MiB of zeros in 2 KB) gets 413 like the other encodings", async () => {
    await start();
    const bomb = await readFile(new URL("./fixtures/zeros-64mib.zst", import.meta.url));
    expect(bomb.length).toBeLessThan(4096);
    const reply = await post(bomb, { "content-encoding": "zstd" });
    expect(reply.status).toBe(413);
    expect(reply.body.detail.error_type).toBe("request_too_large");
    const gzip = await post(gzipSync(Buffer.alloc(64 * 1024 * 1024)), {
      "content-encoding": "gzip",
    });
    expect(gzip.status).toBe(413);
    expect(model.entered).toBe(0);
  });

  it("CONNECT gets a reply: 405 in the API's error shape", async () => {
    await start();
    const reply = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(new URL(url).port), "127.0.0.1");
      let got = "";
      socket.on("data", (chunk: Buffer) => (got += chunk.toString()));
      socket.on("error", reject);
      socket.on("close", () => resolve(got));
      socket.write("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    });
    expect(reply).toMatch(/^HTTP\/1\.1 405 /);
    const { detail } = JSON.parse(reply.split("\r\n\r\n")[1]!);
    expect(detail.error_type).toBe("method_not_allowed");
    expect(reply).toContain(`\r\nX-Request-Id: ${detail.request_id}\r\n`);
    expect((await post()).status).toBe(200);
  });
});

describe("a third probe: an object that names a member twice is refused, not cut short", () => {
  const raw = (text: string) => post(Buffer.from(text), { "content-type": "application/json" });

  it("two questions, or two options, of one id get 422 duplicate_key where the second is", async () => {
    await start();
    const twice = await raw(
      `{"model":"stub-1","state":"s","questions":{"x":{"type":"noul","instructions":"A?"},` +
        `"x":{"type":"noul","instructions":"B?"}}}`,
    );
    expect(twice.status).toBe(422);
    expect(twice.body.detail[0]).toMatchObject({
      type: "duplicate_key",
      loc: ["body", "questions", "x"],
    });
    // The same name written with an escape is the same name.
    const options = await raw(
      `{"model":"stub-1","state":"s","questions":{"q":{"type":"choice",` +
        `"criteria":{"p":null,"\\u0070":"x","q":null}}}}`,
    );
    expect(options.body.detail[0]).toMatchObject({
      type: "duplicate_key",
      loc: ["body", "questions", "q", "criteria", "p"],
    });
    // In the state too, at any depth: the model would read only the last.
    const state = await raw(
      `{"model":"stub-1","state":{"list":[{"a":1},{"a":2,"b":[],"a":3}]},` +
        `"questions":${JSON.stringify(REQUEST.questions)}}`,
    );
    expect(state.body.detail[0]).toMatchObject({
      type: "duplicate_key",
      loc: ["body", "state", "list", 1, "a"],
    });
    expect(model.entered).toBe(0);
    // One name in two objects is two members.
    const apart = await raw(
      `{"model":"stub-1","state":{"a":{"a":1},"b":{"a":2}},` +
        `"questions":${JSON.stringify(REQUEST.questions)}}`,
    );
    expect(apart.status).toBe(200);
  });

  it("finds a name given twice across chunks, a byte at a time", () => {
    const text = `{"state":{"key \\"one\\"":1,"ke\\u0079 \\"one\\"":[{"x":"a,b"}]}}`;
    const scanner = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH);
    let refusal;
    for (const byte of Buffer.from(text)) refusal ??= scanner.push(Uint8Array.of(byte));
    expect(refusal?.statusCode).toBe(422);
    expect((refusal?.body as { detail: { loc: unknown[] }[] }).detail[0]!.loc).toEqual([
      "body",
      "state",
      'key "one"',
    ]);
    // Long names are kept by their digest, and cut short in the reply.
    const long = "x".repeat(20_000);
    const twice = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH).push(
      Buffer.from(`{"${long}1":1,"${long}2":2,"${long}1":3}`),
    );
    const loc = (twice?.body as { detail: { loc: string[] }[] }).detail[0]!.loc;
    expect(loc).toEqual(["body", `${"x".repeat(200)}…`]);
    const fine = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH);
    expect(fine.push(Buffer.from(`{"a":[{"a":1},{"a":2}],"b":"a","c":{"b":1}}`))).toBeUndefined();
  });

  it("reads a character cut between two chunks as one, at every cut", () => {
    // "aé" and "aè" differ only in the second byte of their last character.
    const text = Buffer.from('{"state":{"a\u00e9":1,"a\u00e8":2,"x\u{1f600}y":3}}', "utf8");
    for (let cut = 1; cut < text.length; cut++) {
      const scanner = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH);
      const refusal = scanner.push(text.subarray(0, cut)) ?? scanner.push(text.subarray(cut));
      expect({ cut, refusal }).toEqual({ cut, refusal: undefined });
    }
    const twice = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH);
    const both = Buffer.from('{"a\u00e9":1,"a\u00e9":2}', "utf8");
    const at = both.indexOf(0xa9, 3); // inside the first "é"
    expect(twice.push(both.subarray(0, at)) ?? twice.push(both.subarray(at))).toMatchObject({
      statusCode: 422,
    });
  });
});

describe("item 10: what npm installs supports the Node the README promises", () => {
  it("the cookie Fastify's light-my-request loads runs on Node 20 (cookie 2 asks for 22)", async () => {
    const { createRequire } = await import("node:module");
    const fromFastify = createRequire(createRequire(import.meta.url).resolve("fastify"));
    const fromInject = createRequire(fromFastify.resolve("light-my-request"));
    const manifest = JSON.parse(
      await readFile(fromInject.resolve("cookie/package.json"), "utf8"),
    ) as { version: string; engines?: { node?: string } };
    const ours = JSON.parse(
      await readFile(new URL("../package.json", import.meta.url), "utf8"),
    ) as { engines: { node: string } };
    const major = (range: string) => Number(/>=\s*(\d+)/.exec(range)?.[1]);
    expect(major(manifest.engines?.node ?? ">=0")).toBeLessThanOrEqual(major(ours.engines.node));
    expect(typeof fromInject("cookie").stringifySetCookie).toBe("function");
  });
});
