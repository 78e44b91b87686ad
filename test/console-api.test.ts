import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { Writable } from "node:stream";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import { buildApp, type FastifyInstance } from "../src/api/app.js";
import { serveConsole } from "../src/service/build.js";
import { readAdminToken } from "../src/cli/admin-token.js";
import { SECURITY_HEADERS } from "../src/console/assets.js";
import { checkAdminToken } from "../src/console/auth.js";
import { consoleMount, type ConsoleOptions } from "../src/console/plugin.js";

/**
 * The console's JSON API (/console/api) and the serving of its front end, in-process through
 * Fastify's inject on a real store in a temporary directory.
 */

const ADMIN = "console-test-admin-token-0123456789";
const DAY = 86_400_000;

let dir: string;
let store: AccountStore;
let now: number;
let app: FastifyInstance;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-console-"));
  now = Date.UTC(2026, 10, 21, 15, 30);
  store = SqliteStore.open(join(dir, "decisiond.db"), { now: () => now });
});

afterEach(async () => {
  await app?.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

async function start(options: Partial<ConsoleOptions> = {}): Promise<FastifyInstance> {
  app = await buildApp({
    models: [],
    logger: false,
    mounts: [consoleMount({ store, adminToken: ADMIN, now: () => now, ...options })],
  });
  return app;
}

async function call(
  method: "GET" | "POST",
  url: string,
  credential?: string,
  body?: unknown,
): Promise<{ status: number; body: any; headers: Record<string, unknown> }> {
  const response = await app.inject({
    method,
    url,
    headers: {
      ...(credential !== undefined ? { authorization: `Bearer ${credential}` } : {}),
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
    },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  return { status: response.statusCode, body: response.json(), headers: response.headers };
}

describe("console sign-in", () => {
  it("logs a wrong admin token at warn, and nothing of the token", async () => {
    // probe33: 300 wrong admin tokens in 2.3 s left only info-level "request completed" lines.
    const lines: { level: number; msg: string }[] = [];
    let logged = "";
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logged += chunk.toString();
        lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
        done();
      },
    });
    app = await buildApp({
      models: [],
      logger: { level: "info", stream },
      mounts: [consoleMount({ store, adminToken: ADMIN, now: () => now })],
    });
    const guess = `wrong-${"x".repeat(30)}`;
    expect((await call("GET", "/console/api/session", guess)).status).toBe(401);
    expect((await call("GET", "/console/api/session", `dsk_${"y".repeat(40)}`)).status).toBe(401);
    expect((await call("GET", "/console/api/session", ADMIN)).status).toBe(200);
    const warned = lines.filter((line) => line.level === 40).map((line) => line.msg);
    expect(warned).toEqual(["console: a wrong admin token was refused"]);
    expect(logged).not.toContain(guess);
    expect(logged).not.toContain(ADMIN);
  });

  it("tells what sign-in the server offers, without a credential", async () => {
    await start();
    expect((await call("GET", "/console/api/config")).body).toEqual({
      auth: true,
      admin_sign_in: true,
    });
    await app.close();
    await start({ adminToken: undefined });
    expect((await call("GET", "/console/api/config")).body).toEqual({
      auth: true,
      admin_sign_in: false,
    });
  });

  it("a key is its account (and is marked as used); the admin token is the admin", async () => {
    await start();
    const { key, record } = await store.createKey("acme", "laptop");
    now += 60_000;
    const session = await call("GET", "/console/api/session", key);
    expect(session.status).toBe(200);
    expect(session.body).toMatchObject({
      role: "account",
      account: "acme",
      key: { id: record.id, prefix: record.prefix, label: "laptop" },
    });
    expect(session.body.key.last_used_at).toBe(new Date(now).toISOString());
    expect(JSON.stringify(session.body)).not.toContain(key);
    expect((await call("GET", "/console/api/session", ADMIN)).body).toEqual({ role: "admin" });
  });

  it("refuses missing, malformed, unknown and revoked credentials with 401", async () => {
    await start();
    const { key, record } = await store.createKey("acme");
    const refused = async (header: Record<string, string>, message: RegExp) => {
      const r = await app.inject({ method: "GET", url: "/console/api/session", headers: header });
      expect(r.statusCode).toBe(401);
      expect(r.headers["www-authenticate"]).toMatch(/^Bearer /);
      expect(r.json().detail).toMatchObject({ error_type: "authentication_error" });
      expect(r.json().detail.message).toMatch(message);
    };
    await refused({}, /sign in/);
    await refused({ authorization: `Basic ${key}` }, /must be Bearer/);
    await refused({ authorization: `Bearer dsk_${"x".repeat(40)}` }, /invalid API key/);
    await refused({ authorization: `Bearer ${ADMIN}x` }, /invalid API key or admin token/);
    await store.revokeKey(record.id);
    await refused({ authorization: `Bearer ${key}` }, /was revoked/);
  });

  it("without an admin token, nothing but a key signs in, and the refusal says why", async () => {
    await start({ adminToken: undefined });
    const r = await call("GET", "/console/api/session", ADMIN);
    expect(r.status).toBe(401);
    expect(r.body.detail.message).toMatch(/admin sign-in is off.*DECISIOND_ADMIN_TOKEN/);
  });

  it("admin tokens must be long, without whitespace, and not shaped like a key", async () => {
    expect(checkAdminToken(ADMIN)).toBe(ADMIN);
    expect(() => checkAdminToken("short")).toThrow(/too short.*openssl rand/);
    expect(() => checkAdminToken(`${"a".repeat(20)} ${"b".repeat(20)}`)).toThrow(/whitespace/);
    expect(() => checkAdminToken(`dsk_${"a".repeat(40)}`)).toThrow(/API key/);
    await expect(
      buildApp({
        models: [],
        logger: false,
        mounts: [consoleMount({ store, adminToken: "weak" })],
      }),
    ).rejects.toThrow(/too short/);
  });
});

describe("a key can never act on another account", () => {
  it("lists, creates, revokes and reads usage of its own account only", async () => {
    await start();
    const mine = await store.createKey("acme", "mine");
    const theirs = await store.createKey("other", "theirs");
    await store.recordCall({
      accountId: theirs.record.accountId,
      keyId: theirs.record.id,
      at: now,
      inputTokens: 100,
      outputTokens: 1,
      model: undefined,
      status: 200,
    });
    const key = mine.key;

    // Lists: its own account and keys only, whether or not it names them.
    const accounts = await call("GET", "/console/api/accounts", key);
    expect(accounts.body.accounts.map((a: any) => a.name)).toEqual(["acme"]);
    const keys = await call("GET", "/console/api/keys", key);
    expect(keys.body.keys.map((k: any) => k.account)).toEqual(["acme"]);

    // Naming another account is refused, the same for one that exists and one that does not.
    for (const account of ["other", "nobody"]) {
      const listed = await call("GET", `/console/api/keys?account=${account}`, key);
      expect(listed.status).toBe(403);
      expect(listed.body.detail.error_type).toBe("permission_denied");
      const created = await call("POST", "/console/api/keys", key, { account, label: "x" });
      expect(created.status).toBe(403);
      const usage = await call("GET", `/console/api/usage?account=${account}`, key);
      expect(usage.status).toBe(403);
      // Nothing of the other account's usage (101 tokens) leaks; the random request id is not
      // part of what is checked, since a UUID can hold "101" by chance.
      const detail = { ...usage.body.detail, request_id: undefined };
      expect(detail.error_type).toBe("permission_denied");
      expect(JSON.stringify(detail)).not.toContain("101");
    }
    expect(await store.listKeys("other")).toHaveLength(1);
    expect(await store.findAccount("nobody")).toBeUndefined();

    // Another account's key is "not found", like a key that does not exist.
    const revoke = await call("POST", `/console/api/keys/${theirs.record.id}/revoke`, key);
    expect(revoke.status).toBe(404);
    expect(revoke.body.detail.message).toBe(`no key with id ${theirs.record.id} in account "acme"`);
    expect((await call("POST", "/console/api/keys/999/revoke", key)).body).toMatchObject({
      detail: { error_type: "not_found", message: 'no key with id 999 in account "acme"' },
    });
    expect((await store.keyById(theirs.record.id))?.revokedAt).toBeUndefined();

    // Its own account: create (without naming it, or naming it), then revoke.
    const created = await call("POST", "/console/api/keys", key, { label: "ci" });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ account: "acme", label: "ci", account_created: false });
    expect((await store.findKey(created.body.key))?.account.name).toBe("acme");
    const named = await call("POST", "/console/api/keys", key, { account: "acme" });
    expect(named.status).toBe(201);
    // probe33: a body was taken and the key revoked; a 23-digit id was "not in digits".
    const bodied = await call("POST", `/console/api/keys/${created.body.id}/revoke`, key, { x: 1 });
    expect(bodied.status).toBe(422);
    expect(bodied.body.detail[0]).toMatchObject({ loc: ["body"] });
    expect(bodied.body.detail[0].msg).toContain("takes no body");
    expect((await store.findKey(created.body.key))?.key.revokedAt).toBeUndefined();
    const huge = await call("POST", "/console/api/keys/99999999999999999999999/revoke", key);
    expect(huge.status).toBe(422);
    expect(huge.body.detail[0].msg).toBe("A key id is at most 9007199254740991");
    const revoked = await call("POST", `/console/api/keys/${created.body.id}/revoke`, key, {});
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ id: created.body.id, already_revoked: false });
    expect(revoked.body.revoked_at).toBe(new Date(now).toISOString());
    expect((await store.findKey(created.body.key))?.key.revokedAt).toBe(now);
    const again = await call("POST", `/console/api/keys/${created.body.id}/revoke`, key);
    expect(again.body.already_revoked).toBe(true);

    // A key that revokes itself is signed out on its next request.
    await call("POST", `/console/api/keys/${mine.record.id}/revoke`, key);
    expect((await call("GET", "/console/api/keys", key)).status).toBe(401);
  });
});

