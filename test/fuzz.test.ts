import fc from "fast-check";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import { buildApp, type FastifyInstance } from "../src/api/app.js";
import { accountGate } from "../src/api/gate.js";
import { StubModel } from "./support/stub-model.js";
import { consoleMount } from "../src/console/plugin.js";

/**
 * The fuzz suite (issues 31 and 47): 20,000 generated bad or odd requests against every
 * served route (fast-check, through Fastify's `inject`: the whole request lifecycle without a
 * socket), with a stand-in model. Every request must get an answer below 500, within the hang
 * bound, in the API's JSON error shape. Found and fixed with it: a corrupt gzip body whose
 * content type no parser takes crashed the server; `application/json; charset=utf-8` got 415.
 * `POST /v1/decisions` (issue 45) is fuzzed beside it, its errors in OpenAI's shape.
 * Run it: `npx vitest run test/fuzz.test.ts` (seed printed on failure; FUZZ_RUNS to change the count).
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 20_000);
/** A request slower than this counts as a hang (the 99th percentile is printed, for bench notes). */
const HANG_MS = 5_000;

let home: string;
let store: AccountStore;
let app: FastifyInstance;
let key: string;
const model = new StubModel();

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "decisiond-fuzz-"));
  store = SqliteStore.open(join(home, "decisiond.db"));
  key = (await store.createKey("fuzz")).key;
  app = await buildApp({
    models: [model],
    gate: accountGate(new Admission(store, { waitMs: 0 })),
    logger: false,
    mounts: [consoleMount({ store, adminToken: "fuzz-admin-token-0123456789abcdef" })],
    bodyLimit: 256 * 1024,
  });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await store?.close();
  await rm(home, { recursive: true, force: true });
});

const VALID = {
  model: "stub-1",
  state: { ticket: "charged twice" },
  questions: {
    refund: { type: "noul", instructions: "Refund?" },
    team: { type: "choice", criteria: { billing: null, tech: "bugs" } },
    urgency: { type: "score", criteria: ["low", "high"] },
  },
};

/** A valid `POST /v1/decisions` body (OpenAI's Decisions wire): every question and input kind. */
const VALID_DECISIONS = {
  model: "stub-1",
  input: [
    { role: "user", content: [{ type: "input_text", text: "charged twice" }] },
    { type: "function_call", call_id: "c1", name: "lookup", arguments: "{}" },
    { type: "function_call_output", call_id: "c1", output: "two charges" },
  ],
  questions: [
    { type: "predicate", name: "refund", instructions: "Refund?" },
    { type: "choice", instructions: "Team?", choices: [{ value: "billing" }, { value: true }] },
    { type: "score", instructions: "Urgency?", levels: [{ label: "low" }, { label: "high" }] },
  ],
};

/** Odd JSON values: deep nesting, huge and non-finite-looking numbers, odd keys and strings. */
const oddJsonText = fc.oneof(
  fc.json({ maxDepth: 4 }),
  fc.integer({ min: 1, max: 20_000 }).map((d) => "[".repeat(d) + "1" + "]".repeat(d)),
  fc.integer({ min: 1, max: 20_000 }).map((d) => '{"a":'.repeat(d) + "1" + "}".repeat(d)),
  fc.constantFrom("1e999999", "-1e999999", "NaN", "Infinity", "1e-999999", "-0", "0x10", "01"),
  fc.constantFrom(
    '"\\ud800"',
    '"\\u0000"',
    '"</state>"',
    '"__proto__"',
    "null",
    "true",
    "[]",
    "{}",
  ),
  fc.string({ unit: "binary", maxLength: 200 }).map((s) => JSON.stringify(s)),
);

/** A valid body with one part replaced by something odd (as JSON text). */
const mutatedBody = fc
  .tuple(
    fc.constantFrom(
      ["state"],
      ["model"],
      ["questions"],
      ["questions", "refund"],
      ["questions", "refund", "type"],
      ["questions", "refund", "instructions"],
      ["questions", "team", "criteria"],
      ["questions", "team", "criteria", "billing"],
      ["questions", "urgency", "criteria"],
      ["questions", "urgency", "criteria", 0],
      ["images"],
      ["videos"],
      ["questions", "__proto__"],
      ["questions", "team", "criteria", "__proto__"],
    ),
    oddJsonText,
  )
  .map(([path, odd]) => {
    const marker = "\u0000ODD\u0000";
    const body = structuredClone(VALID) as Record<string, unknown>;
    let at: Record<string | number, unknown> = body;
    for (const part of path.slice(0, -1)) at = at[part] as Record<string | number, unknown>;
    at[path[path.length - 1]!] = marker;
    // __proto__ assignment on a plain object sets the prototype: write the key into the text.
    const text = JSON.stringify(body).replace(JSON.stringify(marker), odd);
    return path[path.length - 1] === "__proto__"
      ? JSON.stringify(VALID).replace('"questions":{', `"questions":{"__proto__":${odd},`)
      : text;
  });

