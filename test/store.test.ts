import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Admission, AdmissionError } from "../src/accounts/admission.js";
import { parseStoreUrl, redactUrl } from "../src/accounts/open.js";
import { PG_MIGRATIONS, PostgresStore } from "../src/accounts/postgres-store.js";
import { MIGRATIONS, SqliteStore } from "../src/accounts/sqlite-store.js";
import { RESERVATION_TTL_MS, StoreError, type AccountStore } from "../src/accounts/store.js";
import { startPostgres, type TestPostgres } from "./support/postgres.js";

/**
 * The one store suite both backends pass: the SQLite file and a real PostgreSQL (a temporary
 * cluster from Debian's package, test/support/postgres.ts).
 */

let postgres: TestPostgres;
let dir: string;
let databases = 0;

beforeAll(async () => {
  postgres = await startPostgres();
  dir = await mkdtemp(join(tmpdir(), "decisiond-store-"));
}, 120_000);

afterAll(async () => {
  await postgres?.stop();
  await rm(dir, { recursive: true, force: true });
});

interface Backend {
  readonly name: string;
  /** A fresh, empty store location; `open` opens it (again) with a clock. */
  fresh(): Promise<{ open(now?: () => number): Promise<AccountStore> }>;
  readonly versions: number;
}

const backends: Backend[] = [
  {
    name: "sqlite",
    versions: MIGRATIONS.length,
    async fresh() {
      const path = join(dir, `store-${++databases}.db`);
      return { open: async (now) => SqliteStore.open(path, now ? { now } : {}) };
    },
  },
  {
    name: "postgres",
    versions: PG_MIGRATIONS.length,
    async fresh() {
      const url = await postgres.createDatabase(`store_${++databases}`);
      return { open: (now) => PostgresStore.open(url, now ? { now } : {}) };
    },
  },
];

