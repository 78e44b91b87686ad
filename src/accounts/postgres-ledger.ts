import pg from "pg";
import { LEDGER_COLUMNS, ledgerValues } from "./rows.js";
import type { UsageRow } from "./store.js";

// Why a write whose commit went unanswered is voided: docs/decisions/116-a-ledger-write-unanswered-is-voided.md

/** How often unsettled writes are tried again, ms. */
const SETTLE_EVERY_MS = 1000;
/** How long a write is tried to be settled before it is left as the database has it, ms. */
export const SETTLE_GIVE_UP_MS = 10 * 60_000;

/**
 * The server process behind a connection: its pid with its start time, which together name it
 * (a pid alone may be another process's after a restart), as `pg_stat_activity` reads them.
 */
interface Backend {
  readonly pid: number;
  readonly start: string;
}

/** A ledger write whose commit was sent and never answered: it may still commit. */
interface Unsettled {
  readonly backend: Backend;
  readonly row: UsageRow;
  /** When it was given up on (ms since the epoch, this process's clock). */
  readonly since: number;
}

/**
 * Writes ledger rows to PostgreSQL so that a rejected write never counts. A write whose commit
 * the database did not answer (it stopped answering: stuck, paused, cut off without closing the
 * connection) may still commit once the database goes on, after its caller answered the client
 * 503: such a row is voided later (its status set to 503, as the client was told, or left 499
 * when the client had gone, and its tokens to 0), once the backend that held it is gone and its
 * fate is final.
 */
export class PostgresLedger {
  private readonly unsettled: Unsettled[] = [];
  /** The backend of each connection a row was written on, read once per connection. */
  private readonly backends = new WeakMap<pg.PoolClient, Backend>();
  private timer: NodeJS.Timeout | undefined;
  private settling = false;
  private closed = false;

  /**
   * @param pool - where rows are written and voided
   * @param now - the clock of {@link Unsettled.since}
   * @param warn - where a write left in doubt, voided or given up on is reported
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number = Date.now,
    private readonly warn: (message: string) => void = (message) =>
      process.emitWarning(message, "DecisiondLedgerWarning"),
  ) {}

  /**
   * Appends `row` to the ledger and, in the same transaction, drops the reservation
   * `reservationId` (when given).
   * @throws the driver's error when the database refused or did not answer: the row then does
   *   not count (it is absent, or voided once the database answers again)
   */
  async record(row: UsageRow, reservationId?: number): Promise<void> {
    const insert = `INSERT INTO usage (${LEDGER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`;
    const client = await this.pool.connect();
    // Whether the statement that commits (the INSERT on its own, or COMMIT) has been sent.
    let committing = false;
    let backend: Backend | undefined;
    try {
      backend = this.backends.get(client) ?? (await this.identify(client));
      committing = reservationId === undefined;
      if (reservationId === undefined) await client.query(insert, ledgerValues(row));
      else {
        await client.query("BEGIN");
        await client.query(insert, ledgerValues(row));
        await client.query("DELETE FROM reservations WHERE id = $1", [reservationId]);
        committing = true;
        await client.query("COMMIT");
      }
      client.release();
    } catch (error) {
      // Closing the connection rolls back what has not committed; an error the database sent
      // means the transaction did not commit.
      client.release(error as Error);
      if (committing && backend && !(error instanceof pg.DatabaseError))
        this.settleLater(backend, row);
      throw error;
    }
  }

  /** Writes given up on whose row may yet appear (for tests and metrics). */
  get pending(): number {
    return this.unsettled.length;
  }

  /** Stops trying; writes still unsettled stay as the database has them, each reported. */
  close(): void {
    this.closed = true;
    this.stop();
    for (const write of this.unsettled.splice(0)) this.warn(leftMessage(write, "the store closed"));
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The backend of `client`, read on it (a pooler's cancel key is not the server's pid). */
  private async identify(client: pg.PoolClient): Promise<Backend> {
    const { rows } = await client.query<Backend>(
      "SELECT pid, backend_start::text AS start FROM pg_stat_activity WHERE pid = pg_backend_pid()",
    );
    const backend = rows[0]!;
    this.backends.set(client, backend);
    return backend;
  }

  private settleLater(backend: Backend, row: UsageRow): void {
    const write = { backend, row, since: this.now() };
    if (this.closed) return this.warn(leftMessage(write, "the store closed"));
    this.warn(
      `the ledger row of account ${row.accountId} (a call admitted at ${iso(row.startedAt)}) was ` +
        "sent and not answered: it is voided if it lands, once the database answers",
    );
    this.unsettled.push(write);
    this.timer ??= setInterval(() => void this.settle(), SETTLE_EVERY_MS).unref();
  }

  /** Tries each unsettled write once; keeps those whose fate is not final yet. */
  private async settle(): Promise<void> {
    if (this.settling) return;
    this.settling = true;
    try {
      for (const write of [...this.unsettled]) {
        const settled = await this.settleOne(write).catch(() => false);
        const late = this.now() - write.since > SETTLE_GIVE_UP_MS;
        if (!settled && !late) continue;
        this.unsettled.splice(this.unsettled.indexOf(write), 1);
        if (!settled)
          this.warn(leftMessage(write, `it was not settled in ${SETTLE_GIVE_UP_MS} ms`));
      }
      if (this.unsettled.length === 0) this.stop();
    } finally {
      this.settling = false;
    }
  }

  /**
   * Stops the backend that received `write` when it is still there (a role may stop its own
   * sessions); once it is gone, voids the row if it committed.
   * @returns whether the write is settled
   * @throws the driver's error while the database does not answer
   */
  private async settleOne(write: Unsettled): Promise<boolean> {
    const alive = await this.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE pid = $1 AND backend_start::text = $2 AND usename = current_user`,
      [write.backend.pid, write.backend.start],
    );
    if (alive.rowCount !== 0) return false;
    const { row } = write;
    // One call in flight per account: its account, admission and release times name its row.
    const voided = await this.pool.query(
      // The caller answered 503 store_unavailable, unless its client had left (499).
      `UPDATE usage SET status = CASE status WHEN 499 THEN 499 ELSE 503 END,
              input_tokens = 0, output_tokens = 0
        WHERE account_id = $1 AND at = $2 AND started_at IS NOT DISTINCT FROM $3 AND status = $4`,
      [row.accountId, row.at, row.startedAt ?? null, row.status],
    );
    if (voided.rowCount !== 0)
      this.warn(
        `the ledger row of account ${row.accountId} (a call admitted at ${iso(row.startedAt)}) ` +
          `landed after its call was answered 503: voided (status ${row.status === 499 ? 499 : 503}, 0 tokens)`,
      );
    return true;
  }
}

/** A time for a message: ISO 8601, or "an unknown time". */
function iso(ms: number | undefined): string {
  return ms === undefined ? "an unknown time" : new Date(ms).toISOString();
}

/** The warning for a write left as the database has it. */
function leftMessage(write: Unsettled, why: string): string {
  const { row } = write;
  return (
    `the ledger row of account ${row.accountId} (a call admitted at ${iso(row.startedAt)}, ` +
    `status ${row.status}, ${row.inputTokens + row.outputTokens} tokens) is left as the database ` +
    `has it (${why}): if it landed, it charges a call that was answered 503`
  );
}