/** A valid Decisions body with one part replaced by something odd (as JSON text). */
const mutatedDecisionsBody = fc
  .tuple(
    fc.constantFrom(
      ["input"],
      ["model"],
      ["questions"],
      ["questions", 0],
      ["questions", 0, "type"],
      ["questions", 0, "instructions"],
      ["questions", 1, "choices"],
      ["questions", 1, "choices", 0],
      ["questions", 1, "choices", 1, "value"],
      ["questions", 2, "levels"],
      ["questions", 2, "levels", 0, "label"],
      ["input", 0],
      ["input", 0, "role"],
      ["input", 0, "content"],
      ["input", 0, "content", 0],
      ["input", 0, "content", 0, "type"],
      ["input", 1, "call_id"],
      ["input", 2, "output"],
      ["safety_identifier"],
      ["prompt_cache_key"],
    ),
    fc.oneof(
      oddJsonText,
      fc.constantFrom(
        '{"type":"input_image","image_url":"https://example.com/a.png"}',
        '{"type":"input_image","image_url":"data:image/png;base64,AAAA"}',
        '[{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]',
        JSON.stringify(Array.from({ length: 256 }, (_, i) => ({ value: `c${i}` }))),
        JSON.stringify(
          Array.from({ length: 401 }, () => ({ type: "predicate", instructions: "x" })),
        ),
        JSON.stringify("x".repeat(100_000)),
        '[{"value":"a"},{"value":"a"}]',
        '[{"value":"true"},{"value":true}]',
        '[{"value":"__proto__"},{"value":"b"}]',
      ),
    ),
  )
  .map(([path, odd]) => {
    const marker = "\u0000ODD\u0000";
    const body = structuredClone(VALID_DECISIONS) as Record<string, unknown>;
    let at: Record<string | number, unknown> = body;
    for (const part of path.slice(0, -1)) at = at[part] as Record<string | number, unknown>;
    at[path[path.length - 1]!] = marker;
    return JSON.stringify(body).replace(JSON.stringify(marker), odd);
  });

const rawBody = fc.oneof(
  mutatedBody,
  mutatedDecisionsBody,
  fc.constant(JSON.stringify(VALID_DECISIONS)),
  oddJsonText,
  fc.constant(JSON.stringify(VALID)),
  fc.string({ maxLength: 300 }),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString("latin1")),
  fc.constantFrom("", " ", "{", '{"model":', "\u0000\u0001", "[1,,2]"),
);

const contentType = fc.oneof(
  { arbitrary: fc.constant("application/json"), weight: 4 },
  fc.constantFrom(
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=latin1",
    "APPLICATION/JSON",
    "application/vnd.api+json",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json;;;",
    "",
  ),
  fc.string({ maxLength: 40 }),
);

const encoding = fc.constantFrom(
  undefined,
  "identity",
  "gzip",
  "deflate",
  "br",
  "zstd",
  "gzip, br",
  "compress",
  "x-gzip",
  "zstd-corrupt",
  "gzip-corrupt",
);

const auth = fc.oneof(
  { arbitrary: fc.constant("good"), weight: 6 },
  fc.constantFrom(undefined, "Bearer", "Bearer ", "Basic abc", "Bearer dsk_nope", "bearer  x  y"),
  fc.string({ maxLength: 60 }).map((s) => `Bearer ${s}`),
);

