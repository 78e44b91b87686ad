import { Admission } from "../accounts/admission.js";
import { apiKeyFilePath, ensureFirstKey } from "../accounts/keyfile.js";
import { describeStore, openNamedStore, parseStoreUrl } from "../accounts/open.js";
import type { AccountStore } from "../accounts/store.js";
import type { Gate } from "../api/app.js";
import { accountGate } from "../api/gate.js";
import type { ServeConfig } from "../cli/serve-config.js";
import type { ConsoleOptions } from "../console/plugin.js";

/**
 * The accounts side of a service, as the composition root (./build.ts) opens it from the
 * configuration: the store, its admission, the gate over it, and the console over the store.
 *
 * @packageDocumentation
 */

/** A line where `serve` reports (stderr). */
export type Print = (line: string) => void;

/** What of the configuration the accounts are opened from (`--auth`, `--store`, `--console`, …). */
export type AccountsConfig = Pick<
  ServeConfig,
  "auth" | "admissionWaitMs" | "store" | "console" | "adminToken"
>;

/** The accounts side of a service: none of it with `--auth off`. */
export interface Accounts {
  readonly gate: Gate | undefined;
  readonly store: AccountStore | undefined;
  readonly admission: Admission | undefined;
}

/**
 * The accounts of `serve`: with auth on, the accounts store of `--store` (default the SQLite file
 * `$DECISIOND_HOME/decisiond.db`; on first start an account and key are created and the key is
 * written to the key file, never printed), its admission and the gate over it; with auth off,
 * none.
 * @throws Error for a bad `--store`, or a store that cannot be opened.
 * @example `const accounts = await openAccounts(config, print);`
 */
export async function openAccounts(
  config: Pick<AccountsConfig, "auth" | "admissionWaitMs" | "store">,
  print: Print,
): Promise<Accounts> {
  if (config.auth === "off") {
    print("decisiond: auth is off: requests need no API key (loopback only)");
    return { gate: undefined, store: undefined, admission: undefined };
  }
  const location = parseStoreUrl(config.store);
  const store = await openNamedStore(location, { serving: true });
  try {
    const first = await ensureFirstKey(store, describeStore(location));
    // The key goes to the 0600 file only: a terminal's scrollback or a log collector keeps what
    // is printed.
    if (first)
      print(
        `decisiond: first start: created account "${first.account}" and its API key, written to ${first.keyFile} (mode 0600); ` +
          (first.keyFile === apiKeyFilePath()
            ? "decisiond's clients read it from there"
            : `${apiKeyFilePath()} holds another store's key, kept: give this one to clients as SERVICE_API_KEY`) +
          "; manage keys with `decisiond keys`",
      );
    const admission = new Admission(store, {
      waitMs: config.admissionWaitMs,
      onError: (error) =>
        print(`decisiond: could not record a call in the usage ledger: ${String(error)}`),
    });
    return { gate: accountGate(admission), store, admission };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * The console of `serve`: none with `--console off`; else the accounts store (none with
 * `--auth off`, where the admin token has nothing to manage and is dropped) and the admin token.
 */
export function serveConsole(
  config: Pick<ServeConfig, "console">,
  adminToken: string | undefined,
  store: AccountStore | undefined,
  print: Print,
): ConsoleOptions | undefined {
  if (config.console === "off") return undefined;
  if (adminToken !== undefined && !store) {
    print("decisiond: auth is off: the admin token is not used (there are no accounts)");
    return { store, adminToken: undefined };
  }
  return { store, adminToken };
}
