import type { Allowance, AllowancePeriod } from "./allowance.js";
import { apiKeyPrefix, hashApiKey, hashesEqual, isWellFormedApiKey } from "./keys.js";
import {
  RESERVATION_TTL_MS,
  StoreError,
  type Account,
  type AccountUsage,
  type AllowanceState,
  type ApiKeyRecord,
  type DailyUsage,
  type UsageRow,
} from "./store.js";

/**
 * What the two store backends (`SqliteStore` and `PostgresStore`) share apart from
 * their SQL: the rows their queries return, the records made from them, the checks on what is
 * written, the allowance arithmetic and the errors they throw. Both backends' tables have the same
 * column names and their queries name result columns alike, so one mapping serves both.
 * Why: docs/decisions/061-one-row-mapping-for-both-stores.md
 */

/** A row of `accounts` (`SELECT *`). */
export interface AccountRow {
  readonly id: number;
  readonly name: string;
  readonly created_at: number;
  readonly allowance_tokens: number | null;
  readonly allowance_period: AllowancePeriod | null;
}

/** A row of {@link KEY_SELECT}: `api_keys` joined with its account's name. */
export interface KeyRow {
  readonly id: number;
  readonly account_id: number;
  readonly account_name: string;
  readonly prefix: string;
  /** SHA-256 of the key (see {@link hashApiKey}). */
  readonly hash: Buffer;
  readonly label: string | null;
  readonly created_at: number;
  readonly last_used_at: number | null;
  readonly revoked_at: number | null;
}

/** A row of `usage` (`SELECT *`): one call in the ledger. */
export interface LedgerRow {
  readonly account_id: number;
  readonly key_id: number | null;
  readonly at: number;
  readonly started_at: number | null;
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly model: string | null;
  readonly status: number;
}

/** An account's ledger summed: calls, failed calls (status ≥ 400), tokens, the last call's time. */
export interface LedgerTotalsRow {
  readonly calls: number;
  readonly failed: number;
  readonly input: number;
  readonly output: number;
  readonly last: number | null;
}

/** One UTC day of an account's ledger summed; `day` is the day's start in ms. */
export interface LedgerDayRow {
  readonly day: number;
  readonly calls: number;
  readonly failed: number;
  readonly input: number;
  readonly output: number;
}

/** The keys with their account's name, in {@link KeyRow}s; add `WHERE` / `ORDER BY` after it. */
export const KEY_SELECT = `SELECT k.*, a.name AS account_name FROM api_keys k JOIN accounts a ON a.id = k.account_id`;

/** The columns a ledger row is inserted with, in the order of {@link ledgerValues}. */
export const LEDGER_COLUMNS =
  "account_id, key_id, at, started_at, input_tokens, output_tokens, model, status";

