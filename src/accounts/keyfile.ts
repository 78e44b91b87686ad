import { keyFilePath } from "../protocol/paths.js";
import { chmodSync, mkdirSync, openSync, closeSync, writeSync, renameSync, rmSync } from "node:fs";
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
 * First start: when the store has never had a key, creates the account {@link FIRST_ACCOUNT} and
 * a key for it and writes the key to the key file (replacing an older file, which can only hold a
 * key of another store). Does nothing when any key exists, revoked ones included: revoking every
 * key locks the service until `decisiond keys create`.
 * @param keyFile - where the key is written, mode 0600 (default: {@link apiKeyFilePath})
 * @returns where the new key went (its account, id and file; the key itself is never returned,
 *   so it cannot be printed), or `undefined` when the store has a key
 * @throws the store's error, or the `fs` error when the key file cannot be written
 * @example `const first = await ensureFirstKey(store); if (first) print(first.keyFile);`
 */
export async function ensureFirstKey(
  store: AccountStore,
  keyFile: string = apiKeyFilePath(),
): Promise<FirstKey | undefined> {
  const created = await store.createKeyIfNone(FIRST_ACCOUNT, "created on first start");
  if (!created) return undefined;
  const { key, record } = created;
  writeApiKeyFile(key, keyFile);
  return { key, account: FIRST_ACCOUNT, keyId: record.id, keyFile };
}
