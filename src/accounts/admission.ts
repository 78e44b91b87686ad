import { CodedError, type Errors, type MessageArgs } from "../protocol/errors.js";
import { CallDurations } from "./call-durations.js";
import { retryAfterOf, RetryTurns, timeLeft } from "./retry-turns.js";
import {
  outagesAsErrors,
  type Account,
  type AccountLock,
  type AccountStore,
  type ApiKeyRecord,
} from "./store.js";

/**
 * Admission of a call: the key → its account, the account's allowance, and one call in flight
 * per account. It knows nothing of HTTP: a refusal is an {@link AdmissionError} that names its
 * entry of the error table (src/protocol/errors.ts), whose words it is told in; the API's one
 * mapping answers it.
 *
 * One call in flight per account, in two steps: a slot in this process (a map from account to its
 * one slot, claimed without yielding between check and claim, with a queue of waiters), then the
 * store's lock on the account, which spans replicas on PostgreSQL (an advisory lock that dies with
 * its connection). The allowance is reserved before the model runs ({@link Permit.reserve}) and
 * settled in the ledger after, so no call runs past it. A store that does not answer rejects
 * every step with a `StoreUnavailableError` (store.ts), never with the driver's own error.
 * Why: docs/decisions/040-replicas-on-postgresql.md
 */

/** The codes of the error table a call is refused with: its key, its account's slot, its allowance. */
export type AdmissionCode =
  | "missingKey"
  | "unknownKey"
  | "revokedKey"
  | "concurrencyLimit"
  | "allowanceExhausted"
  | "allowanceOverrun";

/** A refused call: its code, the message's arguments and, for a slot or an allowance, when to retry. */
export class AdmissionError extends CodedError<AdmissionCode> {}

/** Token counts of a call. */
export interface CallUsage {
  readonly input_tokens: number;
  readonly output_tokens: number;
}

/** An admitted call. */
export interface Permit {
  readonly account: Account;
  readonly keyId: number;
  /**
   * Reserves the call's tokens (known once the request is tokenized, before the model runs)
   * against the account's allowance, atomically across replicas.
   * @param work - tokens the engine expects to evaluate for the call (fewer than its usage when
   *   its state is cached), when the engine says: what its expected duration is counted in
   * @throws {@link AdmissionError} `allowance` when they would take the account past its allowance:
   *   the call must not run.
   */
  reserve(usage: CallUsage, work?: number): Promise<void>;
  /**
   * The call no longer needs the account's slot: the model is done (`usage`) or the call failed
   * or never reached it (`undefined`). Frees the slot at once. Later calls are ignored.
   */
  settle(usage: CallUsage | undefined): void;
  /**
   * How the call was answered: the HTTP status (499 when the client went away first) and the
   * model that answered. The ledger row (which settles the reservation) is written once the call
   * is both settled and finished; the promise resolves when it is written, or at once when it
   * waits for the settle. Later calls are ignored.
   * @throws `StoreUnavailableError` (store.ts) when the row cannot be written: the call must not
   *   be answered as if it were recorded.
   */
  finish(outcome: { status: number; model: string | undefined }): Promise<void>;
  /**
   * The client went away: frees the account's slot now, though the model may still be finishing
   * the call (it is charged once settled; its reservation keeps the allowance safe meanwhile).
   * Without this, a client that gives up and retries would be refused until the abandoned
   * computation ends.
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
  /** How often a waiting call asks the store again for a lock held by another replica, ms. Default 50. */
  readonly pollMs?: number;
  /** The clock. Default `Date.now`. */
  readonly now?: () => number;
  /** Told about a ledger row that could not be written when no caller awaits it. Default: none. */
  readonly onError?: (error: unknown) => void;
}

interface Waiter {
  grant(): void;
  timer: NodeJS.Timeout;
}

interface Slot {
  /** When the current holder got the slot. */
  since: number;
  /**
   * How long the current holder's call is expected to take, ms, from the tokens the engine
   * expects to evaluate for it (or those it reserved); `undefined` until it reserves them.
   */
  expectedMs?: number | undefined;
  readonly waiters: Waiter[];
}

/** The shortest and longest retry delays suggested to a refused caller, in ms. */
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 60_000;

/**
 * Admits calls against an {@link AccountStore}. One per server process.
 * @example `const admission = new Admission(store, { waitMs: 0 });`
 */
