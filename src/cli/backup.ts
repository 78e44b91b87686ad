import type { Command } from "commander";
import { describeStore, parseStoreUrl, redactUrl } from "../accounts/open.js";
import { backupSqliteStore } from "../accounts/sqlite-backup.js";
import { out } from "./keys.js";
import { storeOption } from "./options.js";

/**
 * `decisiond backup FILE [--store URL]`: a consistent copy of a SQLite accounts store, taken while
 * servers run ({@link backupSqliteStore}); a PostgreSQL store is told to use `pg_dump`.
 * @example `registerBackupCommand(program);`
 */
export function registerBackupCommand(program: Command): void {
  program
    .command("backup")
    .description(
      "copy the accounts store (keys, accounts, allowances, usage ledger) to a new file, while servers run",
    )
    .argument("<file>", "the copy: a file that does not exist yet")
    .addOption(storeOption())
    .action(async (file: string, flags: { store?: string }) => {
      const location = parseStoreUrl(flags.store);
      if (location.kind === "postgres")
        throw new Error(
          `a PostgreSQL store is backed up by PostgreSQL: pg_dump --format=custom --file=${file} '${redactUrl(location.url)}' (docs/OPERATIONS.md)`,
        );
      const copy = await backupSqliteStore(location.path, file);
      out(
        `backed up ${describeStore(location)} to ${file}: schema ${copy.schemaVersion}, ${copy.accounts} accounts, ${copy.keys} keys, ${copy.calls} calls in the ledger`,
      );
    });
}
