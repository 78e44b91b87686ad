import type { Allowance } from "./allowance.js";
import { claimServeLock, type ServeLock } from "./serve-lock.js";
import { MIGRATIONS, SqliteDatabase } from "./sqlite-database.js";
import {
  defaultStorePath,
  type Account,
  type AccountLock,
  type AccountStore,
  type AccountUsage,
  type AllowanceState,
  type ApiKeyRecord,
  type DailyUsage,
  type Reservation,
  type StoreOptions,
  type UsageRow,
} from "./store.js";

export { MIGRATIONS };

/** Runs a synchronous store call as a promise: its result, or its throw as a rejection. */
function settle<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The lock of the SQLite backend: one process, so the admission's in-process slot decides. */
const LOCAL_LOCK: AccountLock = { release: () => Promise.resolve() };

/**
 * The SQLite backend of {@link AccountStore}: one file in WAL mode, so a running server and the
 * `decisiond keys` / `usage` commands use it at once (a key revoked from the command line is
 * refused on the server's next request). One server process per file: its admission lock is the
 * admission's in-process slot, so a serving process opens it with `serving` and a second one is
 * refused (serve-lock.ts).
 * @example const store = SqliteStore.open(defaultStorePath());
 */
export class SqliteStore implements AccountStore {
  readonly kind = "sqlite";

  private constructor(
    private readonly db: SqliteDatabase,
    private readonly lock: ServeLock | undefined,
  ) {}

  /**
   * Opens (creating when missing) the store at `path` and migrates it to the current schema.
   * @param path - the file; `:memory:` for a store that lives as long as the process
   * @throws {@link StoreError} when the file was written by a newer decisiond (its schema is
   *   unknown), or with `options.serving` when another process serves it; the `fs` or SQLite
   *   error when the file cannot be created or opened.
   */
  static open(path: string = defaultStorePath(), options: StoreOptions = {}): SqliteStore {
    const lock = options.serving && path !== ":memory:" ? claimServeLock(path) : undefined;
    try {
      return new SqliteStore(SqliteDatabase.open(path, options), lock);
    } catch (error) {
      lock?.release();
      throw error;
    }
  }

  schemaVersion(): Promise<number> {
    return settle(() => this.db.schemaVersion());
  }
  ping(): Promise<void> {
    return settle(() => void this.db.countKeys());
  }
  close(): Promise<void> {
    return settle(() => {
      this.db.close();
      this.lock?.release();
    });
  }
  createAccount(name: string): Promise<Account> {
    return settle(() => this.db.createAccount(name));
  }
  ensureAccount(name: string): Promise<{ account: Account; created: boolean }> {
    return settle(() => this.db.ensureAccount(name));
  }
  findAccount(name: string): Promise<Account | undefined> {
    return settle(() => this.db.findAccount(name));
  }
  accountById(id: number): Promise<Account | undefined> {
    return settle(() => this.db.accountById(id));
  }
  listAccounts(): Promise<Account[]> {
    return settle(() => this.db.listAccounts());
  }
  setAllowance(name: string, allowance: Allowance | undefined): Promise<Account> {
    return settle(() => this.db.setAllowance(name, allowance));
  }
  createKey(
    accountName: string,
    label?: string,
  ): Promise<{ key: string; record: ApiKeyRecord; accountCreated: boolean }> {
    return settle(() => this.db.createKey(accountName, label));
  }
  createKeyIfNone(
    accountName: string,
    label?: string,
  ): Promise<{ key: string; record: ApiKeyRecord } | undefined> {
    return settle(() => this.db.createKeyIfNone(accountName, label));
  }
  keyById(id: number): Promise<ApiKeyRecord | undefined> {
    return settle(() => this.db.keyById(id));
  }
  listKeys(accountName?: string): Promise<ApiKeyRecord[]> {
    return settle(() => this.db.listKeys(accountName));
  }
  countKeys(): Promise<number> {
    return settle(() => this.db.countKeys());
  }
  revokeKey(id: number): Promise<{ record: ApiKeyRecord; alreadyRevoked: boolean }> {
    return settle(() => this.db.revokeKey(id));
  }
  findKey(key: string): Promise<{ key: ApiKeyRecord; account: Account } | undefined> {
    return settle(() => this.db.findKey(key));
  }
  touchKey(id: number): Promise<void> {
    return settle(() => this.db.touchKey(id));
  }
  recordCall(row: UsageRow, reservationId?: number): Promise<void> {
    return settle(() => this.db.recordCall(row, reservationId));
  }
  calls(accountName: string): Promise<UsageRow[]> {
    return settle(() => this.db.calls(accountName));
  }
  tokensUsedSince(accountId: number, since: number): Promise<number> {
    return settle(() => this.db.tokensUsedSince(accountId, since));
  }
  dailyUsage(accountId: number, since: number): Promise<DailyUsage[]> {
    return settle(() => this.db.dailyUsage(accountId, since));
  }
  allowanceState(account: Account): Promise<AllowanceState | undefined> {
    return settle(() => this.db.allowanceState(account));
  }
  usage(accountName?: string): Promise<AccountUsage[]> {
    return settle(() => this.db.usage(accountName));
  }
  reserveTokens(account: Account, tokens: number): Promise<Reservation> {
    return settle(() => this.db.reserveTokens(account, tokens));
  }
  cancelReservation(id: number): Promise<void> {
    return settle(() => this.db.cancelReservation(id));
  }
  tryLockAccount(): Promise<AccountLock | undefined> {
    return Promise.resolve(LOCAL_LOCK);
  }
}
