import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import { buildApp, type FastifyInstance, type ServedModel } from "../src/api/app.js";
import { accountGate } from "../src/api/gate.js";
import { DRAIN_BODY_GRACE_MS } from "../src/api/body-deadline.js";
import { Lifecycle } from "../src/api/lifecycle.js";
import { ShutdownError, WorkQueue } from "../src/api/work-queue.js";
import type { DecideHooks } from "../src/decision/decide.js";
import type { DecisionRequest, DecisionResult } from "../src/decision/types.js";
import { EngineUnavailableError } from "../src/engine/types.js";
import { postJson } from "./support/service.js";

/**
 * The operations surface on the real HTTP stack without a model: /readyz, /metrics (read back
 * with a Prometheus text-format parser), the SIGTERM drain, request ids, and the allowance
 * reserved before the model runs. A stand-in model reports a fixed usage through the Decider's
 * `beforeScore` hook, as the real one does; test/replicas.test.ts repeats these on the real model.
 */

const USAGE = { input_tokens: 40, output_tokens: 2 };

class StubModel implements ServedModel {
  readonly names = ["stub-1"];
  readonly aliases = ["jev-latest"];
  readonly description = "a stand-in model";
  readonly releaseDate = "2026-01-01";
  readonly acceptsImages = false;
  readonly acceptsVideos = false;
  /** Calls that got past `beforeScore` (the model would have run). */
  ran = 0;
  hold: Promise<void> | undefined;
  /** What the next calls' stats say of windows, as the Decider's do for a long option list. */
  listWindows: DecisionResult["stats"]["listWindows"];

  decide = async (
    request: DecisionRequest,
    _signal?: AbortSignal,
    hooks?: DecideHooks,
  ): Promise<DecisionResult> => {
    await hooks?.beforeScore?.(USAGE);
    this.ran++;
    await this.hold;
    const answers: DecisionResult["answers"] = {};
    for (const [id] of request.questions) answers[id] = { type: "noul", noul: 0.5 };
    const windows = this.listWindows ? { listWindows: this.listWindows } : {};
    return {
      answers,
      usage: USAGE,
      stats: { evaluatedTokens: 42, cachedPrefixTokens: 0, ...windows },
    };
  };
}

let dir: string;
let store: SqliteStore;
let model: StubModel;
let app: FastifyInstance;
let url: string;
let lifecycle: Lifecycle;
let admission: Admission;
let logs: string[];
let storeReady: () => Promise<void>;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-ops-"));
  store = SqliteStore.open(join(dir, "decisiond.db"));
  model = new StubModel();
  lifecycle = new Lifecycle();
  admission = new Admission(store, { waitMs: 60_000 });
  logs = [];
  storeReady = () => store.ping();
  app = await buildApp({
    models: [model],
    gate: accountGate(admission),
    lifecycle,
    queueDepth: () => admission.waiting,
    readiness: { store: () => storeReady() },
    logger: {
      level: "info",
      stream: new Writable({
        write(chunk: Buffer, _encoding, callback) {
          logs.push(chunk.toString());
          callback();
        },
      }),
    },
  });
  url = await app.listen({ host: "127.0.0.1", port: 0 });
});

afterEach(async () => {
  await app.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const BODY = {
  model: "stub-1",
  state: "a state",
  questions: { q: { type: "noul", instructions: "Is it?" } },
};
const post = (key: string | undefined, headers: Record<string, string> = {}) =>
  postJson(`${url}/v1/systemone`, BODY, {
    ...(key ? { authorization: `Bearer ${key}` } : {}),
    ...headers,
  });

/** The /metrics text and its families as the parser reads them. */
async function scrape() {
  const res = await fetch(`${url}/metrics`);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return Object.assign(new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f])), { text });
}

function held(): () => void {
  let open!: () => void;
  model.hold = new Promise<void>((resolve) => (open = resolve));
  return open;
}

