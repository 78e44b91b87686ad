import type { Account, AccountStore } from "./store.js";

/**
 * Admission of a call: the key → its account, the account's allowance, and one call in flight
 * per account. It knows nothing of HTTP; the API layer turns an {@link AdmissionError} into a
 * status and headers.
 *
 * Concurrency is counted in this process (a map from account to its one slot). Between the check
 * and the claim of a slot nothing yields (better-sqlite3 is synchronous), so the rule holds under
 * any number of parallel requests. Several server processes sharing one store would each allow one
 * call per account.
 */

/** Why a call was refused. */
export type AdmissionRefusal =
  | { readonly kind: "authentication"; readonly message: string }
  | { readonly kind: "concurrency"; readonly message: string; readonly retryAfterMs: number }
  | {
      readonly kind: "allowance";
      readonly message: string;
      readonly retryAfterMs: number | undefined;
    };

/** A refused call. */
export class AdmissionError extends Error {
  override readonly name = "AdmissionError";
  constructor(readonly refusal: AdmissionRefusal) {
    super(refusal.message);
  }
}

/** Token counts of a finished call. */
export interface CallUsage {
  readonly input_tokens: number;
  readonly output_tokens: number;
}

/** An admitted call. */
export interface Permit {
  readonly account: Account;
  readonly keyId: number;
  /**
   * The call no longer needs the account's slot: the model is done (`usage`) or the call failed
   * or never reached it (`undefined`). Frees the slot at once. Later calls are ignored.
   */
  settle(usage: CallUsage | undefined): void;
  /**
   * How the call was answered: the HTTP status (499 when the client went away first) and the
   * model that answered. The ledger row is written once the call is both settled and finished.
   * Later calls are ignored. @throws when the store cannot be written.
   */
  finish(outcome: { status: number; model: string | undefined }): void;
  /**
   * The client went away: frees the account's slot now, though the model may still be finishing
   * the call (it is charged once settled). Without this, a client that gives up and retries would
   * be refused until the abandoned computation ends; the engine runs one computation at a time,
   * so the retry waits behind it rather than adding to it.
   */
  release(): void;
}

/** Options of {@link Admission}. */
export interface AdmissionOptions {
  /**
   * How long a call may wait for its account's slot before it is refused, in ms. Default 0:
   * refused at once while another call of the account is in flight.
   */
  readonly waitMs?: number;
  /** The clock. Default `Date.now`. */
  readonly now?: () => number;
}

interface Waiter {
  grant(): void;
  timer: NodeJS.Timeout;
}

interface Slot {
  /** When the current holder got the slot. */
  since: number;
  readonly waiters: Waiter[];
}

/** The shortest and longest retry delays suggested to a refused caller, in ms. */
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 60_000;

/** Admits calls against an {@link AccountStore}. One per server process. */
export class Admission {
  private readonly slots = new Map<number, Slot>();
  private readonly waitMs: number;
  private readonly now: () => number;
  /** A running average of call durations, for Retry-After. */
  private typicalMs = 1000;

  constructor(
    private readonly store: AccountStore,
    options: AdmissionOptions = {},
  ) {
    this.waitMs = Math.max(0, options.waitMs ?? 0);
    this.now = options.now ?? Date.now;
  }

  /** Whether an account has a call in flight. */
  busy(accountId: number): boolean {
    return this.slots.has(accountId);
  }

  /**
   * Admits a call presenting `key`.
   * @throws {AdmissionError} for a missing, unknown or revoked key, a spent allowance, or an
   *   account with a call in flight (after waiting up to `waitMs` for it).
   */
  async admit(key: string | undefined): Promise<Permit> {
    if (key === undefined || key === "")
      throw refuse({
        kind: "authentication",
        message: "missing API key: send it as Authorization: Bearer <key>",
      });
    const found = this.store.findKey(key);
    if (!found) throw refuse({ kind: "authentication", message: "invalid API key" });
    if (found.key.revokedAt !== undefined)
      throw refuse({
        kind: "authentication",
        message: `API key ${found.key.prefix}… was revoked on ${new Date(found.key.revokedAt).toISOString()}`,
      });
    const account = found.account;
    this.checkAllowance(account);

    const slot = this.slots.get(account.id);
    if (!slot) {
      this.slots.set(account.id, { since: this.now(), waiters: [] });
    } else {
      await this.waitFor(slot, account);
      // The slot was handed over; the call before may have spent the allowance.
      try {
        this.checkAllowance(this.store.accountById(account.id) ?? account);
      } catch (error) {
        this.release(account.id);
        throw error;
      }
    }
    try {
      this.store.touchKey(found.key.id);
    } catch (error) {
      this.release(account.id);
      throw error;
    }
    return this.permit(account, found.key.id);
  }