export class Admission {
  private readonly slots = new Map<number, Slot>();
  private readonly waitMs: number;
  private readonly pollMs: number;
  private readonly now: () => number;
  private readonly onError: (error: unknown) => void;
  /** A running average of call durations, for Retry-After. */
  private typicalMs = 1000;
  /** When refused calls were told to come back, by account, whoever holds its slot then. */
  private readonly turns = new RetryTurns();
  /** How long a call takes by the tokens it evaluates (or reserved), for Retry-After. */
  private readonly durations = new CallDurations();

  /** The store, its outages turned into `StoreUnavailableError` (store.ts). */
  private readonly store: AccountStore;

  constructor(store: AccountStore, options: AdmissionOptions = {}) {
    this.store = outagesAsErrors(store);
    this.waitMs = Math.max(0, options.waitMs ?? 0);
    this.pollMs = Math.max(1, options.pollMs ?? 50);
    this.now = options.now ?? Date.now;
    this.onError = options.onError ?? (() => {});
  }

  /** Whether an account has a call in flight in this process. */
  busy(accountId: number): boolean {
    return this.slots.has(accountId);
  }

  /** Accounts with a call in flight in this process. */
  get inFlight(): number {
    return this.slots.size;
  }

  /** Calls waiting in this process for their account's slot. */
  get waiting(): number {
    let n = 0;
    for (const slot of this.slots.values()) n += slot.waiters.length;
    return n;
  }

  /**
   * Admits a call presenting `key`.
   * @throws {@link AdmissionError} for a missing, unknown or revoked key, a spent allowance, or an
   *   account with a call in flight here or on another replica (after waiting up to `waitMs`).
   * @example const permit = await admission.admit(key); await permit.reserve(usage); … permit.settle(usage);
   */
  async admit(key: string | undefined): Promise<Permit> {
    const arrived = this.now();
    const found = await this.check(key);
    const account = found.account;

    const slot = this.slots.get(account.id);
    if (!slot) {
      this.slots.set(account.id, { since: this.now(), waiters: [] });
    } else {
      await this.waitFor(slot, account);
      // The slot was handed over; the call before may have spent the allowance.
      try {
        await this.checkAllowance((await this.store.accountById(account.id)) ?? account);
      } catch (error) {
        this.release(account.id);
        throw error;
      }
    }
    let lock: AccountLock | undefined;
    try {
      lock = await this.lockAcrossReplicas(account.id, arrived + this.waitMs);
      if (!lock) throw await this.busyElsewhereError(account);
      await this.store.touchKey(found.key.id);
    } catch (error) {
      void lock?.release();
      this.release(account.id);
      throw error;
    }
    return this.permit(account, found.key.id, lock);
  }

  /**
   * What can be checked of a call before its body is read: the key (known, not revoked) and the
   * account's allowance (not spent). Takes no slot; {@link admit} checks again.
   * @returns the key's record and its account
   * @throws {@link AdmissionError} `authentication` or `allowance`; `StoreUnavailableError` when
   *   the store does not answer
   */
  async check(key: string | undefined): Promise<{ key: ApiKeyRecord; account: Account }> {
    if (key === undefined || key === "") throw refuse("missingKey", []);
    const found = await this.store.findKey(key);
    if (!found) throw refuse("unknownKey", []);
    if (found.key.revokedAt !== undefined)
      throw refuse("revokedKey", [found.key.prefix, new Date(found.key.revokedAt).toISOString()]);
    await this.checkAllowance(found.account);
    return found;
  }

  /** The store's lock on the account, asked again every `pollMs` until `deadline` (ms). */
  private async lockAcrossReplicas(
    accountId: number,
    deadline: number,
  ): Promise<AccountLock | undefined> {
    for (;;) {
      const lock = await this.store.tryLockAccount(accountId);
      if (lock) return lock;
      const left = deadline - this.now();
      if (left <= 0) return undefined;
      await new Promise((resolve) => setTimeout(resolve, Math.min(this.pollMs, left)));
    }
  }

