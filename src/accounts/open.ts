import { resolve } from "node:path";
import { PostgresStore } from "./postgres-store.js";
import { SqliteStore } from "./sqlite-store.js";
import { defaultStorePath, type AccountStore, type StoreOptions } from "./store.js";

/** Where a store lives, parsed from `--store` / `DECISIOND_STORE`. */
export type StoreLocation =
  | { readonly kind: "sqlite"; readonly path: string }
  | { readonly kind: "postgres"; readonly url: string };

/**
 * Parses a store URL: `sqlite:PATH` (relative paths from the working directory), or
 * `postgres://user[:password]@host[:port]/db` (also `postgresql://`, with libpq query options such
 * as `?sslmode=require`); `undefined` or empty is the default SQLite file.
 * @param env - the variables the default file's place is read from; default the process's
 *   (read by protocol/paths.ts)
 * @throws {@link Error} naming the accepted forms for anything else.
 * @example `parseStoreUrl("sqlite:/var/lib/decisiond/decisiond.db")` → `{ kind: "sqlite", path: "/var/lib/decisiond/decisiond.db" }`
 */
export function parseStoreUrl(value: string | undefined, env?: NodeJS.ProcessEnv): StoreLocation {
  if (value === undefined || value.trim() === "")
    return { kind: "sqlite", path: resolve(defaultStorePath(env)) };
  const text = value.trim();
  if (text.startsWith("sqlite:")) {
    const path = text.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (path === "") throw new Error(`--store ${text}: name the file, e.g. sqlite:./decisiond.db`);
    return { kind: "sqlite", path: path === ":memory:" ? path : resolve(path) };
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
 * Opens (and migrates) the store at a location.
 * @throws {@link StoreError} for a schema newer than this decisiond; the driver's error when a
 *   PostgreSQL database cannot be reached.
 * @example const store = await openStore(parseStoreUrl(config.store));
 */
export async function openStore(
  location: StoreLocation,
  options: StoreOptions = {},
): Promise<AccountStore> {
  return location.kind === "sqlite"
    ? SqliteStore.open(location.path, options)
    : PostgresStore.open(location.url, options);
}

/** How a location is shown: the file, or the URL without its password. */
export function describeStore(location: StoreLocation): string {
  return location.kind === "sqlite" ? location.path : redactUrl(location.url);
}
