import { Command } from "commander";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import { buildApp, type FastifyInstance } from "../src/api/app.js";
import { corsOrigin } from "../src/api/cors.js";
import { accountGate } from "../src/api/gate.js";
import { serveOptions, toServeConfig, type ServeFlags } from "../src/cli/serve-config.js";
import { StubModel } from "./support/stub-model.js";

/**
 * Cross-origin calls from a browser (`serve --cors-origin`, src/api/cors.ts) on the real HTTP
 * stack with a stand-in model and a real SQLite accounts store: what a browser's preflight and
 * its request get back, with and without origins configured; and how `serve` reads its origins
 * (and the other variables an empty value slipped through).
 */

const PAGE = "https://app.example.com";
const REQUEST = {
  model: "stub-1",
  state: "a ticket",
  questions: { refund: { type: "noul", instructions: "Is this a refund request?" } },
};

let home: string;
let sqlite: SqliteStore;
let app: FastifyInstance;
let url: string;
let key: string;

async function start(corsOrigins?: string[]): Promise<void> {
  app = await buildApp({
    models: [new StubModel()],
    gate: accountGate(new Admission(sqlite)),
    logger: false,
    corsOrigins,
  });
  url = await app.listen({ host: "127.0.0.1", port: 0 });
}

beforeEach(async () => {
  home = await mkdtemp(join(tmpdir(), "decisiond-cors-"));
  sqlite = SqliteStore.open(join(home, "decisiond.db"));
  key = (await sqlite.createKey("team-a")).key;
});

afterEach(async () => {
  await app?.close();
  sqlite.close();
  await rm(home, { recursive: true, force: true });
});

/** A browser's preflight of a JSON POST with a bearer key and one of the openai SDK's headers. */
function preflight(path: string, origin = PAGE) {
  return fetch(`${url}${path}`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization,content-type,x-stainless-os",
    },
  });
}

/** The request a browser sends after its preflight, from `origin`. */
function post(path: string, origin = PAGE, bearer = key) {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { origin, authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: JSON.stringify(REQUEST),
  });
}

