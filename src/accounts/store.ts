import { join } from "node:path";
import { CodedError } from "../protocol/errors.js";
import { decisiondHome } from "../protocol/paths.js";
import type { Allowance } from "./allowance.js";

/**
 * The accounts store: accounts, API keys (hashed), the usage ledger, allowance reservations and
 * the per-account admission lock, behind one asynchronous interface with two backends:
 * `SqliteStore` (sqlite-store.ts: one file, one machine; the default) and `PostgresStore`
 * (postgres-store.ts: several replicas on one database).
 * Both pass the same suite (test/store.test.ts). Times are milliseconds since the Unix epoch (UTC).
 * Why PostgreSQL and an advisory lock: docs/decisions/040-replicas-on-postgresql.md
 */

/** The SQLite file's name inside the decisiond home. */
export const STORE_FILE = "decisiond.db";

/**
 * Where the SQLite store lives: `$DECISIOND_HOME/decisiond.db` (default `~/.cache/decisiond/decisiond.db`).
 * @param env - the variables to read; default the process's (read by protocol/paths.ts)
 */
export function defaultStorePath(env?: NodeJS.ProcessEnv): string {
  return join(decisiondHome(env), STORE_FILE);
}

/** An account: who keys belong to, and what usage is counted against. */
export interface Account {
  readonly id: number;
  readonly name: string;
  readonly createdAt: number;
  /** Tokens per period; `undefined` for no limit. */
  readonly allowance: Allowance | undefined;
}

/** An API key as stored: never the key itself. */
export interface ApiKeyRecord {
  readonly id: number;
  readonly accountId: number;
  readonly accountName: string;
  /** The first characters of the key, e.g. `dsk_3fQ9xZ1a`. */
  readonly prefix: string;
  readonly label: string | undefined;
  readonly createdAt: number;
  readonly lastUsedAt: number | undefined;
  readonly revokedAt: number | undefined;
}

/** One row of the usage ledger: one admitted call. */
export interface UsageRow {
  readonly accountId: number;
  readonly keyId: number | undefined;
  /** When the call let go of its account's slot (the model was done, or the client left). */
  readonly at: number;
  /** When the call was admitted; `undefined` in rows written before schema 2. */
  readonly startedAt?: number | undefined;
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** The model that answered, when the request named one the server has. */
  readonly model: string | undefined;
  /** The HTTP status the call was answered with (499: the client went away first). */
  readonly status: number;
}

/** An allowance as of now: tokens used in the current period, reserved by calls in flight, left. */
export type AllowanceState = Allowance & {
  readonly used: number;
  /** Tokens held by admitted calls not yet in the ledger (see {@link AccountStore.reserveTokens}). */
  readonly reserved: number;
  /** `tokens − used − reserved`, at least 0. */
  readonly remaining: number;
  readonly renewsAt: number | undefined;
};

/** An account's usage, as `decisiond usage` reports it. */
export interface AccountUsage {
  readonly account: string;
  readonly calls: number;
  readonly failedCalls: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly lastCallAt: number | undefined;
  readonly allowance: AllowanceState | undefined;
}