  private permit(account: Account, keyId: number): Permit {
    const started = this.now();
    let settled = false;
    let usage: CallUsage | undefined;
    let outcome: { status: number; model: string | undefined } | undefined;
    let recorded = false;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.release(account.id);
    };
    const record = () => {
      if (!settled || !outcome || recorded) return;
      recorded = true;
      this.store.recordCall({
        accountId: account.id,
        keyId,
        at: this.now(),
        inputTokens: usage?.input_tokens ?? 0,
        outputTokens: usage?.output_tokens ?? 0,
        model: outcome.model,
        status: outcome.status,
      });
    };
    return {
      account,
      keyId,
      settle: (u) => {
        if (settled) return;
        settled = true;
        usage = u;
        if (u) this.typicalMs = 0.8 * this.typicalMs + 0.2 * (this.now() - started);
        release();
        record();
      },
      finish: (o) => {
        if (outcome) return;
        outcome = o;
        record();
      },
      release,
    };
  }

  /** Refuses when the account's allowance for the current period is spent. */
  private checkAllowance(account: Account): void {
    const state = this.store.allowanceState(account);
    if (!state || state.remaining > 0) return;
    const period = { day: "today (UTC)", month: "this month (UTC)", total: "in total" }[
      state.period
    ];
    throw refuse({
      kind: "allowance",
      message:
        `account "${account.name}" has used its allowance: ${state.used} of ${state.tokens} tokens ${period}` +
        (state.renewsAt !== undefined
          ? `; it renews at ${new Date(state.renewsAt).toISOString()}`
          : ""),
      retryAfterMs:
        state.renewsAt !== undefined ? Math.max(1000, state.renewsAt - this.now()) : undefined,
    });
  }

  /** Waits for the slot to be handed over, up to `waitMs`. @throws {AdmissionError} on time-out. */
  private waitFor(slot: Slot, account: Account): Promise<void> {
    if (this.waitMs === 0) return Promise.reject(this.busyError(slot, account));
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        grant: resolve,
        timer: setTimeout(() => {
          const i = slot.waiters.indexOf(waiter);
          if (i >= 0) slot.waiters.splice(i, 1);
          reject(this.busyError(slot, account));
        }, this.waitMs),
      };
      slot.waiters.push(waiter);
    });
  }

  private busyError(slot: Slot, account: Account): AdmissionError {
    const expected = this.typicalMs * (1 + slot.waiters.length) - (this.now() - slot.since);
    const retryAfterMs = Math.round(Math.min(RETRY_MAX_MS, Math.max(RETRY_MIN_MS, expected)));
    return refuse({
      kind: "concurrency",
      message:
        `account "${account.name}" already has a request in flight; decisiond answers one request at a time ` +
        `per account: retry when it is done (in about ${Math.max(1, Math.ceil(retryAfterMs / 1000))} s)`,
      retryAfterMs,
    });
  }

  /** Frees an account's slot, handing it to the longest-waiting call if any. */
  private release(accountId: number): void {
    const slot = this.slots.get(accountId);
    if (!slot) return;
    const next = slot.waiters.shift();
    if (!next) {
      this.slots.delete(accountId);
      return;
    }
    clearTimeout(next.timer);
    slot.since = this.now();
    next.grant();
  }
}

function refuse(refusal: AdmissionRefusal): AdmissionError {
  return new AdmissionError(refusal);
}
