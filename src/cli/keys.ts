import { InvalidArgumentError, type Command } from "commander";
import Table from "cli-table3";
import { openNamedStore, parseStoreUrl } from "../accounts/open.js";
import { checkAccountName } from "../accounts/rows.js";
import type { AccountStore } from "../accounts/store.js";
import { KeyLabel, UNPRINTABLE } from "../console/schemas.js";
import { keyView } from "../console/views.js";
import { digits, storeOption } from "./options.js";

/** The JSON fields' ISO times, shared with the console's views (`null` for never). */
export { isoTime } from "../console/views.js";

/**
 * `decisiond keys create|list|revoke`: API keys in the accounts store (`--store`, default
 * `sqlite:$DECISIOND_HOME/decisiond.db`). They work while `serve` runs: a revoked key is refused on its
 * next request.
 * @example `registerKeysCommand(program);`
 */
export function registerKeysCommand(program: Command): void {
  const keys = program.command("keys").description("create, list and revoke API keys");

  keys
    .command("create")
    .description(
      "create an API key for an account (created when missing); the key is printed once, on stdout",
    )
    .requiredOption("--account <name>", "the account the key belongs to", accountName)
    .option("--label <label>", "a note to tell keys apart, e.g. who holds it", keyLabel)
    .option("--json", "print {id, account, prefix, label, created_at, key} as JSON")
    .addOption(storeOption())
    .action((flags: { account: string; label?: string; json?: boolean; store?: string }) =>
      withStore(
        flags.store,
        async (store) => {
          const { key, record, accountCreated } = await store.createKey(flags.account, flags.label);
          if (flags.json) {
            out(JSON.stringify({ ...keyView(record), key }));
            return;
          }
          if (accountCreated) err(`created account "${record.accountName}"`);
          err(
            `created key ${record.id} (${record.prefix}…) for account "${record.accountName}"; it is shown this once:`,
          );
          out(key);
        },
        true,
      ),
    );

  keys
    .command("list")
    .description("list keys: id, account, prefix, label, created, last used, revoked")
    .option("--account <name>", "only this account's keys")
    .option("--json", "print a JSON array")
    .addOption(storeOption())
    .action((flags: { account?: string; json?: boolean; store?: string }) =>
      withStore(flags.store, async (store) => {
        const records = await store.listKeys(flags.account);
        if (flags.json) {
          out(JSON.stringify(records.map(keyView)));
          return;
        }
        if (records.length === 0) {
          err("no keys");
          return;
        }
        out(
          table(
            ["id", "account", "prefix", "label", "created", "last used", "revoked"],
            records.map((r) => [
              r.id,
              r.accountName,
              r.prefix,
              r.label ?? "",
              time(r.createdAt),
              time(r.lastUsedAt) || "never",
              time(r.revokedAt),
            ]),
          ),
        );
      }),
    );

  keys
    .command("revoke")
    .description("revoke a key by its id (see keys list); requests with it get 401 from then on")
    .argument("<id>", "the key's id", keyId)
    .addOption(storeOption())
    .action((id: number, flags: { store?: string }) =>
      withStore(flags.store, async (store) => {
        const { record, alreadyRevoked } = await store.revokeKey(id);
        err(
          alreadyRevoked
            ? `key ${id} (${record.prefix}…, account "${record.accountName}") was already revoked on ${time(record.revokedAt)}`
            : `revoked key ${id} (${record.prefix}…, account "${record.accountName}")`,
        );
      }),
    );
}

function keyId(value: string): number {
  const n = digits(value);
  if (n === undefined || n <= 0)
    throw new InvalidArgumentError(`expected a key id (a number from keys list), got "${value}"`);
  return n;
}

/**
 * Opens the store at `url` (see {@link parseStoreUrl}), runs `fn`, closes the store.
 * @param create - whether a SQLite store that is not there is made (commands that add keys or
 *   accounts); otherwise it is an error, so a mistyped path is not read as an empty store
 * @throws `StoreMissingError` when the store is not there and `create` is false; an `Error`
 *   naming the store (password hidden) when it cannot be opened (see `openNamedStore`)
 */
export async function withStore<T>(
  url: string | undefined,
  fn: (store: AccountStore) => Promise<T>,
  create = false,
): Promise<T> {
  const store = await openNamedStore(parseStoreUrl(url), { mustExist: !create });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** A line on stdout. */
export function out(line: string): void {
  process.stdout.write(line + "\n");
}

/** A line on stderr. */
export function err(line: string): void {
  process.stderr.write(line + "\n");
}

/** A time for a table: `2026-01-02 03:04:05Z`, or "" for none. */
export function time(ms: number | undefined): string {
  return ms === undefined
    ? ""
    : new Date(ms)
        .toISOString()
        .replace("T", " ")
        .replace(/\.\d{3}Z$/, "Z");
}

/**
 * `text` with every control character, lone surrogate and bidirectional override written as a
 * backslash-u escape (ESC becomes the six characters `\u001b`), so printing it cannot drive the
 * terminal (labels made before the console refused them, or written to the store by other means).
 * @example printable("ok") // → "ok"
 */
export function printable(text: string): string {
  return text.replace(
    new RegExp(UNPRINTABLE.source, "gu"),
    (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`,
  );
}

/** A borderless table (cli-table3) with a header row; text cells pass through {@link printable}. */
export function table(head: string[], rows: (string | number)[][]): string {
  const t = new Table({
    head,
    chars: {
      top: "",
      "top-mid": "",
      "top-left": "",
      "top-right": "",
      bottom: "",
      "bottom-mid": "",
      "bottom-left": "",
      "bottom-right": "",
      left: "",
      "left-mid": "",
      mid: "",
      "mid-mid": "",
      right: "",
      "right-mid": "",
      middle: "  ",
    },
    style: { head: [], border: [], "padding-left": 0, "padding-right": 0 },
  });
  t.push(
    ...rows.map((row) => row.map((cell) => (typeof cell === "string" ? printable(cell) : cell))),
  );
  return t
    .toString()
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n");
}

/**
 * Checks `--account` as the store will (`checkAccountName`), so that a bad name is a usage error
 * said before the store is opened.
 * @throws `InvalidArgumentError` saying what is wrong with it
 */
function accountName(value: string): string {
  try {
    checkAccountName(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
  return value;
}

/**
 * Parses `--label` as the console does ({@link KeyLabel}).
 * @throws `InvalidArgumentError` saying what is wrong with it.
 */
function keyLabel(value: string): string | undefined {
  const parsed = KeyLabel.safeParse(value);
  if (!parsed.success) throw new InvalidArgumentError(parsed.error.issues[0]!.message);
  return parsed.data;
}
