import Database from "better-sqlite3";
import { Command } from "commander";
import { existsSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { mkdtemp, readFile, rm, stat, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Admission, AdmissionError } from "../src/accounts/admission.js";
import { allowanceWindow } from "../src/accounts/allowance.js";
import { CallDurations } from "../src/accounts/call-durations.js";
import { apiKeyFilePath, ensureFirstKey, writeApiKeyFile } from "../src/accounts/keyfile.js";
import {
  generateApiKey,
  hashApiKey,
  isWellFormedApiKey,
  KEY_PREFIX_LENGTH,
} from "../src/accounts/keys.js";
import { MIGRATIONS, SqliteStore } from "../src/accounts/sqlite-store.js";
import { defaultStorePath, RESERVATION_TTL_MS, StoreError } from "../src/accounts/store.js";
import { registerKeysCommand } from "../src/cli/keys.js";
import { registerServeCommand } from "../src/cli/serve.js";
import { openAccounts } from "../src/service/build.js";
import { checkAuthHost, isLoopbackHost } from "../src/cli/serve-config.js";
import { registerUsageCommands } from "../src/cli/usage.js";
import { runCommand } from "./support/cli.js";

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-accounts-"));
  vi.stubEnv("DECISIOND_HOME", join(dir, "home"));
  vi.stubEnv("HOME", join(dir, "user"));
  vi.stubEnv("XDG_CONFIG_HOME", join(dir, "config"));
});

afterEach(async () => {
  vi.unstubAllEnvs();
  await rm(dir, { recursive: true, force: true });
});

function cli(register: (program: Command) => void, ...args: string[]) {
  return runCommand(register, args);
}

const all = (program: Command) => {
  registerKeysCommand(program);
  registerUsageCommands(program);
};

describe("keys", () => {
  it("are dsk_ + 40 base62 characters, all different", () => {
    const keys = new Set(Array.from({ length: 500 }, generateApiKey));
    expect(keys.size).toBe(500);
    for (const key of keys) {
      expect(key).toMatch(/^dsk_[0-9A-Za-z]{40}$/);
      expect(isWellFormedApiKey(key)).toBe(true);
    }
    // Every base62 digit shows up: the alphabet is used whole.
    expect(new Set([...keys].join("").replace(/dsk_/g, "")).size).toBe(62);
    expect(isWellFormedApiKey("dsk_short")).toBe(false);
  });
});

