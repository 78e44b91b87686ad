import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { serveLockPath } from "../src/accounts/serve-lock.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import { openAccounts } from "../src/service/build.js";
import { spawnOwned } from "./support/cleanup.js";

/**
 * Issue 47, item 6: two `decisiond serve` on one SQLite store both admitted a call of the same
 * account at once. The second is now refused at start, pointing at PostgreSQL; the claim dies
 * with its process, SIGKILL included; `decisiond keys` still opens the store beside a server.
 */

let home: string;
let path: string;
let xdg: string | undefined;
const quiet = () => {};

beforeEach(async () => {
  home = await mkdtemp(join(tmpdir(), "decisiond-lock-"));
  path = join(home, "decisiond.db");
  // The first start writes its key file under XDG_CONFIG_HOME: keep it in the test's directory.
  xdg = process.env.XDG_CONFIG_HOME;
  process.env.XDG_CONFIG_HOME = join(home, "config");
});

afterEach(async () => {
  if (xdg === undefined) delete process.env.XDG_CONFIG_HOME;
  else process.env.XDG_CONFIG_HOME = xdg;
  await rm(home, { recursive: true, force: true });
});

const config = () =>
  ({ auth: "on", admissionWaitMs: 0, store: `sqlite:${path}` }) as Parameters<
    typeof openAccounts
  >[0];

describe("one serve per SQLite store", () => {
  it("refuses a second serve on the same store, saying to use PostgreSQL; frees it on close", async () => {
    const first = await openAccounts(config(), quiet);
    const second = await openAccounts(config(), quiet).catch((error: Error) => error);
    expect(second).toBeInstanceOf(Error);
    expect((second as Error).message).toMatch(/another decisiond serve is running/);
    expect((second as Error).message).toMatch(/PostgreSQL/);
    // `decisiond keys` opens the store (not serving) beside the server.
    const keys = SqliteStore.open(path);
    await keys.createKey("team-b");
    await keys.close();
    await first.store!.close();
    const third = await openAccounts(config(), quiet);
    await third.store!.close();
  });

  it("a claim held by a process that is SIGKILLed is free at once", async () => {
    // A process holding the claim as serve does: an exclusive SQLite lock on the lock file.
    const holder = spawnOwned(
      process.execPath,
      [
        "-e",
        `const Database = require("better-sqlite3");
         const db = new Database(process.argv[1]);
         db.pragma("locking_mode = EXCLUSIVE");
         db.exec("CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL, since INTEGER NOT NULL)");
         db.exec("DELETE FROM holder");
         console.log("held");
         setInterval(() => {}, 1000);`,
        serveLockPath(path),
      ],
      { stdio: ["ignore", "pipe", "inherit"], cwd: process.cwd() },
    );
    try {
      await once(holder.stdout!, "data");
      await expect(openAccounts(config(), quiet)).rejects.toThrow(/another decisiond serve/);
    } finally {
      holder.kill("SIGKILL");
      await once(holder, "exit");
    }
    const after = await openAccounts(config(), quiet);
    await after.store!.close();
  });
});
