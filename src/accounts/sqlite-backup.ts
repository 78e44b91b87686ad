import Database from "better-sqlite3";
import { closeSync, existsSync, openSync, rmSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { MIGRATIONS } from "./sqlite-database.js";

/** What a backup holds, read back from the copy. */
export interface BackupContents {
  /** The copy's schema version (`PRAGMA user_version`). */
  readonly schemaVersion: number;
  readonly accounts: number;
  readonly keys: number;
  /** Rows of the usage ledger. */
  readonly calls: number;
}

/**
 * Copies a SQLite accounts store to a new file with SQLite's online backup API, page by page in
 * one consistent snapshot, so a server may go on answering (and writing its ledger) meanwhile;
 * the copy is owner-only (it holds the keys' hashes) and checked with `PRAGMA integrity_check`.
 * To restore: stop the servers, put the copy in the store's place (removing the store's `-wal` and
 * `-shm` files), start them (docs/OPERATIONS.md).
 * @param path - the store's file
 * @param destination - a file that does not exist yet, in a directory that does
 * @returns what the copy holds
 * @throws `Error` when the store is missing or is not a decisiond store of a known schema, when
 *   the destination exists, or when the copy fails its check (the copy is then removed)
 * @example `await backupSqliteStore("/var/lib/decisiond/decisiond.db", "/backups/2026-11-30.db")`
 */
export async function backupSqliteStore(
  path: string,
  destination: string,
): Promise<BackupContents> {
  if (!existsSync(path)) throw new Error(`no store at ${path}`);
  // better-sqlite3 trims the name it backs up to; this file is made and removed by its own.
  if (destination.trim() !== destination)
    throw new Error(`name a file without spaces at its ends, not ${JSON.stringify(destination)}`);
  const source = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const version = source.pragma("user_version", { simple: true }) as number;
    if (version < 1 || version > MIGRATIONS.length)
      throw new Error(
        `${path} is not a decisiond store this version knows (schema ${version}, known 1 to ${MIGRATIONS.length})`,
      );
    // Made here, owner-only and exclusive: an existing file is never overwritten.
    try {
      closeSync(openSync(destination, "wx", 0o600));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw new Error(
        code === "EEXIST"
          ? `${destination} exists: name a new file`
          : code === "ENOENT"
            ? `the directory ${dirname(resolve(destination))} does not exist; create it first`
            : `cannot create ${destination}: ${(error as Error).message}`,
      );
    }
    try {
      // All pages in one step, one snapshot: a step at a time restarts whenever a server writes
      // between two steps, and a server writing its ledger steadily could keep it from finishing.
      await source.backup(destination, { progress: ({ totalPages }) => totalPages });
      return contentsOf(destination);
    } catch (error) {
      rmSync(destination, { force: true });
      throw error;
    }
  } finally {
    source.close();
  }
}

/**
 * Makes a copy one self-contained file (the store's WAL mode would leave `-wal` and `-shm` files
 * beside it; a server sets WAL again when it opens it), checks it and counts what it holds.
 * @throws `Error` when the check fails
 */
function contentsOf(file: string): BackupContents {
  const copy = new Database(file, { fileMustExist: true });
  try {
    copy.pragma("journal_mode = DELETE");
    const check = copy.pragma("integrity_check", { simple: true });
    if (check !== "ok")
      throw new Error(`the copy ${file} failed its integrity check: ${String(check)}`);
    const count = (table: string) =>
      (copy.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    return {
      schemaVersion: copy.pragma("user_version", { simple: true }) as number,
      accounts: count("accounts"),
      keys: count("api_keys"),
      calls: count("usage"),
    };
  } finally {
    copy.close();
  }
}