/** One UTC day of an account's ledger. */
export interface DailyUsage {
  /** The day's start, ms since the epoch (UTC midnight). */
  readonly day: number;
  readonly calls: number;
  /** Calls answered with a status ≥ 400 (499: the client went away first). */
  readonly failedCalls: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/**
 * An account's admission lock, held while one of its calls is in flight. With PostgreSQL it is a
 * session-level advisory lock on a connection of its own, so the database frees it when the
 * replica holding it dies or loses its connection.
 */
export interface AccountLock {
  /** Frees the lock; never throws (a lock whose connection failed is freed by the database). */
  release(): Promise<void>;
  /**
   * Tells other processes, where they can see it (PostgreSQL: the lock's session's name), how long
   * the call holding the lock has run and how long it is expected to take, ms, for their
   * refusals' Retry-After ({@link AccountStore.heldCall}); never throws.
   */
  announce?(elapsedMs: number, expectedMs: number): void;
}

/** What the process holding an account's lock announced of its call ({@link AccountLock.announce}). */
export interface HeldCall {
  /** How long the call has run by now, ms. */
  readonly elapsedMs: number;
  /** How long it was expected to take, ms. */
  readonly expectedMs: number;
}

/** What {@link AccountStore.reserveTokens} answers. */
export type Reservation =
  | { readonly ok: true; readonly id: number | undefined }
  | { readonly ok: false; readonly state: AllowanceState };

/** Thrown for requests the store refuses (unknown account, duplicate name, bad value). */
export class StoreError extends Error {
  override readonly name = "StoreError";
}

/** How long a caller refused for a store outage should wait, s: a failover or restart takes a few. */
export const STORE_RETRY_AFTER_S = 2;

/**
 * The store did not answer a call that needed it (the database is down, unreachable, or failed
 * the query): thrown by the admission (admission.ts) in place of the backend's error, which is its `cause`.
 * Refusals of the store's own ({@link StoreError}) are not this. Its code is `storeUnavailable`.
 */
export class StoreUnavailableError extends CodedError<"storeUnavailable"> {
  constructor(cause: unknown) {
    super("storeUnavailable", [STORE_RETRY_AFTER_S], {
      cause,
      retryAfterMs: STORE_RETRY_AFTER_S * 1000,
    });
  }
}

/**
 * `error` as a {@link StoreUnavailableError}, unless it is a {@link StoreError} (a refusal, not an
 * outage) or already one.
 */
export function asStoreUnavailable(error: unknown): unknown {
  return error instanceof StoreError || error instanceof StoreUnavailableError
    ? error
    : new StoreUnavailableError(error);
}

/**
 * `store` with every rejection of its methods turned by {@link asStoreUnavailable}: a caller that
 * answers HTTP (the console) gets `StoreUnavailableError` (→ 503) for an outage and
 * {@link StoreError} for a refusal, never the driver's own error.
 * @example const store = outagesAsErrors(await openStore(location));
 */
export function outagesAsErrors(store: AccountStore): AccountStore {
  return new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        try {
          const result = (value as (...a: unknown[]) => unknown).apply(target, args);
          return result instanceof Promise
            ? result.catch((error: unknown) => {
                throw asStoreUnavailable(error);
              })
            : result;
        } catch (error) {
          throw asStoreUnavailable(error);
        }
      };
    },
  });
}

/** Options every backend takes. */
export interface StoreOptions {
  /** The clock; tests move it. Default `Date.now`. */
  readonly now?: () => number;
  /**
   * Opened by a serving process (`decisiond serve`): a SQLite store is then claimed for this
   * process alone until it is closed, and opening it fails while another process serves it
   * (serve-lock.ts). PostgreSQL stores are shared by design. Default `false`.
   */
  readonly serving?: boolean;
  /**
   * A SQLite store that is not there is an error (`StoreMissingError`), not a new empty store: for
   * commands that read or change what a store holds, where a mistyped path would otherwise look
   * like a store with no accounts. Default `false`.
   */
  readonly mustExist?: boolean;
}

/** Thrown when a store opened with `mustExist` is not there. */
export class StoreMissingError extends Error {
  constructor(readonly path: string) {
    super(
      `no accounts store at ${path}: it is made by \`decisiond serve\` or \`decisiond keys create\` (check --store or DECISIOND_STORE)`,
    );
    this.name = "StoreMissingError";
  }
}

/** How long a reservation holds tokens when its call is never recorded (its replica died), ms. */
export const RESERVATION_TTL_MS = 10 * 60_000;

/**
 * The store. Every method may reject with the backend's error when the database cannot be
 * reached; the ones that name an account or key reject with {@link StoreError} when it is unknown.
 * @example `const store = await openStore(parseStoreUrl(url)); const found = await store.findKey(key);`
 */
export interface AccountStore {
  /** `sqlite` or `postgres`. */
  readonly kind: "sqlite" | "postgres";
  /** The schema version the database is at. */
  schemaVersion(): Promise<number>;
  /** Resolves when the database answers a trivial query (for `/readyz`). */
  ping(): Promise<void>;
  close(): Promise<void>;

