import pg from "pg";
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
 * The PostgreSQL backend of {@link AccountStore}, for several decisiond replicas on one database
 * (node-postgres). Keys, ledger and allowances live in the database, so a key revoked on one
 * replica is refused by all on their next request. An account's admission lock is a
 * session-level advisory lock held on a connection of its own for the length of the call: the
 * database frees it when the call ends, and by itself when the replica dies or its connection
 * drops. Why: docs/decisions/040-replicas-on-postgresql.md
 */

/**
 * Schema migrations; entry i takes the database from version i to i + 1 (table
 * `decisiond_schema`). Append only: never edit a migration that has shipped.
 */
export const PG_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE accounts (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE,
    created_at       BIGINT NOT NULL,
    allowance_tokens BIGINT CHECK (allowance_tokens IS NULL OR allowance_tokens >= 0),
    allowance_period TEXT CHECK (allowance_period IN ('day', 'month', 'total')),
    CHECK ((allowance_tokens IS NULL) = (allowance_period IS NULL))
  );
  CREATE TABLE api_keys (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id   BIGINT NOT NULL REFERENCES accounts(id),
    prefix       TEXT NOT NULL,
    hash         BYTEA NOT NULL UNIQUE,
    label        TEXT,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
  );
  CREATE INDEX api_keys_prefix ON api_keys(prefix);
  CREATE TABLE usage (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id    BIGINT NOT NULL REFERENCES accounts(id),
    key_id        BIGINT REFERENCES api_keys(id),
    at            BIGINT NOT NULL,
    started_at    BIGINT,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    model         TEXT,
    status        INTEGER NOT NULL
  );
  CREATE INDEX usage_account_at ON usage(account_id, at);
  CREATE TABLE reservations (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    tokens     BIGINT NOT NULL CHECK (tokens >= 0),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  );
  CREATE INDEX reservations_account ON reservations(account_id, expires_at);
  `,
];

/**
 * The first key of the two-key advisory locks decisiond takes (`'dsd1'` as an int4), so they do
 * not collide with other applications' locks on the same database.
 */
export const ADVISORY_NAMESPACE = 0x64736431;
/** Second keys of the namespace below 0 are decisiond's own; ≥ 0 are account ids. */
const MIGRATION_LOCK = -1;
const FIRST_KEY_LOCK = -2;

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

/** BIGINT (int8) and numeric sums as numbers: every count and time here is < 2^53. */
const TYPES = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === 20 || oid === 1700) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format) as (value: string) => unknown;
  },
} as unknown as pg.CustomTypesConfig;

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

const KEY_SELECT = `SELECT k.*, a.name AS account_name FROM api_keys k JOIN accounts a ON a.id = k.account_id`;

/**
 * The store on a PostgreSQL database.
 * @example const store = await PostgresStore.open("postgres://decisiond@db:5432/decisiond");
 */
export class PostgresStore implements AccountStore {
  readonly kind = "postgres";
  private readonly now: () => number;
  /** Connections holding an account lock, closed by {@link close}. */
  private readonly held = new Set<pg.PoolClient>();

  private constructor(
    private readonly pool: pg.Pool,
    private readonly lockPool: pg.Pool,
    private readonly keepaliveSeconds: number,
    options: StoreOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Connects to `url` and migrates the database to the current schema (under an advisory lock,
   * so replicas starting at once migrate it once).
   * @throws {StoreError} when the database was migrated by a newer decisiond.
   * @throws the driver's error when the database cannot be reached.
   */
  static async open(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    const common = { connectionString: url, types: TYPES, keepAlive: true };
    const pool = new pg.Pool({ ...common, max: options.poolSize ?? 10 });
    const lockPool = new pg.Pool({ ...common, max: options.lockPoolSize ?? 64 });
    // An idle pooled connection that fails (database restart) must not crash the process.
    pool.on("error", () => {});
    lockPool.on("error", () => {});
    const store = new PostgresStore(pool, lockPool, options.keepaliveSeconds ?? 5, options);
    try {
      await store.migrate();
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  private async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query("SELECT pg_advisory_xact_lock($1, $2)", [
        ADVISORY_NAMESPACE,
        MIGRATION_LOCK,
      ]);
      await client.query("CREATE TABLE IF NOT EXISTS decisiond_schema (version INTEGER NOT NULL)");
      const { rows } = await client.query<{ version: number }>(
        "SELECT version FROM decisiond_schema",
      );
      let version = rows[0]?.version ?? 0;
      if (rows.length === 0) await client.query("INSERT INTO decisiond_schema VALUES (0)");
      if (version > PG_MIGRATIONS.length)
        throw new StoreError(
          `the database has decisiond schema version ${version}, newer than this decisiond knows (${PG_MIGRATIONS.length}); upgrade decisiond`,
        );
      for (; version < PG_MIGRATIONS.length; version++) await client.query(PG_MIGRATIONS[version]!);
      await client.query("UPDATE decisiond_schema SET version = $1", [version]);
    });
  }

  private async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      const result = await fn(client);
      await client.query("COMMIT");
      client.release();
      return result;
    } catch (error) {
      await client.query("ROLLBACK").then(
        () => client.release(),
        (rollbackError: Error) => client.release(rollbackError),
      );
      throw error;
    }
  }

  private async rows<T extends pg.QueryResultRow>(
    sql: string,
    values: unknown[] = [],
    client: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<T[]> {
    return (await client.query<T>(sql, values)).rows;
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
    await Promise.all([this.pool.end(), this.lockPool.end()]);
  }

  async createAccount(name: string): Promise<Account> {
    checkAccountName(name);
    const [row] = await this.rows<AccountRow>(
      "INSERT INTO accounts (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING *",
      [name, this.now()],
    );
    if (!row) throw new StoreError(`account "${name}" already exists`);
    return toAccount(row);
  }

  async ensureAccount(
    name: string,
    client: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<{ account: Account; created: boolean }> {
    checkAccountName(name);
    const [inserted] = await this.rows<AccountRow>(
      "INSERT INTO accounts (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING *",
      [name, this.now()],
      client,
    );
    if (inserted) return { account: toAccount(inserted), created: true };
    const [row] = await this.rows<AccountRow>(
      "SELECT * FROM accounts WHERE name = $1",
      [name],
      client,
    );
    return { account: toAccount(row!), created: false };
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
    if (!row) throw new StoreError(`no account "${name}"`);
    return toAccount(row);
  }

  async createKey(
    accountName: string,
    label?: string,
  ): Promise<{ key: string; record: ApiKeyRecord; accountCreated: boolean }> {
    return this.transaction((client) => this.insertKey(client, accountName, label));
  }

  private async insertKey(
    client: pg.PoolClient,
    accountName: string,
    label: string | undefined,
  ): Promise<{ key: string; record: ApiKeyRecord; accountCreated: boolean }> {
    const { account, created } = await this.ensureAccount(accountName, client);
    const key = generateApiKey();
    const [{ id }] = (await this.rows<{ id: number }>(
      "INSERT INTO api_keys (account_id, prefix, hash, label, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
      [account.id, apiKeyPrefix(key), hashApiKey(key), label ?? null, this.now()],
      client,
    )) as [{ id: number }];
    const [row] = await this.rows<KeyRow>(`${KEY_SELECT} WHERE k.id = $1`, [id], client);
    return { key, record: toKeyRecord(row!), accountCreated: created };
  }

  async createKeyIfNone(
    accountName: string,
    label?: string,
  ): Promise<{ key: string; record: ApiKeyRecord } | undefined> {
    return this.transaction(async (client) => {
      await client.query("SELECT pg_advisory_xact_lock($1, $2)", [
        ADVISORY_NAMESPACE,
        FIRST_KEY_LOCK,
      ]);
      const [{ n }] = (await this.rows<{ n: number }>(
        "SELECT count(*) AS n FROM api_keys",
        [],
        client,
      )) as [{ n: number }];
      return n > 0 ? undefined : this.insertKey(client, accountName, label);
    });
  }

  async keyById(id: number): Promise<ApiKeyRecord | undefined> {
    const [row] = await this.rows<KeyRow>(`${KEY_SELECT} WHERE k.id = $1`, [id]);
    return row && toKeyRecord(row);
  }

  async listKeys(accountName?: string): Promise<ApiKeyRecord[]> {
    if (accountName === undefined)
      return (await this.rows<KeyRow>(`${KEY_SELECT} ORDER BY k.id`)).map(toKeyRecord);
    const account = await this.requireAccount(accountName);
    return (
      await this.rows<KeyRow>(`${KEY_SELECT} WHERE k.account_id = $1 ORDER BY k.id`, [account.id])
    ).map(toKeyRecord);
  }

  async countKeys(): Promise<number> {
    const [row] = await this.rows<{ n: number }>("SELECT count(*) AS n FROM api_keys");
    return row!.n;
  }

  async revokeKey(id: number): Promise<{ record: ApiKeyRecord; alreadyRevoked: boolean }> {
    const updated = await this.rows<{ id: number }>(
      "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING id",
      [this.now(), id],
    );
    const record = await this.keyById(id);
    if (!record) throw new StoreError(`no key with id ${id} (see decisiond keys list)`);
    return { record, alreadyRevoked: updated.length === 0 };
  }

  async findKey(key: string): Promise<{ key: ApiKeyRecord; account: Account } | undefined> {
    if (!isWellFormedApiKey(key)) return undefined;
    const hash = hashApiKey(key);
    const rows = await this.rows<KeyRow>(`${KEY_SELECT} WHERE k.prefix = $1`, [apiKeyPrefix(key)]);
    const row = rows.find((r) => hashesEqual(r.hash, hash));
    if (!row) return undefined;
    return { key: toKeyRecord(row), account: (await this.accountById(row.account_id))! };
  }

  async touchKey(id: number): Promise<void> {
    await this.pool.query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2", [this.now(), id]);
  }

  async recordCall(row: UsageRow, reservationId?: number): Promise<void> {
    const insert = [
      "INSERT INTO usage (account_id, key_id, at, started_at, input_tokens, output_tokens, model, status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
      [
        row.accountId,
        row.keyId ?? null,
        row.at,
        row.startedAt ?? null,
        row.inputTokens,
        row.outputTokens,
        row.model ?? null,
        row.status,
      ],
    ] as const;
    if (reservationId === undefined) {
      await this.pool.query(insert[0], [...insert[1]]);
      return;
    }
    await this.transaction(async (client) => {
      await client.query(insert[0], [...insert[1]]);
      await client.query("DELETE FROM reservations WHERE id = $1", [reservationId]);
    });
  }

  async calls(accountName: string): Promise<UsageRow[]> {
    const account = await this.requireAccount(accountName);
    const rows = await this.rows<{
      account_id: number;
      key_id: number | null;
      at: number;
      started_at: number | null;
      input_tokens: number;
      output_tokens: number;
      model: string | null;
      status: number;
    }>("SELECT * FROM usage WHERE account_id = $1 ORDER BY id", [account.id]);
    return rows.map((r) => ({
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

  async tokensUsedSince(
    accountId: number,
    since: number,
    client: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<number> {
    const [row] = await this.rows<{ n: number }>(
      "SELECT coalesce(sum(input_tokens + output_tokens), 0) AS n FROM usage WHERE account_id = $1 AND at >= $2",
      [accountId, since],
      client,
    );
    return row!.n;
  }

  async dailyUsage(accountId: number, since: number): Promise<DailyUsage[]> {
    const start = since - (((since % DAY_MS) + DAY_MS) % DAY_MS);
    const rows = await this.rows<{
      day: number;
      calls: number;
      failed: number;
      input: number;
      output: number;
    }>(
      `SELECT at - (at % ${DAY_MS}) AS day,
              count(*) AS calls,
              count(*) FILTER (WHERE status >= 400) AS failed,
              coalesce(sum(input_tokens), 0) AS input,
              coalesce(sum(output_tokens), 0) AS output
         FROM usage WHERE account_id = $1 AND at >= $2
        GROUP BY day ORDER BY day`,
      [accountId, start],
    );
    return rows.map((r) => ({
      day: r.day,
      calls: r.calls,
      failedCalls: r.failed,
      inputTokens: r.input,
      outputTokens: r.output,
    }));
  }

  async allowanceState(
    account: Account,
    client: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<AllowanceState | undefined> {
    if (!account.allowance) return undefined;
    const now = this.now();
    const window = allowanceWindow(account.allowance.period, now);
    const used = await this.tokensUsedSince(account.id, window.start, client);
    const [{ reserved }] = (await this.rows<{ reserved: number }>(
      "SELECT coalesce(sum(tokens), 0) AS reserved FROM reservations WHERE account_id = $1 AND expires_at > $2",
      [account.id, now],
      client,
    )) as [{ reserved: number }];
    return allowanceStateOf(account.allowance, used, reserved, window.end);
  }

  async usage(accountName?: string): Promise<AccountUsage[]> {
    const accounts =
      accountName === undefined
        ? await this.listAccounts()
        : [await this.requireAccount(accountName)];
    return Promise.all(
      accounts.map(async (account) => {
        const [t] = (await this.rows<{
          calls: number;
          failed: number;
          input: number;
          output: number;
          last: number | null;
        }>(
          `SELECT count(*) AS calls,
                  count(*) FILTER (WHERE status >= 400) AS failed,
                  coalesce(sum(input_tokens), 0) AS input,
                  coalesce(sum(output_tokens), 0) AS output,
                  max(at) AS last
             FROM usage WHERE account_id = $1`,
          [account.id],
        )) as [
          { calls: number; failed: number; input: number; output: number; last: number | null },
        ];
        return {
          account: account.name,
          calls: t.calls,
          failedCalls: t.failed,
          inputTokens: t.input,
          outputTokens: t.output,
          lastCallAt: t.last ?? undefined,
          allowance: await this.allowanceState(account),
        };
      }),
    );
  }

  async reserveTokens(account: Account, tokens: number): Promise<Reservation> {
    if (!account.allowance) return { ok: true, id: undefined };
    return this.transaction(async (client): Promise<Reservation> => {
      // The account row's lock orders reservations of one account across replicas.
      const [row] = await this.rows<AccountRow>(
        "SELECT * FROM accounts WHERE id = $1 FOR UPDATE",
        [account.id],
        client,
      );
      const state = row && (await this.allowanceState(toAccount(row), client));
      if (!state) return { ok: true, id: undefined };
      if (state.used + state.reserved + tokens > state.tokens) return { ok: false, state };
      const now = this.now();
      const [{ id }] = (await this.rows<{ id: number }>(
        "INSERT INTO reservations (account_id, tokens, created_at, expires_at) VALUES ($1, $2, $3, $4) RETURNING id",
        [account.id, tokens, now, now + RESERVATION_TTL_MS],
        client,
      )) as [{ id: number }];
      return { ok: true, id };
    });
  }

  async cancelReservation(id: number): Promise<void> {
    await this.pool.query("DELETE FROM reservations WHERE id = $1", [id]);
  }

  async tryLockAccount(accountId: number): Promise<AccountLock | undefined> {
    const client = await this.lockPool.connect();
    let broken: Error | undefined;
    const onError = (error: Error) => (broken = error);
    client.on("error", onError);
    try {
      // Probe a silent peer so a replica cut off without a FIN frees its locks in seconds.
      const k = this.keepaliveSeconds;
      await client.query(
        `SET tcp_keepalives_idle = ${k}; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 2`,
      );
      const [row] = await this.rows<{ locked: boolean }>(
        "SELECT pg_try_advisory_lock($1, $2) AS locked",
        [ADVISORY_NAMESPACE, accountId],
        client,
      );
      if (!row?.locked) {
        client.off("error", onError);
        client.release();
        return undefined;
      }
    } catch (error) {
      client.off("error", onError);
      client.release(error as Error);
      throw error;
    }
    let released = false;
    this.held.add(client);
    return {
      release: async () => {
        if (released || !this.held.delete(client)) return;
        released = true;
        try {
          if (broken) throw broken;
          await client.query("SELECT pg_advisory_unlock($1, $2)", [ADVISORY_NAMESPACE, accountId]);
          client.off("error", onError);
          client.release();
        } catch (error) {
          // Closing the connection frees every lock it held.
          client.off("error", onError);
          client.release(error as Error);
        }
      },
    };
  }

  private async requireAccount(name: string): Promise<Account> {
    const account = await this.findAccount(name);
    if (!account) throw new StoreError(`no account "${name}"`);
    return account;
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