/** @returns the account a row of `accounts` holds. */
export function toAccount(row: AccountRow): Account {
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

/** @returns the record a {@link KeyRow} holds, without the hash. */
export function toKeyRecord(row: KeyRow): ApiKeyRecord {
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

/** @returns the call a row of `usage` holds. */
export function toUsageRow(row: LedgerRow): UsageRow {
  return {
    accountId: row.account_id,
    keyId: row.key_id ?? undefined,
    at: row.at,
    startedAt: row.started_at ?? undefined,
    inputTokens: row.input_tokens,
    outputTokens: row.output_tokens,
    model: row.model ?? undefined,
    status: row.status,
  };
}

/** @returns the day a {@link LedgerDayRow} sums. */
export function toDailyUsage(row: LedgerDayRow): DailyUsage {
  return {
    day: row.day,
    calls: row.calls,
    failedCalls: row.failed,
    inputTokens: row.input,
    outputTokens: row.output,
  };
}

/**
 * @param account - the account the totals are of
 * @param totals - its whole ledger summed
 * @param allowance - its allowance as of now (`undefined`: none)
 * @returns the account's usage as `decisiond usage` reports it
 */
export function toAccountUsage(
  account: Account,
  totals: LedgerTotalsRow,
  allowance: AllowanceState | undefined,
): AccountUsage {
  return {
    account: account.name,
    calls: totals.calls,
    failedCalls: totals.failed,
    inputTokens: totals.input,
    outputTokens: totals.output,
    lastCallAt: totals.last ?? undefined,
    allowance,
  };
}

/** @returns the values a call is inserted into `usage` with, in the order of {@link LEDGER_COLUMNS}. */
export function ledgerValues(row: UsageRow): (number | string | null)[] {
  return [
    row.accountId,
    row.keyId ?? null,
    row.at,
    row.startedAt ?? null,
    row.inputTokens,
    row.outputTokens,
    row.model ?? null,
    row.status,
  ];
}

/** Account names: an ASCII letter or digit, then up to 63 ASCII letters, digits, `.`, `_` or `-`. */
const ACCOUNT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Most characters of a name a message quotes. */
const QUOTED_NAME_LENGTH = 40;

/** DEL, the C1 controls, direction overrides, embeddings and isolates: JSON leaves them as they are. */
const UNESCAPED = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/gu;

/**
 * A name as a message quotes it: in double quotes, with JSON's escapes, and DEL, the C1 controls
 * and direction overrides escaped too (a control character cannot drive the terminal that prints
 * it, nor an override reorder it), cut after {@link QUOTED_NAME_LENGTH} characters with "…".
 * @example quoteName("acme") // → '"acme"'
 * @example quoteName("ac" + String.fromCharCode(0x202e) + "me") // → `"ac` + backslash + `u202eme"`
 * @example quoteName("x".repeat(300)) // → `"${"x".repeat(40)}…"`
 */
export function quoteName(name: string): string {
  const characters = [...name];
  const quoted =
    characters.length <= QUOTED_NAME_LENGTH
      ? JSON.stringify(name)
      : `${JSON.stringify(characters.slice(0, QUOTED_NAME_LENGTH).join("")).slice(0, -1)}…"`;
  return quoted.replace(UNESCAPED, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** @throws {@link StoreError} on a name that is not an account name, quoted by {@link quoteName}. */
export function checkAccountName(name: string): void {
  if (!ACCOUNT_NAME.test(name))
    throw new StoreError(
      `bad account name ${quoteName(name)}: use up to 64 ASCII letters, digits, ".", "_" or "-", starting with a letter or digit`,
    );
}

/** @throws {@link StoreError} on a token count that is not a whole number ≥ 0. */
export function checkAllowance(allowance: Allowance | undefined): void {
  if (allowance && !(Number.isSafeInteger(allowance.tokens) && allowance.tokens >= 0))
    throw new StoreError(`an allowance is a whole number of tokens ≥ 0, got ${allowance.tokens}`);
}

/** The errors both backends throw for what they refuse, with one wording. */
export const storeErrors = {
  /** @returns the error for an account name that is taken. */
  accountExists: (name: string) => new StoreError(`account "${name}" already exists`),
  /** @returns the error for an account name that names none. */
  noAccount: (name: string) => new StoreError(`no account ${quoteName(name)}`),
  /** @returns the error for a key id that names none. */
  noKey: (id: number) => new StoreError(`no key with id ${id} (see decisiond keys list)`),
  /** @returns the error for a database at a schema version newer than this decisiond knows. */
  newerSchema: (what: string, version: number, known: number) =>
    new StoreError(
      `${what} ${version}, newer than this decisiond knows (${known}); upgrade decisiond`,
    ),
};

/** Milliseconds in a UTC day (the ledger's times are UTC; days have no leap seconds in it). */
export const DAY_MS = 86_400_000;

/**
 * @param ms - a time, ms since the epoch
 * @returns the start of its UTC day, ms
 * @example utcDayStart(Date.UTC(2026, 0, 2, 15)) // → Date.UTC(2026, 0, 2)
 */
export function utcDayStart(ms: number): number {
  return ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
}

/**
 * The allowance state from an account's allowance and the tokens used and reserved in its
 * current window (from `allowanceWindow`).
 * @param renewsAt - the window's end, ms; `undefined` for a total allowance
 * @example `allowanceStateOf({ tokens: 100, period: "day" }, 60, 30, end).remaining` → `10`
 */
export function allowanceStateOf(
  allowance: Allowance,
  used: number,
  reserved: number,
  renewsAt: number | undefined,
): AllowanceState {
  return {
    ...allowance,
    used,
    reserved,
    remaining: Math.max(0, allowance.tokens - used - reserved),
    renewsAt,
  };
}

/** @returns whether reserving `tokens` more would take the allowance past its tokens. */
export function exceedsAllowance(state: AllowanceState, tokens: number): boolean {
  return state.used + state.reserved + tokens > state.tokens;
}

/**
 * @param now - ms since the epoch
 * @returns the times a reservation made now is stored with: it stops counting at `expiresAt`
 *   ({@link RESERVATION_TTL_MS} later) when its call is never recorded.
 */
export function reservationTimes(now: number): { createdAt: number; expiresAt: number } {
  return { createdAt: now, expiresAt: now + RESERVATION_TTL_MS };
}

/**
 * How a presented key is looked up: the prefix to select candidate rows by, and the hash to
 * compare them with.
 * @returns `undefined` for a string that is not shaped like a key (no row can match).
 */
export function keyLookup(key: string): { prefix: string; hash: Buffer } | undefined {
  return isWellFormedApiKey(key) ? { prefix: apiKeyPrefix(key), hash: hashApiKey(key) } : undefined;
}

/** @returns the candidate row whose hash equals `hash` (compared in constant time), if any. */
export function rowWithHash(rows: readonly KeyRow[], hash: Buffer): KeyRow | undefined {
  return rows.find((row) => hashesEqual(row.hash, hash));
}