const route = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      ["POST", "/v1/systemone"],
      ["POST", "/v1/systemone"],
      ["POST", "/v1/systemone"],
      ["POST", "/v1/decisions"],
      ["GET", "/v1/decisions"],
      ["GET", "/v1/systemone"],
      ["GET", "/v1/models"],
      ["GET", "/healthz"],
      ["GET", "/openapi.json"],
      ["GET", "/console/api/config"],
      ["GET", "/console/api/session"],
      ["GET", "/console/api/keys"],
      ["POST", "/console/api/keys"],
      ["POST", "/console/api/keys/999/revoke"],
      ["POST", "/console/api/keys/abc/revoke"],
      ["GET", "/console/api/usage?days=-1"],
      ["GET", "/console/api/usage?days=99999999999"],
      ["PUT", "/v1/systemone"],
      ["DELETE", "/console/api/keys"],
      ["POST", "/no/such/route"],
    ),
  },
  { weight: 6, arbitrary: fc.constant(["POST", "/v1/systemone"]) },
  { weight: 4, arbitrary: fc.constant(["POST", "/v1/decisions"]) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom("GET", "POST", "PATCH", "OPTIONS", "HEAD"), fc.webPath())
      .map(([m, p]) => [m, p.startsWith("/") ? p : `/${p}`]),
  },
) as fc.Arbitrary<[string, string]>;

/** One generated request. */
const request = fc.record({ route, body: rawBody, contentType, encoding, auth });

function encode(body: string, coding: string | undefined): Buffer {
  const raw = Buffer.from(body, "utf8");
  switch (coding) {
    case "gzip":
    case "x-gzip":
      return gzipSync(raw);
    case "deflate":
      return deflateSync(raw);
    case "br":
      return brotliCompressSync(raw);
    case "zstd": {
      // Raw blocks of at most 128 KiB in one frame (no content size, 128 KiB window).
      const parts = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38])];
      for (let at = 0; ; at += 1 << 17) {
        const chunk = raw.subarray(at, at + (1 << 17));
        const last = at + (1 << 17) >= raw.length ? 1 : 0;
        const header = (chunk.length << 3) | last;
        parts.push(Buffer.from([header & 0xff, (header >> 8) & 0xff, header >> 16]), chunk);
        if (last) return Buffer.concat(parts);
      }
    }
    case "zstd-corrupt":
      return Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xa7]), raw]);
    case "gzip-corrupt":
      return Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0]), raw]);
    default:
      return raw;
  }
}

describe("fuzz: generated bad and odd requests against the served routes", () => {
  it(`${RUNS} requests: no 5xx, no hang, every error in the API's JSON shape`, async () => {
    const durations: number[] = [];
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const [method, url] = r.route;
        const headers: Record<string, string> = {};
        if (r.contentType !== "") headers["content-type"] = r.contentType;
        if (r.encoding) headers["content-encoding"] = r.encoding.replace(/-corrupt$/, "");
        if (r.auth === "good") headers.authorization = `Bearer ${key}`;
        else if (r.auth !== undefined) headers.authorization = r.auth;
        const bodyless = method === "GET" || method === "HEAD";
        const started = performance.now();
        const reply = await app.inject({
          method: method as "GET",
          url,
          headers,
          ...(bodyless ? {} : { payload: encode(r.body, r.encoding) }),
        });
        const ms = performance.now() - started;
        durations.push(ms);
        statuses.set(reply.statusCode, (statuses.get(reply.statusCode) ?? 0) + 1);
        expect(reply.statusCode, `${method} ${url}: ${reply.body.slice(0, 300)}`).toBeLessThan(500);
        expect(ms, `${method} ${url} took ${ms.toFixed(0)} ms`).toBeLessThan(HANG_MS);
        if (reply.statusCode >= 400 && method !== "HEAD") {
          const body = JSON.parse(reply.body) as { detail?: unknown; error?: unknown };
          // The Decisions wire answers in OpenAI's shape, every other route in System One's.
          if (method === "POST" && url === "/v1/decisions")
            expect(body.error, reply.body.slice(0, 300)).toMatchObject({
              message: expect.any(String),
              type: expect.any(String),
            });
          else expect(body.detail, reply.body.slice(0, 300)).toBeDefined();
        }
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
    durations.sort((a, b) => a - b);
    const p = (q: number) =>
      durations[Math.min(durations.length - 1, Math.floor(q * durations.length))]!;
    console.log(
      `fuzz: ${durations.length} requests; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; ` +
        `p50 ${p(0.5).toFixed(2)} ms, p99 ${p(0.99).toFixed(2)} ms, max ${durations[durations.length - 1]!.toFixed(2)} ms`,
    );
    expect(durations.length).toBe(RUNS);
  }, 600_000);
});
