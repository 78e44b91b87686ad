import Database from "better-sqlite3";
import { existsSync, readdirSync, statSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { backupSqliteStore } from "../src/accounts/sqlite-backup.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import { registerBackupCommand } from "../src/cli/backup.js";
import { runCommand } from "./support/cli.js";

/** `decisiond backup`: a consistent, checked, owner-only copy of a SQLite store, servers running. */

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-backup-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function backup(...args: string[]): Promise<{ stdout: string; error?: Error }> {
  try {
    return await runCommand(registerBackupCommand, ["backup", ...args]);
  } catch (error) {
    return { stdout: "", error: error as Error };
  }
}

describe("decisiond backup", () => {
  it("copies a store a server holds open and writes to, as one owner-only file", async () => {
    const path = join(dir, "decisiond.db");
    // The server's store, open throughout: a key, and calls recorded before and during the copy.
    const store = SqliteStore.open(path);
    try {
      const { record } = await store.createKey("acme", "ci");
      const account = (await store.listAccounts())[0]!;
      const call = (at: number) =>
        store.recordCall({
          accountId: account.id,
          keyId: record.id,
          at,
          startedAt: at - 5,
          inputTokens: 40,
          outputTokens: 2,
          model: "m",
          status: 200,
        });
      for (let i = 0; i < 200; i++) await call(1_000 + i);
      const copying = backup(join(dir, "copy.db"), "--store", `sqlite:${path}`);
      await call(5_000);
      const { stdout, error } = await copying;
      expect(error).toBeUndefined();
      expect(stdout).toMatch(
        /^backed up .*decisiond\.db to .*copy\.db: schema \d+, 1 accounts, 1 keys, 20[01] calls in the ledger\n$/,
      );
    } finally {
      await store.close();
    }
    expect(statSync(join(dir, "copy.db")).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir).filter((f) => f.startsWith("copy.db"))).toEqual(["copy.db"]);
    // The copy is a store: a server opens it, and its key and ledger are there.
    const restored = SqliteStore.open(join(dir, "copy.db"));
    try {
      expect((await restored.listKeys()).map((k) => [k.accountName, k.label])).toEqual([
        ["acme", "ci"],
      ]);
      expect((await restored.usage("acme"))[0]!.inputTokens).toBeGreaterThanOrEqual(200 * 40);
    } finally {
      await restored.close();
    }
  });

  it("never overwrites a file, and copies nothing that is not a decisiond store", async () => {
    const path = join(dir, "decisiond.db");
    const store = SqliteStore.open(path);
    await store.createKey("acme");
    await store.close();
    await writeFile(join(dir, "taken.db"), "keep me");
    const taken = await backup(join(dir, "taken.db"), "--store", `sqlite:${path}`);
    expect(taken.error?.message).toMatch(/taken\.db exists: name a new file/);
    expect(statSync(join(dir, "taken.db")).size).toBe(7);

    const other = new Database(join(dir, "other.db"));
    other.exec("CREATE TABLE t (x)");
    other.close();
    await expect(backupSqliteStore(join(dir, "other.db"), join(dir, "o.db"))).rejects.toThrow(
      /is not a decisiond store this version knows \(schema 0/,
    );
    expect(existsSync(join(dir, "o.db"))).toBe(false);
    const nowhere = await backup(join(dir, "no", "b.db"), "--store", `sqlite:${path}`);
    expect(nowhere.error?.message).toBe(
      `the directory ${join(dir, "no")} does not exist; create it first`,
    );
    const spaced = await backup(`${join(dir, "s.db")} `, "--store", `sqlite:${path}`);
    expect(spaced.error?.message).toMatch(/name a file without spaces at its ends/);
    const missing = await backup(join(dir, "m.db"), "--store", `sqlite:${join(dir, "none.db")}`);
    expect(missing.error?.message).toMatch(/no store at .*none\.db/);
  });

  it("sends a PostgreSQL store to pg_dump, its password hidden", async () => {
    const { error } = await backup("b.dump", "--store", "postgres://decisiond:secret@db/decisiond");
    expect(error?.message).toBe(
      "a PostgreSQL store is backed up by PostgreSQL: pg_dump --format=custom --file=b.dump 'postgres://decisiond:***@db/decisiond' (docs/OPERATIONS.md)",
    );
  });
});
