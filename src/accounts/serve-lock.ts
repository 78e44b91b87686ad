import Database from "better-sqlite3";
import { closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { StoreError } from "./store.js";

/**
 * One serving process per SQLite store. Admission's one-request-in-flight-per-account lives in
 * the serving process (its in-process slot), so two `decisiond serve` on one SQLite file would
 * each admit a call of the same account at once. A serving process claims the store by holding
 * an exclusive SQLite lock on a file beside it (`decisiond.db.serve-lock`) for as long as it
 * runs: the operating system drops the lock when the process ends, also on SIGKILL, so no stale
 * lock survives a crash. `decisiond keys` and `usage` open the store itself, not the lock, and
 * work beside a running server as before.
 * Why: docs/decisions/086-store-faults-and-one-sqlite-server.md
 */

/** A claim on a SQLite store for one serving process. */
export interface ServeLock {
  /** Lets the store go (another process may serve it now). Later calls are ignored. */
  release(): void;
}

/** The lock file of the store at `storePath`. */
export function serveLockPath(storePath: string): string {
  return `${storePath}.serve-lock`;
}

/**
 * Claims the SQLite store at `storePath` for this process.
 * @returns the claim; release it when the store is closed
 * @throws {@link StoreError} when another process (or another store in this one) serves it,
 *   saying to use PostgreSQL for several replicas; the SQLite error when the lock file cannot be
 *   created
 * @example const lock = claimServeLock("/var/lib/decisiond/decisiond.db"); … lock.release();
 */
export function claimServeLock(storePath: string): ServeLock {
  const file = serveLockPath(storePath);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  closeSync(openSync(file, "a", 0o600));
  const db = new Database(file, { timeout: 0 });
  try {
    // In exclusive locking mode the first write takes the file's EXCLUSIVE lock and keeps it
    // until the connection closes.
    db.pragma("locking_mode = EXCLUSIVE");
    db.exec("CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL, since INTEGER NOT NULL)");
    db.transaction(() => {
      db.exec("DELETE FROM holder");
      db.prepare("INSERT INTO holder VALUES (?, ?)").run(process.pid, Date.now());
    })();
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code?.startsWith("SQLITE_BUSY"))
      throw new StoreError(
        `another decisiond serve is running on the SQLite store ${storePath}: one SQLite store ` +
          "serves one process (its one-request-per-account admission lives in that process). " +
          "Stop the other one, or give this one its own --store; for several replicas, put them " +
          "on one PostgreSQL database: --store postgres://user@host:5432/decisiond",
      );
    throw error;
  }
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      db.close();
    },
  };
}
