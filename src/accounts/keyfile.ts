import { keyFilePath } from "../protocol/paths.js";
import { createHash } from "node:crypto";
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { dirname } from "node:path";
import type { AccountStore } from "./store.js";

/**
 * The key file: where `serve` leaves the first key it creates, and where decisiond's own clients
 * look for a key when none is given. `$XDG_CONFIG_HOME/decisiond/api_key`, else
 * `~/.config/decisiond/api_key`.
 * @param env - the variables to read; default the process's (read by protocol/paths.ts)
 */
export function apiKeyFilePath(env?: NodeJS.ProcessEnv): string {
  return keyFilePath({ env });
}

/**
 * Writes `key` (and a newline) to `path` readable by its owner only (mode 0600, directory 0700).
 * The file is written beside its final name and renamed over it, so a reader never sees half a
 * key and an older file is replaced whole.
 */
export function writeApiKeyFile(key: string, path: string = apiKeyFilePath()): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  const fd = openSync(temporary, "w", 0o600);
  try {
    writeSync(fd, `${key}\n`);
  } finally {
    closeSync(fd);
  }
  try {
    chmodSync(temporary, 0o600);
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}

/** The account `serve` creates on first start. */
export const FIRST_ACCOUNT = "default";

/** What {@link ensureFirstKey} did. */
export interface FirstKey {
  readonly key: string;
  readonly account: string;
  readonly keyId: number;
  readonly keyFile: string;
}

/**
 * Where the first key of the store `storeId` is written: the key file, unless that holds the key
 * of another store; then a file of its own beside it, named as the key file followed by a dot and
 * the first 8 hex digits of the store's SHA-256. Which store a key file belongs to is in its
 * companion, the key file's name followed by `.store` (the store's description, `describeStore`);
 * a key file without one was written before companions were kept and counts as another store's.
 * So a second server (another home, a test run) never replaces the key the first one's clients
 * read, and a store made again where it was (a home emptied and started again) writes its new key
 * where the old one was.
 * @param storeId - the store's description (a SQLite path, a PostgreSQL URL without password)
 * @param keyFile - the key file clients read (default: {@link apiKeyFilePath})
 */
export function firstKeyFile(storeId: string, keyFile: string = apiKeyFilePath()): string {
  if (!existsSync(keyFile)) return keyFile;
  let owner: string | undefined;
  try {
    owner = readFileSync(`${keyFile}.store`, "utf8").trim();
  } catch {
    owner = undefined;
  }
  if (owner === storeId) return keyFile;
  const digest = createHash("sha256").update(storeId).digest("hex").slice(0, 8);
  return `${keyFile}.${digest}`;
}

/**
 * First start: when the store has never had a key, creates the account {@link FIRST_ACCOUNT} and
 * a key for it and writes the key where {@link firstKeyFile} says, with the companion that names
 * its store. Does nothing when any key exists, revoked ones included: revoking every key locks
 * the service until `decisiond keys create`.
 * @param storeId - the store's description, as {@link firstKeyFile} takes it
 * @param keyFile - the key file clients read, mode 0600 (default: {@link apiKeyFilePath})
 * @returns where the new key went (its account, id and file; the key itself is never returned,
 *   so it cannot be printed), or `undefined` when the store has a key
 * @throws the store's error, or the `fs` error when the key file cannot be written
 * @example `const first = await ensureFirstKey(store, describeStore(location)); if (first) print(first.keyFile);`
 */
export async function ensureFirstKey(
  store: AccountStore,
  storeId: string,
  keyFile: string = apiKeyFilePath(),
): Promise<FirstKey | undefined> {
  const created = await store.createKeyIfNone(FIRST_ACCOUNT, "created on first start");
  if (!created) return undefined;
  const { key, record } = created;
  const path = firstKeyFile(storeId, keyFile);
  writeApiKeyFile(key, path);
  writeFileSync(`${path}.store`, `${storeId}\n`, { mode: 0o600 });
  return { key, account: FIRST_ACCOUNT, keyId: record.id, keyFile: path };
}