  private permit(account: Account, keyId: number, lock: AccountLock): Permit {
    const started = this.now();
    let settled = false;
    let usage: CallUsage | undefined;
    let outcome: { status: number; model: string | undefined } | undefined;
    let recording: Promise<void> | undefined;
    let releasedAt: number | undefined;
    let reservationId: number | undefined;
    let sized = 0;
    const release = () => {
      if (releasedAt !== undefined) return;
      releasedAt = this.now();
      this.release(account.id);
      void lock.release();
    };
    const record = (): Promise<void> => {
      if (!settled || !outcome) return Promise.resolve();
      const row = {
        accountId: account.id,
        keyId,
        at: releasedAt ?? this.now(),
        startedAt: started,
        inputTokens: usage?.input_tokens ?? 0,
        outputTokens: usage?.output_tokens ?? 0,
        model: outcome.model,
        status: outcome.status,
      };
      recording ??= this.store.recordCall(row, reservationId);
      return recording;
    };
    return {
      account,
      keyId,
      reserve: async (u, work) => {
        const tokens = u.input_tokens + u.output_tokens;
        const reservation = await this.store.reserveTokens(account, tokens);
        if (!reservation.ok)
          throw refuse(
            "allowanceOverrun",
            { ...reservation.state, account: account.name, needed: tokens },
            retryAfterOf(reservation.state, this.now(), tokens),
          );
        reservationId = reservation.id;
        // Its duration is learnt and foretold in the tokens the engine evaluates, where it says.
        sized = work ?? tokens;
        // This call holds the account's slot until it is released.
        const slot = this.slots.get(account.id);
        if (slot && releasedAt === undefined) {
          slot.expectedMs = this.durations.expectedMs(sized);
          lock.announce?.(this.now() - started, slot.expectedMs);
        }
      },
      settle: (u) => {
        if (settled) return;
        settled = true;
        usage = u;
        if (u) {
          const ms = this.now() - started;
          this.typicalMs = 0.8 * this.typicalMs + 0.2 * ms;
          this.durations.add(sized, ms);
        }
        release();
        record().catch(this.onError);
      },
      finish: (o) => {
        if (outcome) return Promise.resolve();
        outcome = o;
        return record();
      },
      release,
    };
  }

  /** Refuses when the account's allowance for the current period is spent. */
  private async checkAllowance(account: Account): Promise<void> {
    const state = await this.store.allowanceState(account);
    if (!state || state.remaining > 0) return;
    throw refuse(
      "allowanceExhausted",
      { ...state, account: account.name },
      retryAfterOf(state, this.now()),
    );
  }

  /** Waits for the slot to be handed over, up to `waitMs`. @throws {@link AdmissionError} on time-out. */
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

  /**
   * The refusal of a call while the account's slot is held, with when to retry: what the call in
   * flight has left (from the tokens it evaluates, or the typical call), or, once it has run longer
   * than expected, about as long again as it has run; then a typical call per waiter.
   */
  private busyError(slot: Slot, account: Account): AdmissionError {
    const now = this.now();
    const elapsed = now - slot.since;
    const left = timeLeft(elapsed, slot.expectedMs ?? this.typicalMs);
    const turn = Math.max(RETRY_MIN_MS, left + this.typicalMs * slot.waiters.length);
    return this.turnError(account, now + turn);
  }

  /** A busy account's refusal, told its turn from `earliest` ({@link RetryTurns}), ≤ 60 s. */
  private turnError(account: Account, earliest: number): AdmissionError {
    const now = this.now();
    const at = this.turns.next(account.id, earliest, now, this.typicalMs, now + RETRY_MAX_MS);
    const retryAfterMs = Math.round(Math.min(RETRY_MAX_MS, Math.max(RETRY_MIN_MS, at - now)));
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
    return refuse("concurrencyLimit", [account.name, seconds], retryAfterMs);
  }

  /** The account's lock is held by another replica: what its call has left, by what it announced. */
  private async busyElsewhereError(account: Account): Promise<AdmissionError> {
    const held = await this.store.heldCall?.(account.id).catch(() => undefined);
    const now = this.now();
    const left = held ? timeLeft(held.elapsedMs, held.expectedMs) : this.typicalMs / 2;
    return this.turnError(account, now + Math.max(RETRY_MIN_MS, left));
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
    slot.expectedMs = undefined;
    next.grant();
  }
}

/**
 * A refusal of the table's entry `code`.
 * @param retryAfterMs - when a retry may succeed; `undefined` for never by itself (a key refused,
 *   an allowance that does not renew)
 */
function refuse<C extends AdmissionCode>(
  code: C,
  args: MessageArgs<(typeof Errors)[C]>,
  retryAfterMs?: number,
): AdmissionError {
  return new AdmissionError(code, args as MessageArgs<(typeof Errors)[AdmissionCode]>, {
    retryAfterMs,
  });
}
