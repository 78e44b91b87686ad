import Database from "better-sqlite3";
import { closeSync, existsSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { allowanceWindow, type Allowance } from "./allowance.js";
import { apiKeyPrefix, generateApiKey, hashApiKey } from "./keys.js";
import {
  allowanceStateOf,
  checkAccountName,
  checkAllowance,
  DAY_MS,
  exceedsAllowance,
  KEY_SELECT,
  keyLookup,
  LEDGER_COLUMNS,
  ledgerValues,
  reservationTimes,
  rowWithHash,
  storeErrors,
  toAccount,
  toAccountUsage,
  toDailyUsage,
  toKeyRecord,
  toUsageRow,
  utcDayStart,
  type AccountRow,
  type KeyRow,
  type LedgerDayRow,
  type LedgerRow,
  type LedgerTotalsRow,
} from "./rows.js";
import type {
  Account,
  AccountUsage,
  AllowanceState,
  ApiKeyRecord,
  DailyUsage,
  Reservation,
  StoreOptions,
  UsageRow,
} from "./store.js";
import { StoreMissingError } from "./store.js";

/**
 * The SQLite store's file and queries, synchronous: one file through better-sqlite3, in WAL mode
 * so a running server and the `decisiond keys` / `usage` commands can use it at the same time.
 * The schema is versioned with `PRAGMA user_version`; {@link MIGRATIONS} brings an older file up
 * to date when it is opened. Times are milliseconds since the Unix epoch (UTC). `SqliteStore`
 * (sqlite-store.ts) is the asynchronous `AccountStore` over it.
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

/**
 * The store over one SQLite file, synchronous: better-sqlite3 calls do not yield, and its
 * transactions take synchronous functions. Each method does what the `AccountStore` method of its
 * name promises; `SqliteStore` runs them as promises.
 */
export class SqliteDatabase {
  private readonly now: () => number;

  private constructor(
    private readonly db: Database.Database,
    options: StoreOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Opens (creating when missing) the file at `path`, owner-only, and migrates it.
   * @throws {@link StoreError} for a schema newer than this decisiond; the `fs` or SQLite error
   *   when the file cannot be created or opened.
   */
  static open(path: string, options: StoreOptions): SqliteDatabase {
    if (options.mustExist && path !== ":memory:" && !existsSync(path))
      throw new StoreMissingError(path);
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

  schemaVersion(): number {
    return this.db.pragma("user_version", { simple: true }) as number;
  }

  close(): void {
    this.db.close();
  }

  createAccount(name: string): Account {
    checkAccountName(name);
    if (this.findAccount(name)) throw storeErrors.accountExists(name);
    const id = this.db
      .prepare("INSERT INTO accounts (name, created_at) VALUES (?, ?)")
      .run(name, this.now()).lastInsertRowid;
    return this.accountById(Number(id))!;
  }

  ensureAccount(name: string): { account: Account; created: boolean } {
    const existing = this.findAccount(name);
    return existing
      ? { account: existing, created: false }
      : { account: this.createAccount(name), created: true };
  }

  findAccount(name: string): Account | undefined {
    const row = this.db.prepare("SELECT * FROM accounts WHERE name = ?").get(name);
    return row === undefined ? undefined : toAccount(row as AccountRow);
  }

  accountById(id: number): Account | undefined {
    const row = this.db.prepare("SELECT * FROM accounts WHERE id = ?").get(id);
    return row === undefined ? undefined : toAccount(row as AccountRow);
  }

  listAccounts(): Account[] {
    const rows = this.db.prepare("SELECT * FROM accounts ORDER BY name").all() as AccountRow[];
    return rows.map(toAccount);
  }

  setAllowance(name: string, allowance: Allowance | undefined): Account {
    const account = this.requireAccount(name);
    checkAllowance(allowance);
    this.db
      .prepare("UPDATE accounts SET allowance_tokens = ?, allowance_period = ? WHERE id = ?")
      .run(allowance?.tokens ?? null, allowance?.period ?? null, account.id);
    return this.accountById(account.id)!;
  }

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

  /** In one immediate transaction, so two processes starting at once create one key. */
  createKeyIfNone(
    accountName: string,
    label?: string,
  ): { key: string; record: ApiKeyRecord } | undefined {
    return this.db
      .transaction(() => (this.countKeys() > 0 ? undefined : this.createKey(accountName, label)))
      .immediate();
  }

  keyById(id: number): ApiKeyRecord | undefined {
    const row = this.db.prepare(`${KEY_SELECT} WHERE k.id = ?`).get(id);
    return row === undefined ? undefined : toKeyRecord(row as KeyRow);
  }

  listKeys(accountName?: string): ApiKeyRecord[] {
    const rows =
      accountName === undefined
        ? this.db.prepare(`${KEY_SELECT} ORDER BY k.id`).all()
        : this.db
            .prepare(`${KEY_SELECT} WHERE k.account_id = ? ORDER BY k.id`)
            .all(this.requireAccount(accountName).id);
    return (rows as KeyRow[]).map(toKeyRecord);
  }

  countKeys(): number {
    return (this.db.prepare("SELECT count(*) AS n FROM api_keys").get() as { n: number }).n;
  }

  revokeKey(id: number): { record: ApiKeyRecord; alreadyRevoked: boolean } {
    const before = this.keyById(id);
    if (!before) throw storeErrors.noKey(id);
    if (before.revokedAt !== undefined) return { record: before, alreadyRevoked: true };
    this.db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?").run(this.now(), id);
    return { record: this.keyById(id)!, alreadyRevoked: false };
  }

  findKey(key: string): { key: ApiKeyRecord; account: Account } | undefined {
    const lookup = keyLookup(key);
    if (!lookup) return undefined;
    const rows = this.db.prepare(`${KEY_SELECT} WHERE k.prefix = ?`).all(lookup.prefix);
    const row = rowWithHash(rows as KeyRow[], lookup.hash);
    return row && { key: toKeyRecord(row), account: this.accountById(row.account_id)! };
  }

  touchKey(id: number): void {
    this.db.prepare("UPDATE api_keys SET last_used_at = ? WHERE id = ?").run(this.now(), id);
  }

  recordCall(row: UsageRow, reservationId?: number): void {
    this.db.transaction(() => {
      this.db
        .prepare(`INSERT INTO usage (${LEDGER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
        .run(...ledgerValues(row));
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
        const state = this.allowanceState(this.accountById(account.id) ?? account);
        if (!state) return { ok: true, id: undefined };
        if (exceedsAllowance(state, tokens)) return { ok: false, state };
        const { createdAt, expiresAt } = reservationTimes(this.now());
        const id = this.db
          .prepare(
            "INSERT INTO reservations (account_id, tokens, created_at, expires_at) VALUES (?, ?, ?, ?)",
          )
          .run(account.id, tokens, createdAt, expiresAt).lastInsertRowid;
        return { ok: true, id: Number(id) };
      })
      .immediate();
  }

  calls(accountName: string): UsageRow[] {
    const account = this.requireAccount(accountName);
    const rows = this.db
      .prepare("SELECT * FROM usage WHERE account_id = ? ORDER BY id")
      .all(account.id);
    return (rows as LedgerRow[]).map(toUsageRow);
  }

  tokensUsedSince(accountId: number, since: number): number {
    const row = this.db
      .prepare(
        "SELECT coalesce(sum(input_tokens + output_tokens), 0) AS n FROM usage WHERE account_id = ? AND at >= ?",
      )
      .get(accountId, since) as { n: number };
    return row.n;
  }

  dailyUsage(accountId: number, since: number): DailyUsage[] {
    const rows = this.db
      .prepare(
        `SELECT at - (at % ${DAY_MS}) AS day,
                count(*) AS calls,
                coalesce(sum(status >= 400), 0) AS failed,
                coalesce(sum(input_tokens), 0) AS input,
                coalesce(sum(output_tokens), 0) AS output
           FROM usage WHERE account_id = ? AND at >= ?
          GROUP BY day ORDER BY day`,
      )
      .all(accountId, utcDayStart(since));
    return (rows as LedgerDayRow[]).map(toDailyUsage);
  }

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
    return accounts.map((account) =>
      toAccountUsage(
        account,
        totals.get(account.id) as LedgerTotalsRow,
        this.allowanceState(account),
      ),
    );
  }

  private requireAccount(name: string): Account {
    const account = this.findAccount(name);
    if (!account) throw storeErrors.noAccount(name);
    return account;
  }
}

/**
 * Brings a file up to {@link MIGRATIONS}' version, one transaction per step.
 * @throws {@link StoreError} when the file is at a newer version than this decisiond knows.
 */
function migrate(db: Database.Database): void {
  const version = db.pragma("user_version", { simple: true }) as number;
  if (version > MIGRATIONS.length)
    throw storeErrors.newerSchema("the store has schema version", version, MIGRATIONS.length);
  for (let v = version; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
}