describe("serve --cors-origin", () => {
  it("without origins, a preflight gets the API's 404 and no answer names an origin", async () => {
    await start();
    const answer = await preflight("/v1/systemone");
    expect(answer.status).toBe(404);
    expect(((await answer.json()) as any).detail.error_type).toBe("not_found");
    const decided = await post("/v1/systemone");
    expect(decided.status).toBe(200);
    expect(decided.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("answers an allowed origin's preflight without a key, and lets its page read the answer", async () => {
    await start([PAGE, "http://localhost:5173"]);
    const answer = await preflight("/v1/systemone");
    expect(answer.status).toBe(204);
    expect(answer.headers.get("access-control-allow-origin")).toBe(PAGE);
    expect(answer.headers.get("access-control-allow-methods")).toBe("GET, POST");
    expect(answer.headers.get("access-control-allow-headers")).toBe(
      "authorization,content-type,x-stainless-os",
    );
    expect(answer.headers.get("access-control-allow-credentials")).toBeNull();
    expect(answer.headers.get("vary")).toMatch(/Origin/);

    const decided = await post("/v1/systemone");
    expect(decided.status).toBe(200);
    expect(((await decided.json()) as any).answers.refund.noul).toBe(0.75);
    expect(decided.headers.get("access-control-allow-origin")).toBe(PAGE);
    expect(decided.headers.get("access-control-expose-headers")).toBe(
      "x-request-id, x-typesafe-request-id, retry-after, retry-after-ms",
    );
    // A refusal is readable too: the page can tell a bad key from a network fault.
    const refused = await post("/v1/decisions", PAGE, "ts-wrong");
    expect(refused.status).toBe(401);
    expect(refused.headers.get("access-control-allow-origin")).toBe(PAGE);
    const unknown = await fetch(`${url}/v1/nothing-here`, { headers: { origin: PAGE } });
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get("access-control-allow-origin")).toBe(PAGE);
  });

  it("names no other origin, and keeps the console, probes and metrics same-origin", async () => {
    await start([PAGE]);
    const other = await preflight("/v1/systemone", "https://evil.example");
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    const otherPost = await post("/v1/systemone", "https://evil.example");
    expect(otherPost.headers.get("access-control-allow-origin")).toBeNull();
    for (const path of ["/console/api/keys", "/metrics", "/healthz"]) {
      const answer = await preflight(path);
      expect({ path, status: answer.status }).toEqual({ path, status: 404 });
      expect(((await answer.json()) as any).detail.error_type).toBe("not_found");
      expect(answer.headers.get("access-control-allow-origin")).toBeNull();
    }
    const metrics = await fetch(`${url}/metrics`, { headers: { origin: PAGE } });
    expect(metrics.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("* lets any page call the API", async () => {
    await start(["*"]);
    const answer = await preflight("/v1/models", "https://anywhere.example");
    expect(answer.status).toBe(204);
    expect(answer.headers.get("access-control-allow-origin")).toBe("*");
    const models = await fetch(`${url}/v1/models`, {
      headers: { origin: "https://anywhere.example", authorization: `Bearer ${key}` },
    });
    expect(models.status).toBe(200);
    expect(models.headers.get("access-control-allow-origin")).toBe("*");
  });
});

describe("--cors-origin's values", () => {
  it("takes origins as a browser sends them, and * for any", () => {
    for (const entry of ["*", PAGE, "http://localhost:5173", "http://[::1]:8080"])
      expect(corsOrigin(entry)).toBe(entry);
  });

  it("refuses a path, a trailing slash, upper case, a bare host, no scheme or a wildcard host, saying why", () => {
    for (const entry of [
      "https://app.example.com/",
      "https://app.example.com/api",
      "https://App.example.com",
      "app.example.com",
      "localhost:5173",
      "file:///tmp/page.html",
    ])
      expect(() => corsOrigin(entry), entry).toThrow(
        /is not an origin: .*scheme:\/\/host\[:port\]/,
      );
    // A wildcard inside a host would be compared as text and match no page.
    expect(() => corsOrigin("https://*.example.com")).toThrow(/a wildcard stands only alone/);
  });

  /** `serve`'s CORS origins from its flags and `DECISIOND_CORS_ORIGIN`. */
  function serveOrigins(argv: string[], variable?: string) {
    return serveConfig(argv, "DECISIOND_CORS_ORIGIN", variable).service.corsOrigins;
  }

  it("reads comma-separated or repeated flags, or the variable, and none by default", () => {
    expect(serveOrigins([])).toEqual([]);
    expect(serveOrigins(["--cors-origin", `${PAGE}, http://localhost:5173`])).toEqual([
      PAGE,
      "http://localhost:5173",
    ]);
    expect(serveOrigins(["--cors-origin", PAGE, "--cors-origin", "*"])).toEqual([PAGE, "*"]);
    expect(serveOrigins([], PAGE)).toEqual([PAGE]);
    expect(() => serveOrigins(["--cors-origin", `${PAGE}/`])).toThrow(/is not an origin/);
    // An empty variable is refused, as every other DECISIOND_* variable is.
    expect(() => serveOrigins([], "")).toThrow(/name at least one origin/);
    expect(() => serveOrigins([], " , ")).toThrow(/name at least one origin/);
  });
});

describe("an empty DECISIOND_* variable", () => {
  it("is refused naming it, rather than taken for a setting", () => {
    // An empty host would bind every interface; an empty token file would be read as a file.
    for (const variable of [
      "DECISIOND_HOST",
      "DECISIOND_MODEL",
      "DECISIOND_ADMIN_TOKEN_FILE",
      "DECISIOND_STORE",
    ])
      expect(() => serveConfig([], variable, ""), variable).toThrow(
        new RegExp(`from env '${variable}' is invalid\\. it is empty`),
      );
    // An empty admin token would turn admin sign-in off without a word.
    expect(() => serveConfig([], "DECISIOND_ADMIN_TOKEN", "")).toThrow(
      /^DECISIOND_ADMIN_TOKEN is empty/,
    );
  });
});

describe("an empty or unknown DECISIOND_LOG_LEVEL", () => {
  it("is refused naming the levels, as other variables are", () => {
    expect(serveConfig([], "DECISIOND_LOG_LEVEL", "debug").service.logger).toEqual({
      level: "debug",
    });
    for (const value of ["", "verbose"])
      expect(() => serveConfig([], "DECISIOND_LOG_LEVEL", value), value).toThrow(
        /expected one of fatal, error, warn, info, debug, trace, silent/,
      );
  });
});

/** `serve`'s configuration from its flags, with `variable` set to `value` (unset: `undefined`). */
function serveConfig(argv: string[], variable: string, value?: string) {
  const command = new Command().exitOverride().configureOutput({ writeErr: () => {} });
  for (const option of serveOptions()) command.addOption(option);
  const before = process.env[variable];
  if (value === undefined) delete process.env[variable];
  else process.env[variable] = value;
  try {
    command.parse(argv, { from: "user" });
  } finally {
    if (before === undefined) delete process.env[variable];
    else process.env[variable] = before;
  }
  // The variables read outside commander (secrets) come in `env`.
  return toServeConfig(
    command.opts<ServeFlags>(),
    value === undefined ? {} : { [variable]: value },
  );
}