describe("the admin", () => {
  it("manages every account: lists, filters, creates (new accounts too) and revokes", async () => {
    await start();
    await store.createKey("acme", "a");
    const b = await store.createKey("beta", "b");
    await store.setAllowance("beta", { tokens: 1000, period: "day" });

    const accounts = await call("GET", "/console/api/accounts", ADMIN);
    expect(accounts.body.accounts).toEqual([
      { name: "acme", created_at: new Date(now).toISOString(), allowance: null, active_keys: 1 },
      {
        name: "beta",
        created_at: new Date(now).toISOString(),
        allowance: {
          tokens: 1000,
          period: "day",
          used: 0,
          remaining: 1000,
          renews_at: "2026-11-22T00:00:00.000Z",
        },
        active_keys: 1,
      },
    ]);
    expect((await call("GET", "/console/api/keys", ADMIN)).body.keys).toHaveLength(2);
    const beta = await call("GET", "/console/api/keys?account=beta", ADMIN);
    expect(beta.body.keys.map((k: any) => k.prefix)).toEqual([b.record.prefix]);
    const ghost = await call("GET", "/console/api/keys?account=ghost", ADMIN);
    expect(ghost.status).toBe(404);
    expect(ghost.body.detail.message).toBe('no account "ghost"');
    const long = await call("GET", `/console/api/keys?account=${"g".repeat(300)}`, ADMIN);
    expect(long.body.detail.message).toBe(`no account "${"g".repeat(40)}…"`);

    const created = await call("POST", "/console/api/keys", ADMIN, {
      account: "gamma",
      label: "  first  ",
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      account: "gamma",
      label: "first",
      account_created: true,
      last_used_at: null,
      revoked_at: null,
    });
    expect(created.body.key).toMatch(/^dsk_[0-9A-Za-z]{40}$/);
    expect(created.body.prefix).toBe(created.body.key.slice(0, 12));
    expect(created.headers["cache-control"]).toBe("no-store");
    // The key is not kept: later listings have its prefix only.
    const listed = await call("GET", "/console/api/keys?account=gamma", ADMIN);
    expect(JSON.stringify(listed.body)).not.toContain(created.body.key);

    const revoked = await call("POST", `/console/api/keys/${b.record.id}/revoke`, ADMIN);
    expect(revoked.body).toMatchObject({ account: "beta", already_revoked: false });
  });

  it("names the account of a key to create and of the usage to read", async () => {
    await start();
    const created = await call("POST", "/console/api/keys", ADMIN, { label: "x" });
    expect(created.status).toBe(422);
    expect(created.body.detail).toEqual([
      {
        loc: ["body", "account"],
        msg: "Field required: an admin names the account",
        type: "missing",
      },
    ]);
    const usage = await call("GET", "/console/api/usage", ADMIN);
    expect(usage.status).toBe(422);
    expect(usage.body.detail[0].loc).toEqual(["query", "account"]);
  });
});