describe.each(backends)("$name store", (backend) => {
  let now = Date.UTC(2026, 10, 25, 12, 0);
  const clock = () => now;
  let location: Awaited<ReturnType<Backend["fresh"]>>;
  let store: AccountStore;
  const opened: AccountStore[] = [];
  const open = async () => {
    const s = await location.open(clock);
    opened.push(s);
    return s;
  };

  beforeEach(async () => {
    now = Date.UTC(2026, 10, 25, 12, 0);
    location = await backend.fresh();
    store = await open();
    return async () => {
      await Promise.all(opened.splice(0).map((s) => s.close().catch(() => {})));
    };
  });

  it("is migrated to the latest schema, and reopening changes nothing", async () => {
    expect(await store.schemaVersion()).toBe(backend.versions);
    await store.ping();
    const again = await open();
    expect(await again.schemaVersion()).toBe(backend.versions);
  });

  it("creates accounts once, with checked names and allowances", async () => {
    await expect(store.createAccount("has space")).rejects.toThrow(StoreError);
    await expect(store.createAccount("")).rejects.toThrow(StoreError);
    const made = await store.createAccount("beta");
    expect(made).toMatchObject({ name: "beta", createdAt: now, allowance: undefined });
    await expect(store.createAccount("beta")).rejects.toThrow(/already exists/);
    expect((await store.ensureAccount("beta")).created).toBe(false);
    expect((await store.ensureAccount("alpha")).created).toBe(true);
    expect((await store.listAccounts()).map((a) => a.name)).toEqual(["alpha", "beta"]);
    expect(await store.findAccount("nobody")).toBeUndefined();
    expect((await store.accountById(made.id))?.name).toBe("beta");
    await expect(store.setAllowance("beta", { tokens: -1, period: "day" })).rejects.toThrow(
      StoreError,
    );
    await expect(store.setAllowance("beta", { tokens: 1.5, period: "day" })).rejects.toThrow(
      StoreError,
    );
    await expect(store.setAllowance("nobody", { tokens: 1, period: "day" })).rejects.toThrow(
      /no account/,
    );
    const limited = await store.setAllowance("beta", { tokens: 500, period: "month" });
    expect(limited.allowance).toEqual({ tokens: 500, period: "month" });
    expect((await store.setAllowance("beta", undefined)).allowance).toBeUndefined();
  });

  it("keeps keys hashed, finds them by key, revokes them once", async () => {
    const { key, record, accountCreated } = await store.createKey("team-a", "laptop");
    expect(accountCreated).toBe(true);
    expect(record).toMatchObject({ accountName: "team-a", label: "laptop", createdAt: now });
    expect(record.prefix).toBe(key.slice(0, 12));
    const found = await store.findKey(key);
    expect(found?.key.id).toBe(record.id);
    expect(found?.account.name).toBe("team-a");
    expect(await store.findKey(key.slice(0, -1) + (key.endsWith("x") ? "y" : "x"))).toBeUndefined();
    expect(await store.findKey("not a key")).toBeUndefined();
    const second = await store.createKey("team-a");
    expect(second.accountCreated).toBe(false);
    await store.createKey("team-b");
    expect((await store.listKeys("team-a")).map((k) => k.id)).toEqual([
      record.id,
      second.record.id,
    ]);
    expect(await store.listKeys()).toHaveLength(3);
    expect(await store.countKeys()).toBe(3);
    await expect(store.listKeys("nobody")).rejects.toThrow(/no account/);

    now += 1000;
    await store.touchKey(record.id);
    expect((await store.keyById(record.id))?.lastUsedAt).toBe(now);
    const revoked = await store.revokeKey(record.id);
    expect(revoked).toMatchObject({ alreadyRevoked: false, record: { revokedAt: now } });
    now += 1000;
    expect((await store.revokeKey(record.id)).alreadyRevoked).toBe(true);
    expect((await store.findKey(key))?.key.revokedAt).toBe(now - 1000);
    await expect(store.revokeKey(999_999)).rejects.toThrow(/no key with id/);
  });

  it("a key revoked through one store is refused through another at once", async () => {
    const other = await open();
    const { key, record } = await store.createKey("ops");
    expect((await other.findKey(key))?.key.revokedAt).toBeUndefined();
    await store.revokeKey(record.id);
    expect((await other.findKey(key))?.key.revokedAt).toBe(now);
  });

  it("creates the first key once when two processes start at once", async () => {
    const stores = [store, await open(), await open()];
    const made = await Promise.all(
      stores.flatMap((s) => [s.createKeyIfNone("default"), s.createKeyIfNone("default")]),
    );
    expect(made.filter((m) => m !== undefined)).toHaveLength(1);
    expect(await store.countKeys()).toBe(1);
    expect(await store.createKeyIfNone("default")).toBeUndefined();
  });

  it("keeps the ledger: rows, totals, UTC days", async () => {
    const { record } = await store.createKey("acme");
    const day = Date.UTC(2026, 10, 25);
    const row = (at: number, input: number, output: number, status = 200) =>
      store.recordCall({
        accountId: record.accountId,
        keyId: record.id,
        at,
        startedAt: at - 5,
        inputTokens: input,
        outputTokens: output,
        model: "m",
        status,
      });
    await row(day - 1, 10, 1);
    await row(day + 1000, 100, 2);
    await row(day + 2000, 50, 3, 429);
    const calls = await store.calls("acme");
    expect(calls).toHaveLength(3);
    expect(calls[1]).toEqual({
      accountId: record.accountId,
      keyId: record.id,
      at: day + 1000,
      startedAt: day + 995,
      inputTokens: 100,
      outputTokens: 2,
      model: "m",
      status: 200,
    });
    expect(await store.tokensUsedSince(record.accountId, day)).toBe(155);
    expect(await store.dailyUsage(record.accountId, day - 5)).toEqual([
      { day: day - 86_400_000, calls: 1, failedCalls: 0, inputTokens: 10, outputTokens: 1 },
      { day, calls: 2, failedCalls: 1, inputTokens: 150, outputTokens: 5 },
    ]);
    const [usage] = await store.usage("acme");
    expect(usage).toMatchObject({
      account: "acme",
      calls: 3,
      failedCalls: 1,
      inputTokens: 160,
      outputTokens: 6,
      lastCallAt: day + 2000,
      allowance: undefined,
    });
    await expect(store.usage("nobody")).rejects.toThrow(/no account/);
  });

  it("reserves tokens against the allowance and never lets a reservation overrun it", async () => {
    const { record } = await store.createKey("acme");
    let account = await store.setAllowance("acme", { tokens: 100, period: "day" });
    const first = await store.reserveTokens(account, 60);
    expect(first.ok).toBe(true);
    // 60 reserved + 50 > 100: refused, with the state that says why.
    const second = await store.reserveTokens(account, 50);
    expect(second).toMatchObject({ ok: false, state: { used: 0, reserved: 60, remaining: 40 } });
    expect(await store.allowanceState(account)).toMatchObject({ reserved: 60, remaining: 40 });
    // Settling records the exact figure and drops the reservation in one step.
    await store.recordCall(
      {
        accountId: account.id,
        keyId: record.id,
        at: now,
        inputTokens: 50,
        outputTokens: 5,
        model: "m",
        status: 200,
      },
      first.ok ? first.id : undefined,
    );
    expect(await store.allowanceState(account)).toMatchObject({
      used: 55,
      reserved: 0,
      remaining: 45,
    });
    const third = await store.reserveTokens(account, 45);
    expect(third.ok).toBe(true);
    await store.cancelReservation(third.ok ? third.id! : -1);
    expect((await store.allowanceState(account))?.reserved).toBe(0);
    // A reservation whose call is never recorded (its replica died) stops counting after its TTL.
    expect((await store.reserveTokens(account, 45)).ok).toBe(true);
    expect((await store.reserveTokens(account, 1)).ok).toBe(false);
    now += RESERVATION_TTL_MS + 1;
    expect((await store.reserveTokens(account, 1)).ok).toBe(true);
    // Accounts without an allowance write nothing.
    account = await store.setAllowance("acme", undefined);
    expect(await store.reserveTokens(account, 1e9)).toEqual({ ok: true, id: undefined });
  });

  it("reservations of one account from many stores at once never add up past the allowance", async () => {
    await store.createKey("acme");
    const account = await store.setAllowance("acme", { tokens: 1000, period: "total" });
    const stores = [store, await open(), await open(), await open()];
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => stores[i % stores.length]!.reserveTokens(account, 70)),
    );
    // 14 × 70 = 980 ≤ 1000 < 15 × 70.
    expect(results.filter((r) => r.ok)).toHaveLength(14);
    expect((await store.allowanceState(account))?.reserved).toBe(980);
  });

  it("admission refuses a call whose reservation would overrun, before it runs", async () => {
    const { key } = await store.createKey("acme");
    await store.setAllowance("acme", { tokens: 100, period: "day" });
    const admission = new Admission(store, { now: clock });
    const permit = await admission.admit(key);
    await permit.reserve({ input_tokens: 80, output_tokens: 2 });
    permit.settle({ input_tokens: 80, output_tokens: 2 });
    await permit.finish({ status: 200, model: "m" });
    const next = await admission.admit(key); // 18 left: admitted…
    const refusal = await next
      .reserve({ input_tokens: 80, output_tokens: 2 }) // …but this call needs 82
      .catch((e: AdmissionError) => e);
    expect(refusal).toBeInstanceOf(AdmissionError);
    expect((refusal as AdmissionError).code).toBe("allowanceOverrun");
    expect((refusal as AdmissionError).message).toMatch(/needs 82 tokens.*18 of its 100 left/);
    next.settle(undefined);
    await next.finish({ status: 429, model: "m" });
    expect((await store.usage("acme"))[0]?.allowance).toMatchObject({ used: 82, reserved: 0 });
  });

  if (backend.name === "postgres") {
    it("holds one account lock across stores, freed on release and when its connection dies", async () => {
      const other = await open();
      const lock = await store.tryLockAccount(7);
      expect(lock).toBeDefined();
      expect(await other.tryLockAccount(7)).toBeUndefined();
      expect(await store.tryLockAccount(7)).toBeUndefined(); // another session of the same store
      const unrelated = await other.tryLockAccount(8);
      expect(unrelated).toBeDefined();
      await lock!.release();
      await lock!.release(); // twice is harmless
      const again = await other.tryLockAccount(7);
      expect(again).toBeDefined();
      await again!.release();
      await unrelated!.release();

      // A replica whose connections die (killed, cut off) frees its locks with them.
      const dying = await open();
      expect(await dying.tryLockAccount(9)).toBeDefined();
      expect(await other.tryLockAccount(9)).toBeUndefined();
      const admin = new pg.Client({ connectionString: `${postgres.baseUrl}postgres` });
      await admin.connect();
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 9",
      );
      await admin.end();
      const freed = await other.tryLockAccount(9);
      expect(freed).toBeDefined();
      await freed!.release();
    });

    it("tells a call refused for another replica's call in flight what that call has left", async () => {
      const other = await open();
      const { key } = await store.createKey("acme");
      const here = new Admission(store, { now: clock });
      const there = new Admission(other, { now: clock });
      const refused = async () =>
        (await there.admit(key).catch((e: AdmissionError) => e)) as AdmissionError;
      const permit = await here.admit(key);
      const id = permit.account.id;
      // Held, nothing announced yet: half a typical call (1 s before any).
      expect(await other.heldCall!(id)).toBeUndefined();
      const early = await refused();
      expect([early.code, early.retryAfterMs]).toEqual(["concurrencyLimit", 500]);
      // Sized 5 s in: 4,000 tokens at 5 ms a token before any call was timed, 20 s in all.
      now += 5_000;
      await permit.reserve({ input_tokens: 4000, output_tokens: 0 });
      await expect.poll(async () => (await other.heldCall!(id))?.expectedMs).toBe(20_000);
      // On the database's clock: 5 s and the few ms since have run.
      const held = (await other.heldCall!(id))!;
      expect(held.elapsedMs).toBeGreaterThanOrEqual(5_000);
      expect(held.elapsedMs).toBeLessThan(6_000);
      const told = (await refused()).retryAfterMs!;
      expect(told).toBeGreaterThan(14_000);
      expect(told).toBeLessThanOrEqual(15_000);
      permit.settle({ input_tokens: 4000, output_tokens: 0 });
      await permit.finish({ status: 200, model: "m" });
      await expect.poll(() => other.heldCall!(id)).toBeUndefined();

      // Past what it was expected to take (5 s now, as the call before took): about as long again
      // as it has run.
      const late = await here.admit(key);
      // A lock taken again, on a connection that announced before, says nothing yet.
      expect(await other.heldCall!(id)).toBeUndefined();
      now += 25_000;
      await late.reserve({ input_tokens: 4000, output_tokens: 0 });
      await expect.poll(async () => (await other.heldCall!(id))?.expectedMs).toBe(5_000);
      const overrun = (await refused()).retryAfterMs!;
      expect(overrun).toBeGreaterThanOrEqual(25_000);
      expect(overrun).toBeLessThan(26_000);
      late.settle(undefined);
      await late.finish({ status: 499, model: "m" });
    });

    it("refuses a database migrated by a newer decisiond", async () => {
      const url = await postgres.createDatabase(`store_newer_${++databases}`);
      await (await PostgresStore.open(url)).close();
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query("UPDATE decisiond_schema SET version = version + 1");
      await admin.end();
      await expect(PostgresStore.open(url)).rejects.toThrow(/newer than this decisiond knows/);
    });
  } else {
    it("grants the account lock to its one process (the admission's slot decides)", async () => {
      const lock = await store.tryLockAccount(7);
      expect(lock).toBeDefined();
      await lock!.release();
    });
  }
});