describe("/readyz", () => {
  it("is ready when every check answers, and says which one does not", async () => {
    const ok = await fetch(`${url}/readyz`);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ status: "ready", checks: { store: "ok" } });
    storeReady = () => Promise.reject(new Error("connection refused"));
    const down = await fetch(`${url}/readyz`);
    expect(down.status).toBe(503);
    expect(await down.json()).toEqual({
      status: "not_ready",
      checks: { store: "connection refused" },
    });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });
});

describe("drain", () => {
  it("answers what is in flight, refuses new requests with 503, and reports when idle", async () => {
    const { key } = await store.createKey("acme");
    const other = (await store.createKey("beta")).key;
    const open = held();
    const first = post(key);
    await expect.poll(() => model.ran).toBe(1);
    let drained: boolean | undefined;
    const drain = lifecycle.drain(60_000).then((d) => (drained = d));
    const refused = await post(other);
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(refused.headers.get("connection")).toBe("close");
    expect(refused.body.detail).toMatchObject({ error_type: "shutting_down" });
    expect(refused.body.detail.message).toContain("takes no new requests");
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { status: string }).status).toBe("draining");
    expect(drained).toBeUndefined();
    open();
    expect((await first).status).toBe(200);
    await drain;
    expect(drained).toBe(true);
    expect(model.ran).toBe(1);
    expect((await store.calls("acme")).map((c) => c.status)).toEqual([200]);
  });

  it("cuts what is left: the call in the model and the one waiting for its slot, both recorded", async () => {
    const { key } = await store.createKey("acme");
    const open = held();
    const running = post(key);
    await expect.poll(() => model.ran).toBe(1);
    const waiting = post(key, { "x-request-id": "second" });
    await expect.poll(() => admission.waiting).toBe(1);
    expect(await lifecycle.drain(50)).toBe(false);
    expect(await lifecycle.cut(5000)).toBe(true);
    for (const reply of [await running, await waiting]) {
      expect(reply.status).toBe(503);
      expect(reply.headers.get("retry-after")).toBe("1");
      expect(reply.body.detail).toMatchObject({ error_type: "shutting_down" });
      expect(reply.body.detail.message).toContain("stopped this request before its answer");
    }
    // The second call never reached the model: the queue refuses once cut.
    expect(model.ran).toBe(1);
    expect((await store.calls("acme")).map((c) => c.status)).toEqual([503, 503]);
    open();
  });

  it("cuts a call on OpenAI's wire the same way: 503 shutting_down in its shape, recorded", async () => {
    const { key } = await store.createKey("acme");
    held();
    const running = postJson(
      `${url}/v1/decisions`,
      {
        model: "stub-1",
        input: "a state",
        questions: [{ type: "predicate", name: "q", instructions: "It is." }],
      },
      { authorization: `Bearer ${key}` },
    );
    await expect.poll(() => model.ran).toBe(1);
    expect(await lifecycle.cut(5000)).toBe(true);
    const reply = await running;
    expect(reply.status).toBe(503);
    expect(reply.headers.get("retry-after")).toBe("1");
    expect(reply.headers.get("connection")).toBe("close");
    expect(reply.body.error).toMatchObject({ code: "shutting_down" });
    expect((await store.calls("acme")).map((c) => c.status)).toEqual([503]);
  });

  it("cuts bodies still arriving: 503 shutting_down, closed, with one listener for them all", async () => {
    const { key } = await store.createKey("acme");
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      // Twelve uploads that stop part way, as a slow client's would.
      const uploads = Array.from(
        { length: 12 },
        () =>
          new Promise<string>((resolve, reject) => {
            const socket = connect(Number(new URL(url).port), "127.0.0.1");
            let text = "";
            socket.write(
              `POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
                `Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model": "stub-1", "state": "`,
            );
            socket.on("data", (chunk: Buffer) => (text += chunk.toString()));
            socket.on("error", reject);
            socket.on("close", () => resolve(text));
          }),
      );
      await expect.poll(() => lifecycle.active).toBe(12);
      expect(await lifecycle.drain(50)).toBe(false);
      expect(await lifecycle.cut(5000)).toBe(true);
      for (const text of await Promise.all(uploads)) {
        const [head, json] = text.split("\r\n\r\n");
        expect(head).toMatch(/^HTTP\/1\.1 503 /);
        expect(head!.toLowerCase()).toContain("connection: close");
        expect(head!.toLowerCase()).toContain("retry-after: 1");
        expect(JSON.parse(json!).detail).toMatchObject({ error_type: "shutting_down" });
      }
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.map((warning) => warning.name)).toEqual([]);
    // None reached the model or took a slot, so none has a ledger row.
    expect(model.ran).toBe(0);
    expect(await store.calls("acme")).toEqual([]);
  });

  it("does not wait on a body still arriving: 503 after a grace, one sent in time answered", async () => {
    const { key } = await store.createKey("acme");
    const head =
      `POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nConnection: close\r\n`;
    const body = JSON.stringify(BODY);
    const upload = (sent: string) => {
      const socket = connect(Number(new URL(url).port), "127.0.0.1");
      socket.write(`${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${sent}`);
      const text = new Promise<string>((resolve, reject) => {
        let received = "";
        socket.on("data", (chunk: Buffer) => (received += chunk.toString()));
        socket.on("error", reject);
        socket.on("close", () => resolve(received));
      });
      return { socket, text };
    };
    // A slow client that stops part way, and one whose last bytes come just after SIGTERM.
    const stalled = upload(body.slice(0, 10));
    const late = upload(body.slice(0, 10));
    await expect.poll(() => lifecycle.active).toBe(2);
    const started = Date.now();
    const drained = lifecycle.drain(60_000);
    await new Promise((resolve) => setTimeout(resolve, 100));
    late.socket.write(body.slice(10));
    expect(await late.text).toMatch(/^HTTP\/1\.1 200 /);
    const [status, json] = (await stalled.text).split("\r\n\r\n");
    expect(status).toMatch(/^HTTP\/1\.1 503 /);
    expect(JSON.parse(json!).detail.message).toContain("stopped reading this request's body");
    expect(await drained).toBe(true);
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(DRAIN_BODY_GRACE_MS - 50);
    expect(waited).toBeLessThan(60_000 / 2);
    expect((await store.calls("acme")).map((c) => c.status)).toEqual([200]);
  });

  it("gives up after its time-out", async () => {
    const { key } = await store.createKey("acme");
    const open = held();
    const first = post(key);
    await expect.poll(() => model.ran).toBe(1);
    expect(await lifecycle.drain(50)).toBe(false);
    open();
    await first;
  });
});

describe("the work queue's cut", () => {
  it("aborts every admitted decision, and one decoding its media, with one listener", async () => {
    const cut = new AbortController();
    const queue = new WorkQueue({ capacity: 16, cut: cut.signal });
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      const seen: AbortSignal[] = [];
      const runs = Array.from({ length: 16 }, () =>
        queue.run((signal) => {
          seen.push(signal);
          return new Promise<never>(() => {}); // never answers, nor minds its signal
        }, new AbortController().signal),
      );
      // A decision still decoding its media, before the queue runs it.
      const decoding = queue.untilCut(new Promise<never>(() => {}));
      cut.abort();
      for (const run of runs) await expect(run).rejects.toBeInstanceOf(ShutdownError);
      await expect(decoding).rejects.toBeInstanceOf(ShutdownError);
      expect(seen.filter((signal) => signal.aborted)).toHaveLength(16);
      await expect(queue.run(async () => 1, new AbortController().signal)).rejects.toBeInstanceOf(
        ShutdownError,
      );
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.map((warning) => warning.name)).toEqual([]);
  });
});

describe("/metrics", () => {
  it("counts requests by status and error type, latency, tokens, in flight and queue depth", async () => {
    const { key } = await store.createKey("acme");
    expect((await post(key)).status).toBe(200);
    expect((await post(key)).status).toBe(200);
    expect((await post("dsk_" + "x".repeat(40))).status).toBe(401);
    const bad = await postJson(
      `${url}/v1/systemone`,
      { model: "stub-1" },
      {
        authorization: `Bearer ${key}`,
      },
    );
    expect(bad.status).toBe(422);

    // One call held in the model, one waiting behind it for the account's slot.
    const open = held();
    const running = post(key);
    await expect.poll(() => model.ran).toBe(3);
    const waiting = post(key);
    await expect.poll(() => admission.waiting).toBe(1);
    let families = await scrape();
    expect(families.get("decisiond_requests_in_flight")!.metrics[0]!.value).toBe("2");
    expect(families.get("decisiond_queue_depth")!.metrics[0]!.value).toBe("1");
    open();
    expect((await running).status).toBe(200);
    expect((await waiting).status).toBe(200);

    families = await scrape();
    const requests = families.get("decisiond_requests_total")!;
    expect(requests.type).toBe("COUNTER");
    const count = (status: string, errorType: string) =>
      Number(
        requests.metrics.find(
          (m) =>
            m.labels?.route === "/v1/systemone" &&
            m.labels.status === status &&
            m.labels.error_type === errorType,
        )?.value ?? 0,
      );
    expect(count("200", "")).toBe(4);
    expect(count("401", "authentication_error")).toBe(1);
    expect(count("422", "validation_error")).toBe(1);
    const duration = families.get("decisiond_request_duration_seconds")!;
    expect(duration.type).toBe("HISTOGRAM");
    // The parser keeps a histogram's buckets but not its labels: its series are read as text.
    expect(families.text).toContain(
      'decisiond_request_duration_seconds_count{route="/v1/systemone"} 6\n',
    );
    expect(families.text).toContain(
      'decisiond_request_duration_seconds_bucket{le="+Inf",route="/v1/systemone"} 6\n',
    );
    // Buckets up to the default deadline.
    expect(families.text).toContain(
      'decisiond_request_duration_seconds_bucket{le="300",route="/v1/systemone"} 6\n',
    );
    const tokens = families.get("decisiond_tokens_total")!;
    const byDirection = Object.fromEntries(
      tokens.metrics.map((m) => [m.labels!.direction, Number(m.value)]),
    );
    expect(byDirection).toEqual({ input: 4 * 40, output: 4 * 2 });
    expect(families.get("decisiond_requests_in_flight")!.metrics[0]!.value).toBe("0");
    expect(families.get("decisiond_engine_errors_total")!.metrics[0]!.value).toBe("0");
    expect(families.get("decisiond_draining")!.metrics[0]!.value).toBe("0");
    expect(families.has("process_cpu_seconds_total")).toBe(true);
  });

  it("counts option lists planned in windows by how they were read, and warns when they went off", async () => {
    const { key } = await store.createKey("acme");
    const plain = await post(key);
    expect(plain.headers.get("server-timing")).not.toMatch(/windows/);
    model.listWindows = { planned: 6, read: 5 };
    const windowed = await post(key);
    expect(windowed.status).toBe(200);
    expect(windowed.headers.get("server-timing")).toMatch(
      /^decide;dur=[\d.]+, windows;desc=5, app;dur=/,
    );
    model.listWindows = { planned: 6, read: 0, off: 120_000 };
    const whole = await post(key);
    expect(whole.headers.get("server-timing")).toMatch(/, windows;desc=0, /);
    const series = (await scrape()).get("decisiond_list_windows_total")!.metrics;
    expect(Object.fromEntries(series.map((m) => [m.labels!.read, m.value]))).toEqual({
      windows: "1",
      whole: "1",
    });
    const lines = logs.map((line) => JSON.parse(line) as Record<string, any>);
    const decided = lines.filter((l) => l.msg === "decided").map((l) => l.stats.listWindows);
    expect(decided).toEqual([
      undefined,
      { planned: 6, read: 5 },
      { planned: 6, read: 0, off: 120_000 },
    ]);
    const warned = lines.filter((l) => l.level === 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]!.msg).toMatch(/read whole for the next 120 s/);
  });

  it("counts a request whose client left before its answer as 499 client_closed", async () => {
    const { key } = await store.createKey("acme");
    const open = held();
    const controller = new AbortController();
    const left = fetch(`${url}/v1/systemone`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(BODY),
      signal: controller.signal,
    });
    await expect.poll(() => model.ran).toBe(1);
    controller.abort();
    await expect(left).rejects.toThrow();
    const closed = async () => {
      const requests = (await scrape()).get("decisiond_requests_total");
      const series = requests?.metrics.find((m) => m.labels?.status === "499");
      return series && { ...series.labels, value: series.value };
    };
    await expect
      .poll(closed)
      .toEqual({ route: "/v1/systemone", status: "499", error_type: "client_closed", value: "1" });
    open();
    expect((await post(key)).status).toBe(200); // its slot is free; nothing counted twice
    const families = await scrape();
    const statuses = families
      .get("decisiond_requests_total")!
      .metrics.filter((m) => m.labels?.route === "/v1/systemone")
      .map((m) => `${m.labels!.status} ${m.value}`);
    expect(statuses.sort()).toEqual(["200 1", "499 1"]);
  });

  it("counts a fault in the model as an engine error", async () => {
    const { key } = await store.createKey("acme");
    model.hold = Promise.reject(new Error("the engine went away"));
    model.hold.catch(() => {});
    const res = await post(key);
    expect(res.status).toBe(500);
    const families = await scrape();
    expect(families.get("decisiond_engine_errors_total")!.metrics[0]!.value).toBe("1");
  });

  it("counts an engine that does not answer (a remote one's 503) as an engine error", async () => {
    const { key } = await store.createKey("acme");
    model.hold = Promise.reject(
      new EngineUnavailableError("engineUnreachable", "e0: ECONNREFUSED", 1),
    );
    model.hold.catch(() => {});
    const res = await post(key);
    expect(res.status).toBe(503);
    const families = await scrape();
    expect(families.get("decisiond_engine_errors_total")!.metrics[0]!.value).toBe("1");
  });
});

describe("request ids", () => {
  it("keep a load balancer's id in the answer, the error body and every log line", async () => {
    const res = await post(undefined, { "x-request-id": "lb-1234.abc" });
    expect(res.status).toBe(401);
    expect(res.headers.get("x-request-id")).toBe("lb-1234.abc");
    expect(res.body.detail.request_id).toBe("lb-1234.abc");
    const lines = logs.map((l) => JSON.parse(l) as { reqId?: string; msg: string });
    const mine = lines.filter((l) => l.reqId === "lb-1234.abc");
    expect(mine.map((l) => l.msg)).toEqual(["incoming request", "request completed"]);
    for (const line of lines.filter(
      (l) => l.msg.startsWith("request") || l.msg.startsWith("incoming"),
    ))
      expect(line.reqId).toBeDefined();
    // An id that is not a safe token is replaced by a fresh UUID.
    const odd = await post(undefined, { "x-request-id": "a b<script>" });
    expect(odd.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("allowance", () => {
  it("refuses a call that would overrun it before the model runs", async () => {
    const { key } = await store.createKey("acme");
    await store.setAllowance("acme", { tokens: 100, period: "day" });
    expect((await post(key)).status).toBe(200); // 42 used
    expect((await post(key)).status).toBe(200); // 84 used, 16 left
    const refused = await post(key); // needs 42
    expect(refused.status).toBe(429);
    expect(refused.body.detail.error_type).toBe("allowance_exhausted");
    expect(refused.body.detail.message).toBe(
      'this call needs 42 tokens but account "acme" has 16 of its 100 left today (UTC): it was not run; ' +
        `it renews at ${new Date(new Date().setUTCHours(24, 0, 0, 0)).toISOString()}`,
    );
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(model.ran).toBe(2);
    const [usage] = await store.usage("acme");
    expect(usage!.allowance).toMatchObject({ used: 84, reserved: 0, remaining: 16 });
  });
});