describe("validation", () => {
  it("answers 422 saying what is wrong and where", async () => {
    await start();
    const { key } = await store.createKey("acme");
    const bad = async (method: "GET" | "POST", url: string, body: unknown, loc: unknown[]) => {
      const r = await call(method, url, key, body);
      expect(r.status, url).toBe(422);
      expect(r.body.detail.map((d: any) => d.loc)).toContainEqual(loc);
      return r.body.detail as { msg: string }[];
    };
    expect(
      (await bad("POST", "/console/api/keys", { label: "x".repeat(101) }, ["body", "label"]))[0]!
        .msg,
    ).toMatch(/at most 100/);
    await bad("POST", "/console/api/keys", { label: 5 }, ["body", "label"]);
    for (const label of ["evil\u001b[2J", "nul\u0000", "\ud800", "a\u202Eb"])
      expect(
        (await bad("POST", "/console/api/keys", { label }, ["body", "label"]))[0]!.msg,
      ).toMatch(/control characters/);
    await bad("POST", "/console/api/keys", { lable: "typo" }, ["body"]);
    await bad("POST", "/console/api/keys/abc/revoke", undefined, ["path", "id"]);
    await bad("POST", "/console/api/keys/0/revoke", undefined, ["path", "id"]);
    // What Number() would read as a key id, but is not one written in digits.
    for (const id of ["1e3", "0x10", "%207", "1.0"])
      expect(
        (await bad("POST", `/console/api/keys/${id}/revoke`, undefined, ["path", "id"]))[0]!.msg,
      ).toMatch(/whole number/);
    // Digits, but more than a key id can be.
    expect(
      (
        await bad("POST", "/console/api/keys/99999999999999999/revoke", undefined, ["path", "id"])
      )[0]!.msg,
    ).toBe("A key id is at most 9007199254740991");
    await bad("GET", "/console/api/usage?days=0", undefined, ["query", "days"]);
    await bad("GET", "/console/api/usage?days=367", undefined, ["query", "days"]);
    await bad("GET", "/console/api/usage?days=2.5", undefined, ["query", "days"]);
    for (const days of ["abc", "0", "367", "2.5", "", "1&days=2"])
      expect(
        (await bad("GET", `/console/api/usage?days=${days}`, undefined, ["query", "days"]))[0]!.msg,
        days,
      ).toBe("days must be a whole number of days from 1 to 366");
    await bad("GET", "/console/api/keys?acount=acme", undefined, ["query"]);
    // An account name the store refuses, named by the admin.
    const r = await call("POST", "/console/api/keys", ADMIN, { account: "has space" });
    expect(r.status).toBe(422);
    expect(r.body.detail[0]).toMatchObject({ loc: ["body", "account"], type: "value_error" });
    expect(r.body.detail[0].msg).toMatch(/bad account name/);
    // An over-long one is quoted cut, not echoed whole; the rule says ASCII letters.
    const long = await call("POST", "/console/api/keys", ADMIN, { account: "a".repeat(300) });
    expect(long.status).toBe(422);
    expect(long.body.detail[0].msg).toContain(`"${"a".repeat(40)}…"`);
    expect(long.body.detail[0].msg).not.toContain("a".repeat(41));
    expect(long.body.detail[0].msg).toMatch(/ASCII letters/);
    const accented = await call("POST", "/console/api/keys", ADMIN, { account: "école" });
    expect(accented.body.detail[0].msg).toMatch(/^bad account name "école": .*ASCII letters/);
    // A body that is not JSON.
    const notJson = await app.inject({
      method: "POST",
      url: "/console/api/keys",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      payload: "{",
    });
    expect(notJson.statusCode).toBe(422);
  });
});

