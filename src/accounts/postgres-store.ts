import type pg from "pg";
import { allowanceWindow, type Allowance } from "./allowance.js";
import { apiKeyPrefix, generateApiKey, hashApiKey } from "./keys.js";
import { PostgresLedger } from "./postgres-ledger.js";
import {
  allowanceStateOf,
  checkAccountName,
  checkAllowance,
  DAY_MS,
  exceedsAllowance,
  KEY_SELECT,
  keyLookup,
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
import {
  ADVISORY_NAMESPACE,
  FIRST_KEY_LOCK,
  heldCallOf,
  migrate,
  openPool,
  PG_MIGRATIONS,
  STORE_WAIT_MS,
  transaction,
  tryAccountLock,
  type Queryable,
} from "./postgres-database.js";
import type {
  Account,
  AccountLock,
  AccountStore,
  AccountUsage,
  AllowanceState,
  ApiKeyRecord,
  DailyUsage,
  Reservation,
  StoreOptions,
  UsageRow,
} from "./store.js";

export { ADVISORY_NAMESPACE, PG_MIGRATIONS };

/** An account created unless its name is taken: the row, or none when it is. */
const INSERT_ACCOUNT =
  "INSERT INTO accounts (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING *";

/** Options of {@link PostgresStore.open}. */
export interface PostgresStoreOptions extends StoreOptions {
  /** Connections for queries. Default 10. */
  readonly poolSize?: number;
  /** Connections for admission locks: the most accounts this replica serves at once. Default 64. */
  readonly lockPoolSize?: number;
  /**
   * Seconds of silence after which the database probes a lock's connection (TCP keepalive, then
   * 2 probes 2 s apart), so a replica cut off without a FIN frees its locks. Default 5.
   */
  readonly keepaliveSeconds?: number;
}

/**
 * The PostgreSQL backend of {@link AccountStore}, for several decisiond replicas on one database
 * (node-postgres). Keys, ledger and allowances live in the database, so a key revoked on one
 * replica is refused by all on their next request. An account's admission lock is a
 * session-level advisory lock held on a connection of its own for the length of the call: the
 * database frees it when the call ends, and by itself when the replica dies or its connection
 * drops. Why: docs/decisions/040-replicas-on-postgresql.md
 * @example `const store = await PostgresStore.open("postgres://decisiond@db:5432/decisiond");`
 */
export class PostgresStore implements AccountStore {
  readonly kind = "postgres";
  private readonly now: () => number;
  /** Connections holding an account lock, closed by {@link close}. */
  private readonly held = new Set<pg.PoolClient>();
  /** Ledger writes, and the voiding of those the database did not answer. */
  readonly ledger: PostgresLedger;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly lockPool: pg.Pool,
    private readonly keepaliveSeconds: number,
    options: StoreOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.ledger = new PostgresLedger(pool);
  }

  /**
   * Connects to `url` and migrates the database to the current schema (under an advisory lock,
   * so replicas starting at once migrate it once).
   * @throws {@link StoreError} when the database was migrated by a newer decisiond; the driver's
   *   error when it cannot be reached.
   */
  static async open(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    // Migrating may wait for another replica's migration: on a connection of its own, unbounded.
    const migrations = openPool(url, 1);
    try {
      await migrate(migrations);
    } finally {
      await migrations.end();
    }
    // A serving process waits a bounded time for the database (STORE_WAIT_MS); the CLI does not.
    const wait = options.serving ? STORE_WAIT_MS : undefined;
    const pool = openPool(url, options.poolSize ?? 10, wait);
    const lockPool = openPool(url, options.lockPoolSize ?? 64, wait);
    return new PostgresStore(pool, lockPool, options.keepaliveSeconds ?? 5, options);
  }

  private async rows<T extends pg.QueryResultRow>(
    sql: string,
    values: unknown[] = [],
    client: Queryable = this.pool,
  ): Promise<T[]> {
    return (await client.query<T>(sql, values)).rows;
  }

  /** The first row of a query that always returns one (an aggregate, `RETURNING`). */
  private async one<T extends pg.QueryResultRow>(
    sql: string,
    values: unknown[] = [],
    client: Queryable = this.pool,
  ): Promise<T> {
    const [row] = await this.rows<T>(sql, values, client);
    return row!;
  }

  async schemaVersion(): Promise<number> {
    const [row] = await this.rows<{ version: number }>("SELECT version FROM decisiond_schema");
    return row?.version ?? 0;
  }

  async ping(): Promise<void> {
    await this.pool.query("SELECT 1");
  }

  /** Closes every connection; account locks still held are freed with theirs. */
  async close(): Promise<void> {
    for (const client of this.held) client.release(true);
    this.held.clear();
    this.ledger.close();
    await Promise.all([this.pool.end(), this.lockPool.end()]);
  }

  async createAccount(name: string): Promise<Account> {
    checkAccountName(name);
    const [row] = await this.rows<AccountRow>(INSERT_ACCOUNT, [name, this.now()]);
    if (!row) throw storeErrors.accountExists(name);
    return toAccount(row);
  }

  async ensureAccount(
    name: string,
    client: Queryable = this.pool,
  ): Promise<{ account: Account; created: boolean }> {
    checkAccountName(name);
    const [inserted] = await this.rows<AccountRow>(INSERT_ACCOUNT, [name, this.now()], client);
    if (inserted) return { account: toAccount(inserted), created: true };
    const row = await this.one<AccountRow>(
      "SELECT * FROM accounts WHERE name = $1",
      [name],
      client,
    );
    return { account: toAccount(row), created: false };
  }

  async findAccount(name: string): Promise<Account | undefined> {
    const [row] = await this.rows<AccountRow>("SELECT * FROM accounts WHERE name = $1", [name]);
    return row && toAccount(row);
  }

  async accountById(id: number): Promise<Account | undefined> {
    const [row] = await this.rows<AccountRow>("SELECT * FROM accounts WHERE id = $1", [id]);
    return row && toAccount(row);
  }

  async listAccounts(): Promise<Account[]> {
    return (await this.rows<AccountRow>("SELECT * FROM accounts ORDER BY name")).map(toAccount);
  }

  async setAllowance(name: string, allowance: Allowance | undefined): Promise<Account> {
    checkAllowance(allowance);
    const [row] = await this.rows<AccountRow>(
      "UPDATE accounts SET allowance_tokens = $1, allowance_period = $2 WHERE name = $3 RETURNING *",
      [allowance?.tokens ?? null, allowance?.period ?? null, name],
    );
    if (!row) throw storeErrors.noAccount(name);
    return toAccount(row);
  }

  async createKey(
    accountName: string,
    label?: string,
  ): Promise<{ key: string; record: ApiKeyRecord; accountCreated: boolean }> {
    return transaction(this.pool, (client) => this.insertKey(client, accountName, label));
  }

  private async insertKey(
    client: pg.PoolClient,
    accountName: string,
    label: string | undefined,
  ): Promise<{ key: string; record: ApiKeyRecord; accountCreated: boolean }> {
    const { account, created } = await this.ensureAccount(accountName, client);
    const key = generateApiKey();
    const { id } = await this.one<{ id: number }>(
      "INSERT INTO api_keys (account_id, prefix, hash, label, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
      [account.id, apiKeyPrefix(key), hashApiKey(key), label ?? null, this.now()],
      client,
    );
    const row = await this.one<KeyRow>(`${KEY_SELECT} WHERE k.id = $1`, [id], client);
    return { key, record: toKeyRecord(row), accountCreated: created };
  }

  /** Under a transaction-level advisory lock, so replicas starting at once create one key. */
  async createKeyIfNone(
    accountName: string,
    label?: string,
  ): Promise<{ key: string; record: ApiKeyRecord } | undefined> {
    return transaction(this.pool, async (client) => {
      await client.query("SELECT pg_advisory_xact_lock($1, $2)", [
        ADVISORY_NAMESPACE,
        FIRST_KEY_LOCK,
      ]);
      const { n } = await this.one<{ n: number }>("SELECT count(*) AS n FROM api_keys", [], client);
      return n > 0 ? undefined : this.insertKey(client, accountName, label);
    });
  }

  async keyById(id: number): Promise<ApiKeyRecord | undefined> {
    const [row] = await this.rows<KeyRow>(`${KEY_SELECT} WHERE k.id = $1`, [id]);
    return row && toKeyRecord(row);
  }

  async listKeys(accountName?: string): Promise<ApiKeyRecord[]> {
    const rows =
      accountName === undefined
        ? await this.rows<KeyRow>(`${KEY_SELECT} ORDER BY k.id`)
        : await this.rows<KeyRow>(`${KEY_SELECT} WHERE k.account_id = $1 ORDER BY k.id`, [
            (await this.requireAccount(accountName)).id,
          ]);
    return rows.map(toKeyRecord);
  }

  async countKeys(): Promise<number> {
    return (await this.one<{ n: number }>("SELECT count(*) AS n FROM api_keys")).n;
  }

  async revokeKey(id: number): Promise<{ record: ApiKeyRecord; alreadyRevoked: boolean }> {
    const updated = await this.rows<{ id: number }>(
      "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING id",
      [this.now(), id],
    );
    const record = await this.keyById(id);
    if (!record) throw storeErrors.noKey(id);
    return { record, alreadyRevoked: updated.length === 0 };
  }

  async findKey(key: string): Promise<{ key: ApiKeyRecord; account: Account } | undefined> {
    const lookup = keyLookup(key);
    if (!lookup) return undefined;
    const rows = await this.rows<KeyRow>(`${KEY_SELECT} WHERE k.prefix = $1`, [lookup.prefix]);
    const row = rowWithHash(rows, lookup.hash);
    if (!row) return undefined;
    return { key: toKeyRecord(row), account: (await this.accountById(row.account_id))! };
  }

  async touchKey(id: number): Promise<void> {
    await this.pool.query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2", [this.now(), id]);
  }

  /** @see PostgresLedger.record: a write the database did not answer is voided if it lands. */
  recordCall(row: UsageRow, reservationId?: number): Promise<void> {
    return this.ledger.record(row, reservationId);
  }

  async calls(accountName: string): Promise<UsageRow[]> {
    const account = await this.requireAccount(accountName);
    const rows = await this.rows<LedgerRow>(
      "SELECT * FROM usage WHERE account_id = $1 ORDER BY id",
      [account.id],
    );
    return rows.map(toUsageRow);
  }

  async tokensUsedSince(
    accountId: number,
    since: number,
    client: Queryable = this.pool,
  ): Promise<number> {
    const { n } = await this.one<{ n: number }>(
      "SELECT coalesce(sum(input_tokens + output_tokens), 0) AS n FROM usage WHERE account_id = $1 AND at >= $2",
      [accountId, since],
      client,
    );
    return n;
  }

  async dailyUsage(accountId: number, since: number): Promise<DailyUsage[]> {
    const rows = await this.rows<LedgerDayRow>(
      `SELECT at - (at % ${DAY_MS}) AS day,
              count(*) AS calls,
              count(*) FILTER (WHERE status >= 400) AS failed,
              coalesce(sum(input_tokens), 0) AS input,
              coalesce(sum(output_tokens), 0) AS output
         FROM usage WHERE account_id = $1 AND at >= $2
        GROUP BY day ORDER BY day`,
      [accountId, utcDayStart(since)],
    );
    return rows.map(toDailyUsage);
  }

  async allowanceState(
    account: Account,
    client: Queryable = this.pool,
  ): Promise<AllowanceState | undefined> {
    if (!account.allowance) return undefined;
    const now = this.now();
    const window = allowanceWindow(account.allowance.period, now);
    const used = await this.tokensUsedSince(account.id, window.start, client);
    const { reserved } = await this.one<{ reserved: number }>(
      "SELECT coalesce(sum(tokens), 0) AS reserved FROM reservations WHERE account_id = $1 AND expires_at > $2",
      [account.id, now],
      client,
    );
    return allowanceStateOf(account.allowance, used, reserved, window.end);
  }

  async usage(accountName?: string): Promise<AccountUsage[]> {
    const accounts =
      accountName === undefined
        ? await this.listAccounts()
        : [await this.requireAccount(accountName)];
    return Promise.all(
      accounts.map(async (account) => {
        const totals = await this.one<LedgerTotalsRow>(
          `SELECT count(*) AS calls,
                  count(*) FILTER (WHERE status >= 400) AS failed,
                  coalesce(sum(input_tokens), 0) AS input,
                  coalesce(sum(output_tokens), 0) AS output,
                  max(at) AS last
             FROM usage WHERE account_id = $1`,
          [account.id],
        );
        return toAccountUsage(account, totals, await this.allowanceState(account));
      }),
    );
  }

  async reserveTokens(account: Account, tokens: number): Promise<Reservation> {
    if (!account.allowance) return { ok: true, id: undefined };
    return transaction(this.pool, async (client): Promise<Reservation> => {
      // The account row's lock orders reservations of one account across replicas.
      const [row] = await this.rows<AccountRow>(
        "SELECT * FROM accounts WHERE id = $1 FOR UPDATE",
        [account.id],
        client,
      );
      const state = row && (await this.allowanceState(toAccount(row), client));
      if (!state) return { ok: true, id: undefined };
      if (exceedsAllowance(state, tokens)) return { ok: false, state };
      const { createdAt, expiresAt } = reservationTimes(this.now());
      const { id } = await this.one<{ id: number }>(
        "INSERT INTO reservations (account_id, tokens, created_at, expires_at) VALUES ($1, $2, $3, $4) RETURNING id",
        [account.id, tokens, createdAt, expiresAt],
        client,
      );
      return { ok: true, id };
    });
  }

  async cancelReservation(id: number): Promise<void> {
    await this.pool.query("DELETE FROM reservations WHERE id = $1", [id]);
  }

  async tryLockAccount(accountId: number): Promise<AccountLock | undefined> {
    return tryAccountLock(this.lockPool, accountId, this.held, this.keepaliveSeconds);
  }
  heldCall = (accountId: number) => heldCallOf(this.pool, accountId);

  private async requireAccount(name: string): Promise<Account> {
    const account = await this.findAccount(name);
    if (!account) throw storeErrors.noAccount(name);
    return account;
  }
}