describe("--store", () => {
  it("parses sqlite:PATH and postgres:// URLs, and says what it takes otherwise", () => {
    expect(parseStoreUrl(undefined, { DECISIOND_HOME: "/h" })).toEqual({
      kind: "sqlite",
      path: "/h/decisiond.db",
      isDefault: true,
    });
    expect(parseStoreUrl("sqlite:/var/lib/d.db")).toEqual({
      kind: "sqlite",
      path: "/var/lib/d.db",
      isDefault: false,
    });
    expect(parseStoreUrl("sqlite:///var/lib/d.db")).toEqual({
      kind: "sqlite",
      path: "/var/lib/d.db",
      isDefault: false,
    });
    expect(parseStoreUrl("postgres://u@db:5432/d")).toEqual({
      kind: "postgres",
      url: "postgres://u@db:5432/d",
    });
    expect(parseStoreUrl("postgresql://u@db/d?sslmode=require").kind).toBe("postgres");
    expect(() => parseStoreUrl("mysql://u@db/d")).toThrow(/expected sqlite:PATH or postgres:\/\//);
    expect(() => parseStoreUrl("sqlite:")).toThrow(/name the file/);
    expect(() => parseStoreUrl("postgres:///d")).toThrow(/name the host/);
    expect(redactUrl("postgres://u:secret@db/d")).toBe("postgres://u:***@db/d");
    expect(() => parseStoreUrl("redis://u:secret@db")).toThrow(/redis:\/\/u:\*\*\*@db/);
  });
});