describe("a route that takes no body", () => {
  it("revokes with an empty application/json body, as without the header", async () => {
    await start();
    const { key } = await store.createKey("acme");
    const a = await store.createKey("acme");
    const b = await store.createKey("acme");
    const revoke = (id: number, headers: Record<string, string>, payload?: string) =>
      app.inject({
        method: "POST",
        url: `/console/api/keys/${id}/revoke`,
        headers: { authorization: `Bearer ${key}`, ...headers },
        ...(payload !== undefined ? { payload } : {}),
      });
    const json = { "content-type": "application/json" };
    const empty = await revoke(a.record.id, json, "");
    expect(empty.statusCode, empty.body).toBe(200);
    expect(empty.json()).toMatchObject({ id: a.record.id, already_revoked: false });
    const blank = await revoke(
      b.record.id,
      { "content-type": "application/json; charset=utf-8" },
      " \n",
    );
    expect(blank.statusCode, blank.body).toBe(200);
    expect((await revoke(b.record.id, {})).json()).toMatchObject({ already_revoked: true });
    // A body that is there is still JSON or refused.
    expect((await revoke(b.record.id, json, "{}")).statusCode).toBe(200);
    const notJson = await revoke(b.record.id, json, "{");
    expect(notJson.statusCode).toBe(422);
    expect(notJson.json().detail[0].type).toBe("json_invalid");
  });

  it("leaves the routes that need a body refusing an empty one", async () => {
    await start();
    const { key } = await store.createKey("acme");
    const r = await app.inject({
      method: "POST",
      url: "/console/api/keys",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      payload: "",
    });
    expect(r.statusCode).toBe(422);
    expect(r.json().detail[0]).toMatchObject({ loc: ["body"], type: "missing" });
  });
});

