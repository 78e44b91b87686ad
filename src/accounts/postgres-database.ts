import pg from "pg";
import { storeErrors } from "./rows.js";
import { StoreError, type AccountLock, type HeldCall } from "./store.js";

/**
 * The PostgreSQL store's database side: its connection pools, transactions, schema and
 * migrations, and the advisory locks decisiond takes. `PostgresStore` (postgres-store.ts) holds
 * the queries. Why PostgreSQL and advisory locks: docs/decisions/040-replicas-on-postgresql.md
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
/** The second key of the lock under which the first API key is created. */
export const FIRST_KEY_LOCK = -2;

/** Where a query runs: on any pooled connection, or on one (inside a transaction). */
export type Queryable = pg.Pool | pg.PoolClient;

/** BIGINT (int8) and numeric sums as numbers: every count and time here is below 2^53. */
const TYPES: pg.CustomTypesConfig = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === 20 || oid === 1700) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format) as (value: string) => unknown;
  },
};

/**
 * Longest wait of a serving process for the database, ms: for a connection (opening one, or one
 * of the pool's to come free) and for a query's answer. A database that stops answering (stuck, or
 * cut off without the connection closing) then fails the call with an error, which the store turns
 * into 503 `store_unavailable`, instead of holding it for the whole outage. The queries of a call
 * answer in milliseconds.
 */
export const STORE_WAIT_MS = 5000;

/**
 * A pool of up to `max` connections to `url`, with TCP keepalive, reading BIGINT and numeric
 * columns as numbers. With `waitMs` (a serving process: {@link STORE_WAIT_MS}), a connection (one
 * opened, or one of the pool's to come free) or a query's answer is waited for that long at most;
 * without, as long as it takes (the CLI's commands, migrations). An idle connection that fails
 * (the database restarts) is dropped from the pool instead of crashing the process. Connects
 * lazily: opening never throws.
 */
export function openPool(url: string, max: number, waitMs?: number): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    types: TYPES,
    keepAlive: true,
    max,
    ...(waitMs !== undefined ? { connectionTimeoutMillis: waitMs, query_timeout: waitMs } : {}),
  });
  pool.on("error", () => {});
  return pool;
}

/**
 * Runs `fn` in a transaction on one connection of `pool`: committed when it resolves, rolled back
 * when it rejects (with its error).
 * @throws `fn`'s error, or the driver's when the database cannot be reached.
 */
export async function transaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await fn(client);
    await client.query("COMMIT");
    client.release();
    return result;
  } catch (error) {
    // A refusal of the store's own is rolled back on the connection; after a driver error (a
    // query that timed out may still be answered later) the connection is closed, which rolls
    // the transaction back on the server.
    if (!(error instanceof StoreError)) client.release(error as Error);
    else
      await client.query("ROLLBACK").then(
        () => client.release(),
        (rollbackError: Error) => client.release(rollbackError),
      );
    throw error;
  }
}

/**
 * Brings the database up to {@link PG_MIGRATIONS}' version (table `decisiond_schema`), in one
 * transaction under an advisory lock, so replicas starting at once migrate it once.
 * @throws {@link StoreError} when the database was migrated by a newer decisiond; the driver's
 *   error when it cannot be reached.
 */
export async function migrate(pool: pg.Pool): Promise<void> {
  await transaction(pool, async (client) => {
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
      throw storeErrors.newerSchema(
        "the database has decisiond schema version",
        version,
        PG_MIGRATIONS.length,
      );
    for (; version < PG_MIGRATIONS.length; version++) await client.query(PG_MIGRATIONS[version]!);
    await client.query("UPDATE decisiond_schema SET version = $1", [version]);
  });
}

/** How a lock's session names itself once its call is announced: `decisiond call SINCE-UNTIL`. */
const ANNOUNCED = "decisiond call";
const ANNOUNCED_NAME = new RegExp(`^${ANNOUNCED} (\\d+)-(\\d+)$`);

/** The database's clock, ms since the epoch, in SQL. */
const DB_NOW_MS = "floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";

/**
 * What the session holding an account's lock in this database announced of its call
 * (`AccountLock.announce`: its `application_name`, `decisiond call SINCE-UNTIL` on the database's
 * clock, which every session may read in `pg_stat_activity`), as times on the database's clock:
 * replicas' own clocks are never compared. `undefined` when the lock is free or nothing was
 * announced.
 * @throws the driver's error when the query fails
 */
export async function heldCallOf(pool: pg.Pool, accountId: number): Promise<HeldCall | undefined> {
  // A two-key advisory lock shows its keys as classid and objid, with objsubid 2; pg_locks holds
  // every database's locks.
  const { rows } = await pool.query<{ name: string; now: string }>(
    `SELECT a.application_name AS name, ${DB_NOW_MS} AS now
     FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND l.classid::int8 = $1 AND l.objid::int8 = $2
     LIMIT 1`,
    [ADVISORY_NAMESPACE, accountId],
  );
  const row = rows[0];
  const match = ANNOUNCED_NAME.exec(row?.name ?? "");
  if (!row || !match) return undefined;
  const since = Number(match[1]);
  return { elapsedMs: Number(row.now) - since, expectedMs: Number(match[2]) - since };
}

/**
 * Takes an account's admission lock without waiting: a session-level advisory lock on a
 * connection of `pool` kept for the lock alone, so the database frees it when the connection
 * drops (the replica died or was cut off) as well as on release.
 * @param held - the connections holding a lock: the lock's is added, and removed on release
 * @param keepaliveSeconds - silence after which the database probes the connection (then 2
 *   probes 2 s apart), so a replica cut off without a FIN frees its locks
 * @returns the lock, or `undefined` when another session holds it
 * @throws the driver's error when no connection can be had or the query fails
 */
export async function tryAccountLock(
  pool: pg.Pool,
  accountId: number,
  held: Set<pg.PoolClient>,
  keepaliveSeconds: number,
): Promise<AccountLock | undefined> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (error: Error) => (broken = error);
  client.on("error", onError);
  try {
    const k = keepaliveSeconds;
    // A pooled connection may still bear the name an earlier lock's call announced: reset it.
    await client.query(
      `SET tcp_keepalives_idle = ${k}; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 2; RESET application_name`,
    );
    const { rows } = await client.query<{ locked: boolean }>(
      "SELECT pg_try_advisory_lock($1, $2) AS locked",
      [ADVISORY_NAMESPACE, accountId],
    );
    if (!rows[0]?.locked) {
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
  held.add(client);
  return {
    announce: (elapsedMs, expectedMs) => {
      if (released || broken) return;
      // Its start and expected end on the database's clock.
      client
        .query(
          `SELECT set_config('application_name', format('${ANNOUNCED} %s-%s', t - $1, t - $1 + $2), false)
           FROM (SELECT ${DB_NOW_MS} AS t) now`,
          [Math.round(elapsedMs), Math.round(expectedMs)],
        )
        .catch(() => undefined);
    },
    release: async () => {
      if (released || !held.delete(client)) return;
      released = true;
      try {
        if (broken) throw broken;
        await client.query("RESET application_name");
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