describe("store", () => {
  it("lives at $DECISIOND_HOME/decisiond.db, in WAL mode, migrated to the latest version", async () => {
    const path = defaultStorePath();
    expect(path).toBe(join(dir, "home", "decisiond.db"));
    const store = SqliteStore.open(path);
    expect(await store.schemaVersion()).toBe(MIGRATIONS.length);
    await store.close();
    const db = new Database(path, { readonly: true });
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db.pragma("user_version", { simple: true })).toBe(MIGRATIONS.length);
    expect(
      (
        db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as {
          name: string;
        }[]
      ).map((r) => r.name),
    ).toEqual(["accounts", "api_keys", "reservations", "usage"]);
    db.close();
    // Reopening an up-to-date store changes nothing.
    const again = SqliteStore.open(path);
    expect(await again.schemaVersion()).toBe(MIGRATIONS.length);
    await again.close();
  });

  it("refuses a store written by a newer decisiond", async () => {
    const path = defaultStorePath();
    await SqliteStore.open(path).close();
    const db = new Database(path);
    db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    db.close();
    expect(() => SqliteStore.open(path)).toThrow(/newer than this decisiond knows/);
  });

  it("keeps keys only as SHA-256 hashes and a 12-character prefix", async () => {
    const path = defaultStorePath();
    const store = SqliteStore.open(path);
    const { key, record } = await store.createKey("team-a", "laptop");
    expect(record).toMatchObject({
      accountName: "team-a",
      label: "laptop",
      prefix: key.slice(0, KEY_PREFIX_LENGTH),
    });
    expect(record.prefix).toHaveLength(12);
    expect((await store.findKey(key))?.key.id).toBe(record.id);
    expect(await store.findKey(key.slice(0, -1) + (key.endsWith("x") ? "y" : "x"))).toBeUndefined();
    expect(await store.findKey("not a key")).toBeUndefined();
    await store.close();
    const db = new Database(path, { readonly: true });
    const row = db.prepare("SELECT * FROM api_keys").get() as { hash: Buffer; prefix: string };
    expect(row.hash.equals(hashApiKey(key))).toBe(true);
    db.close();
    const bytes = await readFile(path);
    expect(bytes.includes(Buffer.from(key))).toBe(false);
    expect(bytes.includes(Buffer.from(key.slice(KEY_PREFIX_LENGTH)))).toBe(false);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it("validates account names and allowances", async () => {
    const store = SqliteStore.open(defaultStorePath());
    await expect(store.createAccount("has space")).rejects.toThrow(StoreError);
    await expect(store.createAccount("")).rejects.toThrow(StoreError);
    // ASCII letters only, and the message says so.
    for (const name of ["école", "ÉCOLE"])
      await expect(store.createAccount(name)).rejects.toThrow(/64 ASCII letters, digits/);
    // An over-long name is quoted cut, not whole; a control character is quoted escaped.
    const long = "n".repeat(300);
    const refusal = (await store.createAccount(long).catch((e: Error) => e)) as Error;
    expect(refusal.message).toContain(`bad account name "${"n".repeat(40)}…":`);
    expect(refusal.message).not.toContain("n".repeat(41));
    expect(refusal.message.length).toBeLessThan(200);
    await expect(store.createAccount("bell\u0007")).rejects.toThrow('"bell\\u0007"');
    // So are DEL, a C1 control and a right-to-left override, which JSON's escapes leave raw.
    await expect(store.createAccount("a\u007fb\u009bc\u202ed")).rejects.toThrow(
      '"a\\u007fb\\u009bc\\u202ed"',
    );
    await expect(store.setAllowance(long, { tokens: 1, period: "day" })).rejects.toThrow(
      `no account "${"n".repeat(40)}…"`,
    );
    await store.createAccount("ok.name_1-2");
    await expect(store.createAccount("ok.name_1-2")).rejects.toThrow(/already exists/);
    await expect(store.setAllowance("ok.name_1-2", { tokens: -1, period: "day" })).rejects.toThrow(
      StoreError,
    );
    await expect(store.setAllowance("ok.name_1-2", { tokens: 1.5, period: "day" })).rejects.toThrow(
      StoreError,
    );
    await expect(store.setAllowance("missing", { tokens: 1, period: "day" })).rejects.toThrow(
      /no account/,
    );
    await store.close();
  });
});

describe("allowance periods", () => {
  it("are UTC days and months, or all time", () => {
    const now = Date.UTC(2026, 0, 31, 23, 59, 59);
    expect(allowanceWindow("day", now)).toEqual({
      start: Date.UTC(2026, 0, 31),
      end: Date.UTC(2026, 1, 1),
    });
    expect(allowanceWindow("month", now)).toEqual({
      start: Date.UTC(2026, 0, 1),
      end: Date.UTC(2026, 1, 1),
    });
    expect(allowanceWindow("month", Date.UTC(2026, 11, 15))).toEqual({
      start: Date.UTC(2026, 11, 1),
      end: Date.UTC(2027, 0, 1),
    });
    expect(allowanceWindow("total", now)).toEqual({ start: 0, end: undefined });
  });

  it("renew: yesterday's usage does not count against today", async () => {
    let now = Date.UTC(2026, 4, 10, 23, 0);
    const store = SqliteStore.open(defaultStorePath(), { now: () => now });
    const admission = new Admission(store, { now: () => now });
    const { key } = await store.createKey("team-a");
    await store.setAllowance("team-a", { tokens: 10, period: "day" });
    const permit = await admission.admit(key);
    permit.settle({ input_tokens: 9, output_tokens: 1 });
    await permit.finish({ status: 200, model: "m" });
    const refusal = await admission.admit(key).catch((e: AdmissionError) => e);
    expect(refusal).toMatchObject({ code: "allowanceExhausted", retryAfterMs: 60 * 60 * 1000 });
    now = Date.UTC(2026, 4, 11, 0, 0, 1);
    const next = await admission.admit(key);
    expect(next.account.name).toBe("team-a");
    await store.close();
  });
});

describe("a call held back only by reservations", () => {
  it("is told to retry when they lapse, not when the allowance renews", async () => {
    let now = Date.UTC(2026, 4, 10, 6, 0);
    const store = SqliteStore.open(defaultStorePath(), { now: () => now });
    const admission = new Admission(store, { now: () => now });
    const { key } = await store.createKey("team-a");
    await store.setAllowance("team-a", { tokens: 100, period: "day" });
    // A call that reserved 80 tokens, whose process stopped before its ledger row.
    const lost = await admission.admit(key);
    await lost.reserve({ input_tokens: 79, output_tokens: 1 });
    lost.release();
    const next = await admission.admit(key);
    const refusal = await next
      .reserve({ input_tokens: 49, output_tokens: 1 })
      .catch((e: AdmissionError) => e);
    expect(refusal).toMatchObject({ code: "allowanceOverrun", retryAfterMs: RESERVATION_TTL_MS });
    expect((refusal as Error).message).toContain(
      "80 reserved by calls not yet recorded: in flight, or stopped before their row",
    );
    // A call the used tokens alone leave no room for waits for the renewal (18 h).
    const big = await next
      .reserve({ input_tokens: 100, output_tokens: 1 })
      .catch((e: AdmissionError) => e);
    expect(big).toMatchObject({ code: "allowanceOverrun", retryAfterMs: 18 * 3600 * 1000 });
    next.release();
    // Once the reservation has lapsed, the call runs.
    now += RESERVATION_TTL_MS;
    const later = await admission.admit(key);
    await later.reserve({ input_tokens: 49, output_tokens: 1 });
    later.release();
    await store.close();
  });
});

describe("the busy account's retry hint", () => {
  it("says when the call in flight will be done, from its tokens, and after it overruns", async () => {
    let now = 0;
    const store = SqliteStore.open(defaultStorePath(), { now: () => now });
    const admission = new Admission(store, { now: () => now });
    const { key } = await store.createKey("team-a");
    const busyHint = async () => {
      const refusal = await admission.admit(key).catch((e: AdmissionError) => e);
      expect(refusal).toMatchObject({ code: "concurrencyLimit" });
      return (refusal as AdmissionError).retryAfterMs!;
    };
    // Calls of 100 tokens taking 1 s: 10 ms a token, mostly their fixed cost.
    for (let i = 0; i < 20; i++) {
      const permit = await admission.admit(key);
      await permit.reserve({ input_tokens: 99, output_tokens: 1 });
      now += 1000;
      permit.settle({ input_tokens: 99, output_tokens: 1 });
      await permit.finish({ status: 200, model: "m" });
    }
    // A call of 5,000 tokens: their 1 s and 5 ms for each further token (25.5 s), not the
    // typical call's 1 s, nor 10 ms for each of its tokens (50 s); 2 s in, 23.5 s are left.
    const long = await admission.admit(key);
    await long.reserve({ input_tokens: 4999, output_tokens: 1 });
    now += 2000;
    const hint = await busyHint();
    expect(hint).toBeGreaterThan(23_000);
    expect(hint).toBeLessThanOrEqual(24_000);
    // Past what was expected, about as long again as it has run.
    now += 68_000;
    expect(await busyHint()).toBe(60_000);
    long.settle({ input_tokens: 4999, output_tokens: 1 });
    await long.finish({ status: 200, model: "m" });
    await store.close();
  });

  it("spreads the retries of calls refused together, a typical call apart", async () => {
    let now = 0;
    const store = SqliteStore.open(defaultStorePath(), { now: () => now });
    const admission = new Admission(store, { now: () => now });
    const { key } = await store.createKey("team-a");
    // Calls of 100 tokens taking 200 ms.
    for (let i = 0; i < 30; i++) {
      const permit = await admission.admit(key);
      await permit.reserve({ input_tokens: 99, output_tokens: 1 });
      now += 200;
      permit.settle({ input_tokens: 99, output_tokens: 1 });
      await permit.finish({ status: 200, model: "m" });
    }
    const held = await admission.admit(key);
    await held.reserve({ input_tokens: 99, output_tokens: 1 });
    now += 50;
    const hints: number[] = [];
    for (let i = 0; i < 7; i++) {
      const refusal = (await admission.admit(key).catch((e: unknown) => e)) as AdmissionError;
      hints.push(refusal.retryAfterMs!);
    }
    // Seven parallel calls told one instant came back together and collided again; now the
    // first is told when the call in flight ends (at least 250 ms), each next one 200 ms later.
    const steps = hints.slice(1).map((ms, i) => ms - hints[i]!);
    expect(steps.every((step) => step >= 195 && step <= 210)).toBe(true);
    expect(hints[0]).toBeGreaterThanOrEqual(250);
    expect(hints[0]).toBeLessThanOrEqual(260);
    held.settle({ input_tokens: 99, output_tokens: 1 });
    await held.finish({ status: 200, model: "m" });
    // A call refused under the next holder is told to come after the seven, a typical call
    // later (that call of 50 ms brought the typical call down to about 170 ms).
    const next = await admission.admit(key);
    const again = (await admission.admit(key).catch((e: unknown) => e)) as AdmissionError;
    expect(again.retryAfterMs! - hints[6]!).toBeGreaterThanOrEqual(150);
    expect(again.retryAfterMs! - hints[6]!).toBeLessThanOrEqual(210);
    next.release();
    // A burst longer than a client is told (60 s at most) is told at most that, and is not
    // remembered further ahead: a minute later a refusal is told the call in flight's time again.
    const holder = await admission.admit(key);
    for (let i = 0; i < 400; i++) await admission.admit(key).catch(() => undefined);
    const capped = (await admission.admit(key).catch((e: unknown) => e)) as AdmissionError;
    expect(capped.retryAfterMs).toBe(60_000);
    holder.release();
    now += 60_000;
    const third = await admission.admit(key);
    const fresh = (await admission.admit(key).catch((e: unknown) => e)) as AdmissionError;
    expect(fresh.retryAfterMs).toBeLessThanOrEqual(260);
    third.release();
    await store.close();
  });

  it("holds for a long call on a busy server, where short calls wait behind others", async () => {
    let now = 0;
    const store = SqliteStore.open(defaultStorePath(), { now: () => now });
    const admission = new Admission(store, { now: () => now });
    const { key } = await store.createKey("team-a");
    const call = async (tokens: number, ms: number) => {
      const permit = await admission.admit(key);
      await permit.reserve({ input_tokens: tokens - 1, output_tokens: 1 });
      now += ms;
      permit.settle({ input_tokens: tokens - 1, output_tokens: 1 });
      await permit.finish({ status: 200, model: "m" });
    };
    // An outside probe's load: short calls of 100 tokens take 3 s (most of it waiting for other
    // accounts' work), calls of 5,000 tokens take 15 s.
    for (let i = 0; i < 6; i++) {
      for (let j = 0; j < 4; j++) await call(100, 3000);
      await call(5000, 15_000);
    }
    const long = await admission.admit(key);
    await long.reserve({ input_tokens: 4999, output_tokens: 1 });
    now += 500;
    const refusal = await admission.admit(key).catch((e: AdmissionError) => e);
    expect(refusal).toMatchObject({ code: "concurrencyLimit" });
    // 14.5 s left; an average of ms per token (short calls 30, long ones 3) said 60 s.
    expect((refusal as AdmissionError).retryAfterMs).toBeGreaterThan(12_000);
    expect((refusal as AdmissionError).retryAfterMs).toBeLessThan(17_000);
    long.settle({ input_tokens: 4999, output_tokens: 1 });
    await long.finish({ status: 200, model: "m" });
    await store.close();
  });
});

describe("Retry-After in the tokens the engine evaluates", () => {
  it("foretells a call with a cached state as short, and a new long one as long", async () => {
    let now = 0;
    const store = SqliteStore.open(defaultStorePath(), { now: () => now });
    const admission = new Admission(store, { now: () => now });
    const { key } = await store.createKey("team-a");
    /** A call of `tokens` tokens the engine evaluates `work` of, taking `ms`. */
    const call = async (tokens: number, work: number, ms: number) => {
      const permit = await admission.admit(key);
      await permit.reserve({ input_tokens: tokens - 1, output_tokens: 1 }, work);
      now += ms;
      permit.settle({ input_tokens: tokens - 1, output_tokens: 1 });
      await permit.finish({ status: 200, model: "m" });
    };
    /** The hint a second call gets 500 ms into a call of `tokens` tokens, `work` evaluated. */
    const hintDuring = async (tokens: number, work: number) => {
      const held = await admission.admit(key);
      await held.reserve({ input_tokens: tokens - 1, output_tokens: 1 }, work);
      now += 500;
      const refusal = (await admission.admit(key).catch((e: unknown) => e)) as AdmissionError;
      expect(refusal).toMatchObject({ code: "concurrencyLimit" });
      held.settle({ input_tokens: tokens - 1, output_tokens: 1 });
      await held.finish({ status: 200, model: "m" });
      return refusal.retryAfterMs!;
    };
    // A probe's day: 5,000-token states, new ones (all evaluated, 25 s) and one asked again
    // (cached: 300 tokens evaluated, 1.5 s), and one-line requests (60 tokens, 0.3 s).
    for (let i = 0; i < 4; i++) {
      await call(5000, 5000, 25_000);
      await call(5000, 300, 1500);
      await call(60, 60, 300);
    }
    // Counted in reserved tokens, both 5,000-token calls were foretold the same, about 13 s: far
    // too long for the cached one, far too short for a new one (an outside probe saw both).
    expect(await hintDuring(5000, 300)).toBeLessThan(2500);
    const fresh = await hintDuring(5000, 5000);
    expect(fresh).toBeGreaterThan(20_000);
    expect(fresh).toBeLessThan(30_000);
    await store.close();
  });
});

describe("CallDurations", () => {
  it("fits a fixed part and a part per token", () => {
    const durations = new CallDurations();
    expect(durations.expectedMs(1000)).toBe(5000); // before any call: 5 ms a token
    for (const tokens of [100, 400, 2000, 100, 5000]) durations.add(tokens, 2500 + 2 * tokens);
    expect(durations.expectedMs(0)).toBeCloseTo(2500, 6);
    expect(durations.expectedMs(3000)).toBeCloseTo(8500, 6);
  });

  it("reads calls of one size, or longer ones not slower, by their ms per token up to their size", () => {
    const same = new CallDurations();
    for (let i = 0; i < 5; i++) same.add(200, 1000);
    expect(same.expectedMs(100)).toBeCloseTo(500, 6);
    expect(same.expectedMs(400)).toBeCloseTo(2000, 6); // 1000 + 200 more at 5 ms
    const faster = new CallDurations();
    faster.add(100, 3000);
    faster.add(1000, 1000);
    const perToken = faster.expectedMs(100) / 100; // mostly the long call's 1 ms
    expect(perToken).toBeGreaterThan(1);
    expect(perToken).toBeLessThan(4);
    expect(faster.expectedMs(300)).toBeCloseTo(300 * perToken, 6);
    // Past their mean size (about 574 tokens): further tokens at their ms per token, < 5 ms.
    expect(faster.expectedMs(3000) - faster.expectedMs(2000)).toBeCloseTo(1000 * perToken, 6);
    faster.add(0, 5000); // a call that reserved nothing teaches nothing
    expect(faster.expectedMs(100)).toBeCloseTo(100 * perToken, 6);
  });

  it("fits no line to calls of nearly one size, and none that starts below 0", () => {
    // Short calls whose waits vary: a line through them is steep, and 5,000 tokens would read
    // minutes; their ms per token (about 26 ms, mostly fixed cost) would read 2 minutes too.
    const close = new CallDurations();
    close.add(100, 500);
    close.add(120, 5000);
    const perToken = close.expectedMs(1) / 1;
    expect(perToken).toBeGreaterThan(2.3); // between the two calls' own rates
    expect(perToken).toBeLessThan(42);
    expect(close.expectedMs(100)).toBeCloseTo(100 * perToken, 6); // below their mean size
    // Further tokens at 5 ms: their mean duration (about 2.9 s) and 5 × the rest.
    expect(close.expectedMs(5000)).toBeGreaterThan(2500 + 5 * 4880);
    expect(close.expectedMs(5000)).toBeLessThan(3000 + 5 * 4900);
    // The fresh server of the eleventh outside probe: short calls of a few evaluated tokens
    // (cached prefixes), then a call of 1,300 tokens that took 2.9 s, said 12 s and 49 s.
    const cached = new CallDurations();
    for (let i = 0; i < 10; i++) cached.add(12, 300);
    expect(cached.expectedMs(1300)).toBeCloseTo(300 + 5 * 1288, 6);
    // Spread calls whose line would start below 0: the line through 0.
    const steep = new CallDurations();
    for (const [tokens, ms] of [
      [100, 100],
      [1000, 4000],
      [2000, 9000],
    ] as const)
      steep.add(tokens, ms);
    expect(steep.expectedMs(0)).toBe(0);
    expect(steep.expectedMs(2000)).toBeGreaterThan(7000);
    expect(steep.expectedMs(2000)).toBeLessThan(10_000);
  });
});

describe("key file and first start", () => {
  it("is $XDG_CONFIG_HOME/decisiond/api_key, else ~/.config/decisiond/api_key", () => {
    expect(apiKeyFilePath()).toBe(join(dir, "config", "decisiond", "api_key"));
    expect(apiKeyFilePath({ HOME: "/home/u" })).toBe("/home/u/.config/decisiond/api_key");
    expect(apiKeyFilePath({ HOME: "/home/u", XDG_CONFIG_HOME: "relative" })).toBe(
      "/home/u/.config/decisiond/api_key",
    );
  });

  it("is written 0600 in a 0700 directory, replacing an older file whole", async () => {
    const path = apiKeyFilePath();
    await mkdir(join(dir, "config", "decisiond"), { recursive: true });
    await writeFile(path, "old", { mode: 0o644 });
    writeApiKeyFile("dsk_new", path);
    expect(await readFile(path, "utf8")).toBe("dsk_new\n");
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    vi.stubEnv("XDG_CONFIG_HOME", "");
    const fresh = apiKeyFilePath();
    expect(fresh).toBe(join(dir, "user", ".config", "decisiond", "api_key"));
    writeApiKeyFile("dsk_other", fresh);
    expect((await stat(fresh)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, "user", ".config", "decisiond"))).mode & 0o777).toBe(0o700);
  });

  it("serve's first start creates an account and a key, writes it to the key file 0600 and prints only where it is", async () => {
    const lines: string[] = [];
    const first = await openAccounts({ auth: "on", admissionWaitMs: 0, store: undefined }, (l) =>
      lines.push(l),
    );
    expect(first.gate).toBeDefined();
    await first.store!.close();
    const printed = lines.join("\n");
    // Issue 31 item 7: the key is never printed (scrollback and log collectors keep it).
    expect(printed).not.toMatch(/dsk_/);
    const file = join(dir, "config", "decisiond", "api_key");
    expect(printed).toContain(file);
    const key = /^(dsk_[0-9A-Za-z]{40})\n$/.exec(await readFile(file, "utf8"))?.[1];
    expect(key).toBeDefined();
    expect((await stat(file)).mode & 0o777).toBe(0o600);

    // The key works, and belongs to the account "default".
    const store = SqliteStore.open(defaultStorePath());
    expect((await store.findKey(key!))?.account.name).toBe("default");
    await store.close();

    // The next start finds a key and creates none.
    const later: string[] = [];
    const second = await openAccounts({ auth: "on", admissionWaitMs: 0, store: undefined }, (l) =>
      later.push(l),
    );
    await second.store!.close();
    expect(later.join("\n")).not.toMatch(/dsk_/);
    expect(await readFile(file, "utf8")).toBe(`${key}\n`);
  });

  it("a second store's first start keeps the key file of the first; the same store made again replaces it", async () => {
    const start = async (store: string | undefined) => {
      const lines: string[] = [];
      const accounts = await openAccounts({ auth: "on", admissionWaitMs: 0, store }, (l) =>
        lines.push(l),
      );
      await accounts.store!.close();
      return lines.join("\n");
    };
    const file = apiKeyFilePath();
    await start(undefined);
    const key = await readFile(file, "utf8");
    // Another home's server (a test, a second instance): its key goes beside the first one's.
    const other = join(dir, "other", "decisiond.db");
    await mkdir(join(dir, "other"));
    const printed = await start(`sqlite:${other}`);
    expect(await readFile(file, "utf8")).toBe(key);
    const own = /written to (\S+) \(mode 0600\)/.exec(printed)?.[1];
    expect(own).toMatch(/api_key\.[0-9a-f]{8}$/);
    expect(printed).toContain("SERVICE_API_KEY");
    const otherKey = (await readFile(own!, "utf8")).trim();
    expect((await stat(own!)).mode & 0o777).toBe(0o600);
    const otherStore = SqliteStore.open(other);
    expect((await otherStore.findKey(otherKey))?.account.name).toBe("default");
    await otherStore.close();
    // The first home emptied and started again: its new key replaces the old one.
    await rm(defaultStorePath());
    await start(undefined);
    const again = await readFile(file, "utf8");
    expect(again).not.toBe(key);
    const store = SqliteStore.open(defaultStorePath());
    expect((await store.findKey(again.trim()))?.account.name).toBe("default");
    await store.close();
  });

  it("no key is created when keys exist, even if all are revoked", async () => {
    const store = SqliteStore.open(defaultStorePath());
    const { record } = await store.createKey("ops");
    await store.revokeKey(record.id);
    expect(await ensureFirstKey(store, "ops-store", join(dir, "k"))).toBeUndefined();
    expect(await store.countKeys()).toBe(1);
    await store.close();
  });
});