describe("usage", () => {
  it("counts calls and tokens per UTC day, fills days without calls, and reports the allowance", async () => {
    await start();
    const { record } = await store.createKey("acme");
    const other = await store.createKey("other");
    const row = (at: number, input: number, status = 200, accountId = record.accountId) =>
      store.recordCall({
        accountId,
        keyId: record.id,
        at,
        inputTokens: input,
        outputTokens: 2,
        model: "m",
        status,
      });
    const today = Date.UTC(2026, 10, 21);
    await row(today + 1000, 100);
    await row(today + 2000, 50, 429);
    await row(today - 1, 10); // 23:59:59.999 yesterday
    await row(today - 2 * DAY, 7);
    await row(today - 7 * DAY, 1000); // outside a 7-day window, inside 30
    await row(today + 5000, 999, 200, other.record.accountId); // another account
    await store.setAllowance("acme", { tokens: 500, period: "month" });

    const usage = await call(
      "GET",
      "/console/api/usage?days=7",
      (await store.createKey("acme")).key,
    );
    expect(usage.status).toBe(200);
    expect(usage.body.account).toBe("acme");
    expect(usage.body.days.map((d: any) => d.date)).toEqual([
      "2026-11-15",
      "2026-11-16",
      "2026-11-17",
      "2026-11-18",
      "2026-11-19",
      "2026-11-20",
      "2026-11-21",
    ]);
    expect(usage.body.days.at(-1)).toEqual({
      date: "2026-11-21",
      calls: 2,
      failed_calls: 1,
      input_tokens: 150,
      output_tokens: 4,
    });
    expect(usage.body.days.at(-2)).toMatchObject({ calls: 1, input_tokens: 10 });
    expect(usage.body.days.at(-3)).toMatchObject({ calls: 1, input_tokens: 7 });
    expect(usage.body.days[0]).toEqual({
      date: "2026-11-15",
      calls: 0,
      failed_calls: 0,
      input_tokens: 0,
      output_tokens: 0,
    });
    expect(usage.body.window).toEqual({
      calls: 4,
      failed_calls: 1,
      input_tokens: 167,
      output_tokens: 8,
    });
    expect(usage.body.all_time).toEqual({
      calls: 5,
      failed_calls: 1,
      input_tokens: 1167,
      output_tokens: 10,
    });
    // November so far: every row above is in November (the 14th too).
    expect(usage.body.allowance).toEqual({
      tokens: 500,
      period: "month",
      used: 1177,
      remaining: 0,
      renews_at: "2026-12-01T00:00:00.000Z",
    });

    const month = await call("GET", "/console/api/usage?account=acme", ADMIN);
    expect(month.body.days).toHaveLength(30);
    expect(month.body.window.calls).toBe(5);
  });
});

describe("without accounts (--auth off)", () => {
  it("offers no sign-in, and the account routes say why they are empty", async () => {
    await start({ store: undefined });
    expect((await call("GET", "/console/api/config")).body).toEqual({
      auth: false,
      admin_sign_in: false,
    });
    const r = await call("GET", "/console/api/keys", ADMIN);
    expect(r.status).toBe(404);
    expect(r.body.detail).toMatchObject({ error_type: "accounts_off" });
  });
});

