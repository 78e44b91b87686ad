import pg from "pg";
import { LEDGER_COLUMNS, ledgerValues } from "./rows.js";
import type { UsageRow } from "./store.js";

// Why a write whose commit went unanswered is voided: docs/decisions/116-a-ledger-write-unanswered-is-voided.md

/** How often unsettled writes are tried again, ms. */
const SETTLE_EVERY_MS = 1000;

/** A ledger write whose commit was sent and never answered: it may still commit. */
interface Unsettled {
  /** The PostgreSQL backend that received it (`pg_backend_pid()`), when the driver knew it. */
  readonly pid: number | undefined;
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
  private timer: NodeJS.Timeout | undefined;
  private settling = false;

  /**
   * @param pool - where rows are written and voided
   * @param now - the clock of {@link Unsettled.since}
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number = Date.now,
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
    let committing = reservationId === undefined;
    try {
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
      if (committing && !(error instanceof pg.DatabaseError)) this.settleLater(client, row);
      throw error;
    }
  }

  /** Writes given up on whose row may yet appear (for tests and metrics). */
  get pending(): number {
    return this.unsettled.length;
  }

  /** Stops trying; writes still unsettled stay as the database has them. */
  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private settleLater(client: pg.PoolClient, row: UsageRow): void {
    // node-postgres keeps the backend's pid from BackendKeyData; its typings do not list it.
    const pid = (client as unknown as { processID?: number | null }).processID ?? undefined;
    this.unsettled.push({ pid, row, since: this.now() });
    this.timer ??= setInterval(() => void this.settle(), SETTLE_EVERY_MS).unref();
  }

  /** Tries each unsettled write once; keeps those whose fate is not final yet. */
  private async settle(): Promise<void> {
    if (this.settling) return;
    this.settling = true;
    try {
      for (const write of [...this.unsettled]) {
        if (!(await this.settleOne(write).catch(() => false))) continue;
        this.unsettled.splice(this.unsettled.indexOf(write), 1);
      }
      if (this.unsettled.length === 0) this.close();
    } finally {
      this.settling = false;
    }
  }

  /**
   * Stops the backend that received `write` when it is still there (a backend may be stopped by
   * its own role); once it is gone, voids the row if it committed.
   * @returns whether the write is settled
   * @throws the driver's error while the database does not answer
   */
  private async settleOne(write: Unsettled): Promise<boolean> {
    if (write.pid !== undefined) {
      const alive = await this.pool.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1",
        [write.pid],
      );
      if (alive.rowCount !== 0) return false;
    } else if (this.now() - write.since < 60_000) return false; // unknown backend: wait it out
    const { row } = write;
    // One call in flight per account: its account and admission time name its row.
    await this.pool.query(
      // The caller answered 503 store_unavailable, unless its client had left (499).
      `UPDATE usage SET status = CASE status WHEN 499 THEN 499 ELSE 503 END,
              input_tokens = 0, output_tokens = 0
        WHERE account_id = $1 AND at = $2 AND started_at IS NOT DISTINCT FROM $3 AND status = $4`,
      [row.accountId, row.at, row.startedAt ?? null, row.status],
    );
    return true;
  }
}