describe("--auth off", () => {
  it("is allowed on loopback only", async () => {
    for (const host of [
      "127.0.0.1",
      "127.8.9.10",
      "::1",
      "[::1]",
      "localhost",
      "LOCALHOST",
      "0:0:0:0:0:0:0:1",
      "::ffff:127.0.0.1",
    ])
      expect(isLoopbackHost(host), host).toBe(true);
    for (const host of [
      "0.0.0.0",
      "::",
      "192.168.1.2",
      "10.0.0.1",
      "example.com",
      "128.0.0.1",
      "::2",
      "1::1",
      "",
      // Issue 31 item 7: a name under .localhost may resolve anywhere.
      "evil.localhost",
      "app.localhost",
    ])
      expect(isLoopbackHost(host), host).toBe(false);
    const open = { corsOrigin: [] };
    expect(() => checkAuthHost({ auth: "off", host: "0.0.0.0", ...open })).toThrow(/loopback/);
    expect(() => checkAuthHost({ auth: "off", host: "127.0.0.1", ...open })).not.toThrow();
    expect(() => checkAuthHost({ auth: "on", host: "0.0.0.0", ...open })).not.toThrow();
    // Without keys, any page may not use it: only named origins.
    const page = { auth: "off" as const, host: "127.0.0.1" };
    expect(() => checkAuthHost({ ...page, corsOrigin: ["*"] })).toThrow(
      /not allowed with --auth off/,
    );
    expect(() => checkAuthHost({ ...page, corsOrigin: ["http://localhost:5173"] })).not.toThrow();
    expect(() => checkAuthHost({ auth: "on", host: "127.0.0.1", corsOrigin: ["*"] })).not.toThrow();
    const lines: string[] = [];
    expect(
      await openAccounts({ auth: "off", admissionWaitMs: 0, store: undefined }, (l) =>
        lines.push(l),
      ),
    ).toEqual({
      gate: undefined,
      store: undefined,
      admission: undefined,
    });
    expect(lines.join()).toMatch(/auth is off/);
  });

  it("serve refuses it on a public address before loading anything", async () => {
    await expect(
      cli(
        registerServeCommand,
        "serve",
        "--auth",
        "off",
        "--host",
        "0.0.0.0",
        "--model",
        join(dir, "missing.gguf"),
      ),
    ).rejects.toThrow(/--auth off is only allowed on a loopback address/);
  });
});