describe("front end", () => {
  async function fakeBuild(): Promise<string> {
    const assets = join(dir, "app");
    await mkdir(join(assets, "assets"), { recursive: true });
    await writeFile(join(assets, "index.html"), "<!doctype html><title>console</title>");
    await writeFile(join(assets, "assets", "index-abc123.js"), "console.log(1)");
    await writeFile(join(assets, "favicon.svg"), "<svg/>");
    return assets;
  }

  it("serves index.html for its pages, hashed assets for a year, and security headers", async () => {
    await start({ assetsDir: await fakeBuild() });
    const get = (url: string) => app.inject({ method: "GET", url });

    const redirect = await get("/console");
    expect(redirect.statusCode).toBe(308);
    expect(redirect.headers.location).toBe("/console/");
    for (const url of ["/console/", "/console/keys", "/console/usage", "/console/playground"]) {
      const page = await get(url);
      expect(page.statusCode, url).toBe(200);
      expect(page.headers["content-type"]).toMatch(/^text\/html/);
      expect(page.body).toContain("<title>console</title>");
      expect(page.headers["cache-control"]).toBe("no-cache");
      for (const [name, value] of Object.entries(SECURITY_HEADERS))
        expect(page.headers[name], name).toBe(value);
    }
    const script = await get("/console/assets/index-abc123.js");
    expect(script.statusCode).toBe(200);
    expect(script.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
    expect((await get("/console/favicon.svg")).body).toBe("<svg/>");
    expect((await get("/console/assets/missing.js")).statusCode).toBe(404);
    expect((await get("/console/../package.json")).statusCode).not.toBe(200);
    const api404 = await get("/console/api/nope");
    expect(api404.statusCode).toBe(404);
    expect(api404.json().detail.error_type).toBe("not_found");
    // Its pages' catch-all takes GET, but no other method is told to use GET there.
    expect((await app.inject({ method: "POST", url: "/console/api/nope" })).statusCode).toBe(404);
    expect((await app.inject({ method: "POST", url: "/console/usage" })).statusCode).toBe(404);
    // The rest of the service is untouched.
    expect((await get("/healthz")).statusCode).toBe(200);
  });

  it("answers 503 with the fix when the front end is not built", async () => {
    await start({ assetsDir: join(dir, "nothing-here") });
    const page = await app.inject({ method: "GET", url: "/console/keys" });
    expect(page.statusCode).toBe(503);
    expect(page.json().detail).toMatchObject({ error_type: "console_not_built" });
    expect(page.json().detail.message).toMatch(/npm run build/);
    expect((await call("GET", "/console/api/config")).status).toBe(200);
  });
});

describe("serve's console options", () => {
  it("read the admin token from a file or DECISIOND_ADMIN_TOKEN, and check it", async () => {
    const file = join(dir, "admin-token");
    await writeFile(file, `${ADMIN}\n`);
    expect(readAdminToken({ adminTokenFile: file }, {})).toBe(ADMIN);
    expect(readAdminToken({}, { DECISIOND_ADMIN_TOKEN: ADMIN })).toBe(ADMIN);
    expect(readAdminToken({}, {})).toBeUndefined();
    expect(() => readAdminToken({}, { DECISIOND_ADMIN_TOKEN: "abc" })).toThrow(/too short/);
    expect(() => readAdminToken({ adminTokenFile: join(dir, "missing") }, {})).toThrow(
      /cannot read the admin token file/,
    );
  });

  it("turn the console off, or drop the admin token when there are no accounts", () => {
    const printed: string[] = [];
    const print = (line: string) => printed.push(line);
    expect(serveConsole({ console: "off" }, ADMIN, store, print)).toBeUndefined();
    expect(serveConsole({ console: "on" }, ADMIN, store, print)).toEqual({
      store,
      adminToken: ADMIN,
    });
    expect(serveConsole({ console: "on" }, ADMIN, undefined, print)).toEqual({
      store: undefined,
      adminToken: undefined,
    });
    expect(printed).toEqual([
      "decisiond: auth is off: the admin token is not used (there are no accounts)",
    ]);
  });
});