  /** @throws {@link StoreError} on a bad or taken name. */
  createAccount(name: string): Promise<Account>;
  /** The account called `name`, created when missing. @throws {@link StoreError} on a bad name. */
  ensureAccount(name: string): Promise<{ account: Account; created: boolean }>;
  findAccount(name: string): Promise<Account | undefined>;
  accountById(id: number): Promise<Account | undefined>;
  /** Every account, by name. */
  listAccounts(): Promise<Account[]>;
  /**
   * Sets (or with `undefined` removes) an account's allowance.
   * @throws {@link StoreError} for an unknown account or a negative or fractional token count.
   */
  setAllowance(name: string, allowance: Allowance | undefined): Promise<Account>;

  /**
   * Creates a key for an account (creating the account when missing).
   * @returns the key, which is not stored and cannot be shown again, and its record.
   */
  createKey(
    accountName: string,
    label?: string,
  ): Promise<{ key: string; record: ApiKeyRecord; accountCreated: boolean }>;
  /**
   * {@link createKey} when the store has never had a key (revoked ones count), atomically, so two
   * processes starting at once create one key between them.
   */
  createKeyIfNone(
    accountName: string,
    label?: string,
  ): Promise<{ key: string; record: ApiKeyRecord } | undefined>;
  keyById(id: number): Promise<ApiKeyRecord | undefined>;
  /** Keys, oldest first, of one account or of all. @throws {@link StoreError} for an unknown account. */
  listKeys(accountName?: string): Promise<ApiKeyRecord[]>;
  /** How many keys were ever created, revoked ones included. */
  countKeys(): Promise<number>;
  /**
   * Revokes a key; requests with it are refused from then on, on every replica.
   * @returns the record, and whether it was already revoked. @throws {@link StoreError} for an unknown id.
   */
  revokeKey(id: number): Promise<{ record: ApiKeyRecord; alreadyRevoked: boolean }>;
  /**
   * The record of a presented key, revoked ones included (the caller decides), or `undefined`.
   * Rows are found by the key's prefix and the hashes compared with `crypto.timingSafeEqual`.
   */
  findKey(key: string): Promise<{ key: ApiKeyRecord; account: Account } | undefined>;
  /** Records that a key was used now. */
  touchKey(id: number): Promise<void>;

  /**
   * Appends one call to the ledger and, in the same transaction, drops its reservation
   * (`reservationId` from {@link reserveTokens}), so the tokens are never counted twice or lost.
   */
  recordCall(row: UsageRow, reservationId?: number): Promise<void>;
  /** Ledger rows of an account, oldest first (for tests and exports). */
  calls(accountName: string): Promise<UsageRow[]>;
  /** Tokens (input + output) an account has used since `since` (ms). */
  tokensUsedSince(accountId: number, since: number): Promise<number>;
  /**
   * An account's calls and tokens per UTC day, for the days from `since` (ms, any time of its day)
   * to now, oldest first; days without calls are left out.
   */
  dailyUsage(accountId: number, since: number): Promise<DailyUsage[]>;
  /** An account's allowance as of now; `undefined` when it has none. */
  allowanceState(account: Account): Promise<AllowanceState | undefined>;
  /** Usage per account (all of them, or one). @throws {@link StoreError} for an unknown account. */
  usage(accountName?: string): Promise<AccountUsage[]>;

  /**
   * Reserves `tokens` of an account's allowance for a call about to run, atomically with the
   * check that used + reserved + `tokens` ≤ the allowance. Accounts without an allowance get
   * `{ ok: true, id: undefined }` and nothing is written. A reservation not settled by
   * {@link recordCall} or {@link cancelReservation} stops counting after {@link RESERVATION_TTL_MS}.
   * @returns the reservation's id, or the allowance state that refuses it.
   */
  reserveTokens(account: Account, tokens: number): Promise<Reservation>;
  /** Drops a reservation whose call will not be recorded. */
  cancelReservation(id: number): Promise<void>;

  /**
   * Takes an account's admission lock without waiting.
   * @returns the lock, or `undefined` when another process holds it. The SQLite backend has no
   *   other process to share with and always grants it (the admission's in-process slot decides).
   */
  tryLockAccount(accountId: number): Promise<AccountLock | undefined>;
  /**
   * What the process holding the account's lock announced of its call; `undefined` when the lock
   * is free, nothing was announced, or the backend has no other process (SQLite).
   */
  heldCall?(accountId: number): Promise<HeldCall | undefined>;
}