describe("CLI", () => {
  it("reading a store that is not there is an error, and makes nothing", async () => {
    const typo = join(dir, "no-such-dir", "decisiond.db");
    for (const args of [["usage"], ["keys", "list"], ["accounts", "list"], ["keys", "revoke", "1"]])
      await expect(cli(all, ...args, "--store", `sqlite:${typo}`)).rejects.toThrow(
        /no accounts store at .*no-such-dir.*keys create/,
      );
    expect(existsSync(join(dir, "no-such-dir"))).toBe(false);
    // Creating a key makes the store, in a directory that exists.
    await mkdir(join(dir, "no-such-dir"));
    await cli(all, "keys", "create", "--account", "team-a", "--store", `sqlite:${typo}`);
    expect(
      JSON.parse((await cli(all, "usage", "--json", "--store", `sqlite:${typo}`)).stdout),
    ).toHaveLength(1);
  });

  it("a --store whose directory is missing is refused, by serve and the commands that make a store", async () => {
    const missing = join(dir, "nonexistent", "dir");
    const typo = `sqlite:${join(missing, "x.db")}`;
    const refusal = new RegExp(
      `the directory ${missing.replace(/[/.]/g, "\\$&")} of --store does not exist; create it first`,
    );
    await expect(
      openAccounts({ auth: "on", admissionWaitMs: 0, store: typo }, () => {}),
    ).rejects.toThrow(refusal);
    for (const args of [
      ["keys", "create", "--account", "team-a"],
      ["accounts", "create", "team-a"],
    ])
      await expect(cli(all, ...args, "--store", typo)).rejects.toThrow(refusal);
    expect(existsSync(join(dir, "nonexistent"))).toBe(false);
    expect(existsSync(join(dir, "config", "decisiond"))).toBe(false);

    // In a directory that exists, serve's first start makes the store and its first key.
    await mkdir(missing, { recursive: true });
    const lines: string[] = [];
    const first = await openAccounts({ auth: "on", admissionWaitMs: 0, store: typo }, (l) =>
      lines.push(l),
    );
    await first.store!.close();
    expect(existsSync(join(missing, "x.db"))).toBe(true);
    expect(lines.join("\n")).toMatch(/first start: created account "default"/);
  });

  it("a store that cannot be opened is named, its password hidden, by every command", async () => {
    // A port nothing listens on: PostgreSQL down.
    const server = createServer();
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    const { port } = server.address() as AddressInfo;
    await new Promise((done) => server.close(done));
    const url = `postgres://decisiond:hunter2@127.0.0.1:${port}/decisiond`;
    for (const args of [
      ["keys", "list"],
      ["keys", "create", "--account", "team-a"],
      ["keys", "revoke", "1"],
      ["accounts", "list"],
      ["usage"],
    ]) {
      const error = await cli(all, ...args, "--store", url).catch((e: Error) => e);
      expect(error, args.join(" ")).toBeInstanceOf(Error);
      expect((error as Error).message).toBe(
        `cannot open the accounts store postgres://decisiond:***@127.0.0.1:${port}/decisiond: connect ECONNREFUSED 127.0.0.1:${port}`,
      );
    }
  });

  it("keys create takes the labels the console takes, and refuses the others saying why", async () => {
    for (const label of ["evil\u202eRLO", "red\u001b[31m", "x".repeat(101)])
      await expect(
        cli(all, "keys", "create", "--account", "team-a", "--label", label),
      ).rejects.toThrow(/control characters|at most 100 characters/);
    await cli(all, "keys", "create", "--account", "team-a", "--label", "  ci runner  ");
    const [key] = JSON.parse((await cli(all, "keys", "list", "--json")).stdout);
    expect(key.label).toBe("ci runner");
  });

  it("keys create prints the key alone on stdout; list, revoke and accounts work on the store", async () => {
    const created = await cli(all, "keys", "create", "--account", "team-a", "--label", "ci");
    const key = created.stdout.trim();
    expect(key).toMatch(/^dsk_[0-9A-Za-z]{40}$/);
    expect(created.stderr).toMatch(/created account "team-a"/);
    expect(created.stderr).toMatch(/shown this once/);

    const json = JSON.parse(
      (await cli(all, "keys", "create", "--account", "team-b", "--json")).stdout,
    );
    expect(json).toMatchObject({ id: 2, account: "team-b", label: null, revoked_at: null });
    expect(json.key).toMatch(/^dsk_/);

    const listed = (await cli(all, "keys", "list")).stdout;
    expect(listed.split("\n")[0]).toMatch(
      /^id\s+account\s+prefix\s+label\s+created\s+last used\s+revoked$/,
    );
    expect(listed).toContain(key.slice(0, 12));
    expect(listed).not.toContain(key);
    expect(
      JSON.parse((await cli(all, "keys", "list", "--account", "team-b", "--json")).stdout),
    ).toHaveLength(1);

    expect((await cli(all, "keys", "revoke", "1")).stderr).toMatch(/revoked key 1/);
    expect((await cli(all, "keys", "revoke", "1")).stderr).toMatch(/already revoked/);
    await expect(cli(all, "keys", "revoke", "99")).rejects.toThrow(/no key with id 99/);
    await expect(cli(all, "keys", "revoke", "abc")).rejects.toThrow(/expected a key id/);
    const revoked = JSON.parse((await cli(all, "keys", "list", "--json")).stdout)[0];
    expect(revoked.revoked_at).toMatch(/^\d{4}-/);

    await cli(all, "accounts", "create", "team-c");
    await cli(all, "accounts", "set-allowance", "team-c", "--tokens", "5000", "--period", "month");
    await expect(cli(all, "accounts", "set-allowance", "team-c", "--tokens", "5")).rejects.toThrow(
      /--period/,
    );
    await expect(
      cli(all, "accounts", "set-allowance", "team-c", "--tokens", "5", "--period", "week"),
    ).rejects.toThrow(/day, month, total/);
    const accounts = JSON.parse((await cli(all, "accounts", "list", "--json")).stdout);
    expect(accounts.map((a: { name: string }) => a.name)).toEqual(["team-a", "team-b", "team-c"]);
    expect(accounts[2].allowance).toEqual({ tokens: 5000, period: "month" });
    const usage = JSON.parse((await cli(all, "usage", "--json")).stdout);
    expect(usage[2]).toMatchObject({
      account: "team-c",
      calls: 0,
      allowance: { used: 0, remaining: 5000 },
    });
    await expect(cli(all, "usage", "--account", "nobody")).rejects.toThrow(/no account "nobody"/);

    // A label from before the console and the CLI refused control characters is printed escaped.
    const store = SqliteStore.open(defaultStorePath());
    await store.createKey("team-d", "evil\u001b[2J\u0007");
    await store.close();
    const escaped = (await cli(all, "keys", "list", "--account", "team-d")).stdout;
    expect(escaped).toContain("evil\\u001b[2J\\u0007");
    expect([...escaped].filter((c) => c < " " && c !== "\n")).toEqual([]);
  });
});
