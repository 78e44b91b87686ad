import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { PostgresStore } from "./postgres-store.js";
import { SqliteStore } from "./sqlite-store.js";
import {
  defaultStorePath,
  StoreMissingError,
  type AccountStore,
  type StoreOptions,
} from "./store.js";

/**
 * Where a store lives, parsed from `--store` / `DECISIOND_STORE`. `isDefault` marks the default
 * SQLite file, whose directory (decisiond's home) {@link openStore} makes when missing.
 */
export type StoreLocation =
  | { readonly kind: "sqlite"; readonly path: string; readonly isDefault: boolean }
  | { readonly kind: "postgres"; readonly url: string };

/**
 * Parses a store URL: `sqlite:PATH` (relative paths from the working directory), or
 * `postgres://user[:password]@host[:port]/db` (also `postgresql://`, with libpq query options such
 * as `?sslmode=require`); `undefined` or empty is the default SQLite file.
 * @param env - the variables the default file's place is read from; default the process's
 *   (read by protocol/paths.ts)
 * @throws {@link Error} naming the accepted forms for anything else.
 * @example `parseStoreUrl("sqlite:/var/lib/decisiond/decisiond.db")` → `{ kind: "sqlite", path: "/var/lib/decisiond/decisiond.db", isDefault: false }`
 */
export function parseStoreUrl(value: string | undefined, env?: NodeJS.ProcessEnv): StoreLocation {
  if (value === undefined || value.trim() === "")
    return { kind: "sqlite", path: resolve(defaultStorePath(env)), isDefault: true };
  const text = value.trim();
  if (text.startsWith("sqlite:")) {
    const path = text.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (path === "") throw new Error(`--store ${text}: name the file, e.g. sqlite:./decisiond.db`);
    return { kind: "sqlite", path: path === ":memory:" ? path : resolve(path), isDefault: false };
  }
  if (/^postgres(ql)?:\/\//.test(text)) {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new Error(`--store: not a valid PostgreSQL URL: ${redactUrl(text)}`);
    }
    if (url.hostname === "" && !url.searchParams.has("host"))
      throw new Error(
        `--store ${redactUrl(text)}: name the host, e.g. postgres://decisiond@db:5432/decisiond`,
      );
    return { kind: "postgres", url: text };
  }
  throw new Error(
    `--store ${redactUrl(text)}: expected sqlite:PATH or postgres://user@host:port/db`,
  );
}

/** A store URL with its password replaced by `***`, for messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:@/]*:)[^@/]*@/i, "$1***@");
}

/**
 * Opens (and migrates) the store at a location. A SQLite file that is not there is made (unless
 * `options.mustExist`), but only in a directory that exists, so a mistyped `--store` is not a new
 * empty store; the default file's directory (decisiond's home) is made when missing.
 * @throws {@link Error} "the directory … of --store does not exist; create it first" for a given
 *   SQLite path whose directory is missing; {@link StoreError} for a schema newer than this
 *   decisiond; the driver's error when a PostgreSQL database cannot be reached.
 * @example const store = await openStore(parseStoreUrl(config.store));
 */
export async function openStore(
  location: StoreLocation,
  options: StoreOptions = {},
): Promise<AccountStore> {
  if (location.kind === "postgres") return PostgresStore.open(location.url, options);
  const { path } = location;
  // With mustExist, SqliteStore refuses a missing file itself, naming the commands that make one.
  if (!location.isDefault && !options.mustExist && path !== ":memory:") {
    const directory = dirname(path);
    if (!existsSync(directory))
      throw new Error(`the directory ${directory} of --store does not exist; create it first`);
  }
  return SqliteStore.open(path, options);
}

/**
 * Opens the store at a location as {@link openStore} does, naming it in any error, its password
 * hidden ({@link describeStore}): the wording of every command that opens a store.
 * @throws {@link Error} "cannot open the accounts store <store>: <reason>", `cause` the error of
 *   {@link openStore}; {@link StoreMissingError} (which names the file) as it is
 * @example `const store = await openNamedStore(parseStoreUrl(flags.store), { mustExist: true });`
 */
export async function openNamedStore(
  location: StoreLocation,
  options: StoreOptions = {},
): Promise<AccountStore> {
  try {
    return await openStore(location, options);
  } catch (error) {
    if (error instanceof StoreMissingError) throw error; // it names the store already
    throw new Error(
      `cannot open the accounts store ${describeStore(location)}: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/** How a location is shown: the file, or the URL without its password. */
export function describeStore(location: StoreLocation): string {
  return location.kind === "sqlite" ? location.path : redactUrl(location.url);
}
