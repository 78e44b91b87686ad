import Database from "better-sqlite3";
import { closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { allowanceWindow, type Allowance, type AllowancePeriod } from "./allowance.js";
import {
  apiKeyPrefix,
  generateApiKey,
  hashApiKey,
  hashesEqual,
  isWellFormedApiKey,
} from "./keys.js";
import {
  allowanceStateOf,
  checkAccountName,
  checkAllowance,
  DAY_MS,
  defaultStorePath,
  RESERVATION_TTL_MS,
  StoreError,
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

/**
 * The SQLite backend of the accounts store ({@link AccountStore}): one file
 * (`$DECISIOND_HOME/decisiond.db` by default) through better-sqlite3, for one machine.
 *
 * The file is in WAL mode, so a running server and the `decisiond keys` / `usage` commands can
 * use it at the same time: a key revoked from the command line is refused on the server's next
 * request. The schema is versioned with `PRAGMA user_version`; {@link MIGRATIONS} brings an older
 * file up to date when it is opened. Times are milliseconds since the Unix epoch (UTC).
 */

/**
 * Schema migrations; entry i takes the file from `user_version` i to i + 1. Append only: never
 * edit a migration that has shipped.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE accounts (
    id               INTEGER PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE,
    created_at       INTEGER NOT NULL,
    allowance_tokens INTEGER CHECK (allowance_tokens IS NULL OR allowance_tokens >= 0),
    allowance_period TEXT CHECK (allowance_period IN ('day', 'month', 'total')),
    CHECK ((allowance_tokens IS NULL) = (allowance_period IS NULL))
  );
  CREATE TABLE api_keys (
    id           INTEGER PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts(id),
    prefix       TEXT NOT NULL,
    hash         BLOB NOT NULL UNIQUE,
    label        TEXT,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
  );
  CREATE INDEX api_keys_prefix ON api_keys(prefix);
  CREATE TABLE usage (
    id            INTEGER PRIMARY KEY,
    account_id    INTEGER NOT NULL REFERENCES accounts(id),
    key_id        INTEGER REFERENCES api_keys(id),
    at            INTEGER NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    model         TEXT,
    status        INTEGER NOT NULL
  );
  CREATE INDEX usage_account_at ON usage(account_id, at);
  `,
  `
  ALTER TABLE usage ADD COLUMN started_at INTEGER;
  CREATE TABLE reservations (
    id         INTEGER PRIMARY KEY,
    account_id INTEGER NOT NULL REFERENCES accounts(id),
    tokens     INTEGER NOT NULL CHECK (tokens >= 0),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  );
  CREATE INDEX reservations_account ON reservations(account_id, expires_at);
  `,
];

interface AccountRow {
  id: number;
  name: string;
  created_at: number;
  allowance_tokens: number | null;
  allowance_period: AllowancePeriod | null;
}

interface KeyRow {
  id: number;
  account_id: number;
  account_name: string;
  prefix: string;
  hash: Buffer;
  label: string | null;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

/** The store over one SQLite file, synchronous (better-sqlite3 calls do not yield); see {@link SqliteStore}. */
class SqliteDatabase {
  private readonly now: () => number;

  private constructor(
    private readonly db: Database.Database,
    options: StoreOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Opens (creating when missing) the store at `path` and migrates it to the current schema.
   * @throws {StoreError} when the file was written by a newer decisiond (its schema is unknown).
   */
  static open(path: string = defaultStorePath(), options: StoreOptions = {}): SqliteDatabase {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    // Owner-only: SQLite gives the -wal and -shm files the database file's mode.
    if (path !== ":memory:") closeSync(openSync(path, "a", 0o600));
    const db = new Database(path);
    try {
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = NORMAL");
      db.pragma("foreign_keys = ON");
      db.pragma("busy_timeout = 5000");
      migrate(db);
    } catch (error) {
      db.close();
      throw error;
    }
    return new SqliteDatabase(db, options);
  }

  /** The schema version of the open file. */
  schemaVersion(): number {
    return this.db.pragma("user_version", { simple: true }) as number;
  }

  close(): void {
    this.db.close();
  }

  /** @throws {StoreError} on a bad or taken name. */
  createAccount(name: string): Account {
    checkAccountName(name);
    if (this.findAccount(name)) throw new StoreError(`account "${name}" already exists`);
    const id = this.db
      .prepare("INSERT INTO accounts (name, created_at) VALUES (?, ?)")
      .run(name, this.now()).lastInsertRowid;
    return this.accountById(Number(id))!;
  }

  /** The account called `name`, created when missing. @throws {StoreError} on a bad name. */
  ensureAccount(name: string): { account: Account; created: boolean } {
    const existing = this.findAccount(name);
    return existing
      ? { account: existing, created: false }
      : { account: this.createAccount(name), created: true };
  }

  findAccount(name: string): Account | undefined {
    const row = this.db.prepare("SELECT * FROM accounts WHERE name = ?").get(name) as
      AccountRow | undefined;
    return row && toAccount(row);
  }

  accountById(id: number): Account | undefined {
    const row = this.db.prepare("SELECT * FROM accounts WHERE id = ?").get(id) as
      AccountRow | undefined;
    return row && toAccount(row);
  }

  listAccounts(): Account[] {
    return (this.db.prepare("SELECT * FROM accounts ORDER BY name").all() as AccountRow[]).map(
      toAccount,
    );
  }

  /**
   * Sets (or with `undefined` removes) an account's allowance.
   * @throws {StoreError} for an unknown account or a negative or fractional token count.
   */
  setAllowance(name: string, allowance: Allowance | undefined): Account {
    const account = this.requireAccount(name);
    checkAllowance(allowance);
    this.db
      .prepare("UPDATE accounts SET allowance_tokens = ?, allowance_period = ? WHERE id = ?")
      .run(allowance?.tokens ?? null, allowance?.period ?? null, account.id);
    return this.accountById(account.id)!;
  }

  /**
   * Creates a key for an account (creating the account when missing).
   * @returns the key, which is not stored and cannot be shown again, and its record.
   */
  createKey(
    accountName: string,
    label?: string,
  ): { key: string; record: ApiKeyRecord; accountCreated: boolean } {
    return this.db.transaction(() => {
      const { account, created } = this.ensureAccount(accountName);
      const key = generateApiKey();
      const id = this.db
        .prepare(
          "INSERT INTO api_keys (account_id, prefix, hash, label, created_at) VALUES (?, ?, ?, ?, ?)",
        )
        .run(
          account.id,
          apiKeyPrefix(key),
          hashApiKey(key),
          label ?? null,
          this.now(),
        ).lastInsertRowid;
      return { key, record: this.keyById(Number(id))!, accountCreated: created };
    })();
  }

  /**
   * {@link createKey} when the store has never had a key (revoked ones count), in one immediate
   * transaction, so two processes starting at once create one key between them.
   */
  createKeyIfNone(
    accountName: string,
    label?: string,
  ): { key: string; record: ApiKeyRecord } | undefined {
    return this.db
      .transaction(() => (this.countKeys() > 0 ? undefined : this.createKey(accountName, label)))
      .immediate();
  }

  keyById(id: number): ApiKeyRecord | undefined {
    const row = this.db.prepare(`${KEY_SELECT} WHERE k.id = ?`).get(id) as KeyRow | undefined;
    return row && toKeyRecord(row);
  }

  /** Keys, oldest first, of one account or of all. @throws {StoreError} for an unknown account. */
  listKeys(accountName?: string): ApiKeyRecord[] {
    if (accountName === undefined)
      return (this.db.prepare(`${KEY_SELECT} ORDER BY k.id`).all() as KeyRow[]).map(toKeyRecord);
    const account = this.requireAccount(accountName);
    return (
      this.db
        .prepare(`${KEY_SELECT} WHERE k.account_id = ? ORDER BY k.id`)
        .all(account.id) as KeyRow[]
    ).map(toKeyRecord);
  }

  /** How many keys were ever created, revoked ones included. */
  countKeys(): number {
    return (this.db.prepare("SELECT count(*) AS n FROM api_keys").get() as { n: number }).n;
  }

  /**
   * Revokes a key; requests with it are refused from then on.
   * @returns the record, and whether it was already revoked. @throws {StoreError} for an unknown id.
   */
  revokeKey(id: number): { record: ApiKeyRecord; alreadyRevoked: boolean } {
    const before = this.keyById(id);
    if (!before) throw new StoreError(`no key with id ${id} (see decisiond keys list)`);
    if (before.revokedAt !== undefined) return { record: before, alreadyRevoked: true };
    this.db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").run(this.now(), id);
    return { record: this.keyById(id)!, alreadyRevoked: false };
  }

  /**
   * The record of a presented key, revoked ones included (the caller decides), or `undefined`.
   * Rows are found by the key's prefix and the hashes compared with `crypto.timingSafeEqual`.
   */
  findKey(key: string): { key: ApiKeyRecord; account: Account } | undefined {
    if (!isWellFormedApiKey(key)) return undefined;
    const hash = hashApiKey(key);
    const rows = this.db
      .prepare(`${KEY_SELECT} WHERE k.prefix = ?`)
      .all(apiKeyPrefix(key)) as KeyRow[];
    const row = rows.find((r) => hashesEqual(r.hash, hash));
    if (!row) return undefined;
    return { key: toKeyRecord(row), account: this.accountById(row.account_id)! };
  }

  /** Records that a key was used now. */
  touchKey(id: number): void {
    this.db.prepare("UPDATE api_keys SET last_used_at = ? WHERE id = ?").run(this.now(), id);
  }

  recordCall(row: UsageRow, reservationId?: number): void {
    this.db.transaction(() => {
      this.db
        .prepare(
          "INSERT INTO usage (account_id, key_id, at, started_at, input_tokens, output_tokens, model, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .run(
          row.accountId,
          row.keyId ?? null,
          row.at,
          row.startedAt ?? null,
          row.inputTokens,
          row.outputTokens,
          row.model ?? null,
          row.status,
        );
      if (reservationId !== undefined) this.cancelReservation(reservationId);
    })();
  }

  cancelReservation(id: number): void {
    this.db.prepare("DELETE FROM reservations WHERE id = ?").run(id);
  }

  reserveTokens(account: Account, tokens: number): Reservation {
    if (!account.allowance) return { ok: true, id: undefined };
    return this.db
      .transaction((): Reservation => {
        const current = this.accountById(account.id) ?? account;
        const state = this.allowanceState(current);
        if (!state) return { ok: true, id: undefined };
        if (state.used + state.reserved + tokens > state.tokens) return { ok: false, state };
        const now = this.now();
        const id = this.db
          .prepare(
            "INSERT INTO reservations (account_id, tokens, created_at, expires_at) VALUES (?, ?, ?, ?)",
          )
          .run(account.id, tokens, now, now + RESERVATION_TTL_MS).lastInsertRowid;
        return { ok: true, id: Number(id) };
      })
      .immediate();
  }

  /** Ledger rows of an account, oldest first (for tests and exports). */
  calls(accountName: string): UsageRow[] {
    const account = this.requireAccount(accountName);
    return (
      this.db.prepare("SELECT * FROM usage WHERE account_id = ? ORDER BY id").all(account.id) as {
        account_id: number;
        key_id: number | null;
        at: number;
        input_tokens: number;
        output_tokens: number;
        model: string | null;
        status: number;
        started_at: number | null;
      }[]
    ).map((r) => ({
      accountId: r.account_id,
      keyId: r.key_id ?? undefined,
      at: r.at,
      startedAt: r.started_at ?? undefined,
      inputTokens: r.input_tokens,
      outputTokens: r.output_tokens,
      model: r.model ?? undefined,
      status: r.status,
    }));
  }

  /** Tokens (input + output) an account has used since `since` (ms). */
  tokensUsedSince(accountId: number, since: number): number {
    const row = this.db
      .prepare(
        "SELECT coalesce(sum(input_tokens + output_tokens), 0) AS n FROM usage WHERE account_id = ? AND at >= ?",
      )
      .get(accountId, since) as { n: number };
    return row.n;
  }

  /**
   * An account's calls and tokens per UTC day, for the days from `since` (ms, any time of its day)
   * to now, oldest first; days without calls are left out.
   */
  dailyUsage(accountId: number, since: number): DailyUsage[] {
    const start = since - (((since % DAY_MS) + DAY_MS) % DAY_MS);
    return (
      this.db
        .prepare(
          `SELECT at - (at % ${DAY_MS}) AS day,
                  count(*) AS calls,
                  coalesce(sum(status >= 400), 0) AS failed,
                  coalesce(sum(input_tokens), 0) AS input,
                  coalesce(sum(output_tokens), 0) AS output
             FROM usage WHERE account_id = ? AND at >= ?
            GROUP BY day ORDER BY day`,
        )
        .all(accountId, start) as {
        day: number;
        calls: number;
        failed: number;
        input: number;
        output: number;
      }[]
    ).map((r) => ({
      day: r.day,
      calls: r.calls,
      failedCalls: r.failed,
      inputTokens: r.input,
      outputTokens: r.output,
    }));
  }

  /**
   * An account's allowance as of now: the period's window, tokens used in it and what is left;
   * `undefined` when the account has no allowance.
   */
  allowanceState(account: Account): AllowanceState | undefined {
    if (!account.allowance) return undefined;
    const now = this.now();
    const window = allowanceWindow(account.allowance.period, now);
    const used = this.tokensUsedSince(account.id, window.start);
    const { reserved } = this.db
      .prepare(
        "SELECT coalesce(sum(tokens), 0) AS reserved FROM reservations WHERE account_id = ? AND expires_at > ?",
      )
      .get(account.id, now) as { reserved: number };
    return allowanceStateOf(account.allowance, used, reserved, window.end);
  }

  /** Usage per account (all of them, or one). @throws {StoreError} for an unknown account. */
  usage(accountName?: string): AccountUsage[] {
    const accounts =
      accountName === undefined ? this.listAccounts() : [this.requireAccount(accountName)];
    const totals = this.db.prepare(
      `SELECT count(*) AS calls,
              coalesce(sum(status >= 400), 0) AS failed,
              coalesce(sum(input_tokens), 0) AS input,
              coalesce(sum(output_tokens), 0) AS output,
              max(at) AS last
         FROM usage WHERE account_id = ?`,
    );
    return accounts.map((account) => {
      const t = totals.get(account.id) as {
        calls: number;
        failed: number;
        input: number;
        output: number;
        last: number | null;
      };
      return {
        account: account.name,
        calls: t.calls,
        failedCalls: t.failed,
        inputTokens: t.input,
        outputTokens: t.output,
        lastCallAt: t.last ?? undefined,
        allowance: this.allowanceState(account),
      };
    });
  }

  private requireAccount(name: string): Account {
    const account = this.findAccount(name);
    if (!account) throw new StoreError(`no account "${name}"`);
    return account;
  }
}

const KEY_SELECT = `SELECT k.*, a.name AS account_name FROM api_keys k JOIN accounts a ON a.id = k.account_id`;

function migrate(db: Database.Database): void {
  const version = db.pragma("user_version", { simple: true }) as number;
  if (version > MIGRATIONS.length)
    throw new StoreError(
      `the store has schema version ${version}, newer than this decisiond knows (${MIGRATIONS.length}); upgrade decisiond`,
    );
  for (let v = version; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
}

function toAccount(row: AccountRow): Account {
  return {
    id: row.id,
    name: row.name,
    createdAt: row.created_at,
    allowance:
      row.allowance_tokens !== null && row.allowance_period !== null
        ? { tokens: row.allowance_tokens, period: row.allowance_period }
        : undefined,
  };
}

function toKeyRecord(row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    accountName: row.account_name,
    prefix: row.prefix,
    label: row.label ?? undefined,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at ?? undefined,
    revokedAt: row.revoked_at ?? undefined,
  };
}

/** Runs a synchronous store call as a promise: its result, or its throw as a rejection. */
function settle<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error as Error);
  }
}

/** The lock of the SQLite backend: one process, so the admission's in-process slot decides. */
const LOCAL_LOCK: AccountLock = { release: () => Promise.resolve() };

/**
 * The SQLite backend of {@link AccountStore}: one file in WAL mode, so a running server and the
 * `decisiond keys` / `usage` commands use it at once (a key revoked from the command line is
 * refused on the server's next request). One server process per file: its admission lock is the
 * admission's in-process slot.
 * @example const store = SqliteStore.open(defaultStorePath());
 */
export class SqliteStore implements AccountStore {
  readonly kind = "sqlite";

  private constructor(private readonly db: SqliteDatabase) {}

  /**
   * Opens (creating when missing) the store at `path` and migrates it to the current schema.
   * @throws {StoreError} when the file was written by a newer decisiond (its schema is unknown).
   */
  static open(path: string = defaultStorePath(), options: StoreOptions = {}): SqliteStore {
    return new SqliteStore(SqliteDatabase.open(path, options));
  }

  schemaVersion(): Promise<number> {
    return settle(() => this.db.schemaVersion());
  }
  ping(): Promise<void> {
    return settle(() => void this.db.countKeys());
  }
  close(): Promise<void> {
    return settle(() => this.db.close());
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
