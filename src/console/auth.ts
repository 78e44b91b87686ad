import { createHash, timingSafeEqual } from "node:crypto";
import { KEY_SCHEME } from "../accounts/keys.js";
import type { Account, AccountStore, ApiKeyRecord } from "../accounts/store.js";
import { bearerKey } from "../protocol/bearer.js";
import { ApiError, Errors, validationError, type ErrorSpec } from "../protocol/errors.js";

/**
 * Who a console request acts for, and on which account it may act.
 *
 * A console request carries `Authorization: Bearer <credential>`: either an API key (`dsk_…`),
 * which makes the caller that key's account, or the admin token from configuration, which makes
 * the caller the admin of every account. Every route asks {@link accountInScope} or
 * {@link keyInScope} before it reads or changes an account, so the only account a key can reach is
 * its own: a route never takes the account of a key principal from the request.
 */

/** The caller of a console request. */
export type Principal =
  | { readonly role: "admin" }
  | { readonly role: "account"; readonly account: Account; readonly key: ApiKeyRecord };

/** The shortest admin token accepted, in characters. */
export const MIN_ADMIN_TOKEN_LENGTH = 24;

/**
 * Checks an admin token from configuration: at least {@link MIN_ADMIN_TOKEN_LENGTH} characters,
 * no whitespace, and not shaped like an API key (so a credential is one or the other).
 * @returns the token. @throws {@link Error} saying what is wrong and how to make a good one.
 */
export function checkAdminToken(token: string): string {
  const fix = "make one with `openssl rand -base64 32`";
  if (token.length < MIN_ADMIN_TOKEN_LENGTH)
    throw new Error(
      `the admin token is too short (${token.length} characters; at least ${MIN_ADMIN_TOKEN_LENGTH}): ${fix}`,
    );
  if (/\s/.test(token)) throw new Error(`the admin token must not contain whitespace: ${fix}`);
  if (token.startsWith(KEY_SCHEME))
    throw new Error(
      `the admin token must not start with "${KEY_SCHEME}" (that is an API key): ${fix}`,
    );
  return token;
}

/** What {@link authenticate} needs. */
export interface Credentials {
  readonly store: AccountStore;
  /** The admin token; `undefined` when admin sign-in is off. */
  readonly adminToken: string | undefined;
}

const WWW_AUTHENTICATE = { "www-authenticate": 'Bearer realm="decisiond console"' };

/** A 401 of the console, asking for its realm. */
function unauthorized(spec: ErrorSpec, args: readonly string[] = []): ApiError {
  return new ApiError(spec, args, { headers: WWW_AUTHENTICATE });
}

/**
 * The principal of an `Authorization` header. An API key is looked up in the store (hash compared
 * in constant time) and marked used; anything else is compared with the admin token, through
 * SHA-256 digests and `crypto.timingSafeEqual`, so neither its content nor its length leaks
 * through timing.
 * @throws {@link HttpError} 401 for a missing, malformed, unknown or revoked credential, or an admin
 *   token when none is configured.
 */
export async function authenticate(
  header: string | undefined,
  credentials: Credentials,
): Promise<Principal> {
  const credential = bearerKey(header);
  if (credential === undefined) throw unauthorized(Errors.consoleSignIn);
  if (credential.startsWith(KEY_SCHEME)) {
    const found = await credentials.store.findKey(credential);
    if (!found) throw unauthorized(Errors.unknownKey);
    if (found.key.revokedAt !== undefined)
      throw unauthorized(Errors.revokedKey, [
        found.key.prefix,
        new Date(found.key.revokedAt).toISOString(),
      ]);
    await credentials.store.touchKey(found.key.id);
    return {
      role: "account",
      account: found.account,
      key: (await credentials.store.keyById(found.key.id)) ?? found.key,
    };
  }
  if (credentials.adminToken === undefined) throw unauthorized(Errors.adminSignInOff);
  if (!sameSecret(credential, credentials.adminToken)) throw unauthorized(Errors.invalidCredential);
  return { role: "admin" };
}

/** Constant-time comparison of two secrets of any lengths. */
function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * The name of the account a request acts on. A key principal acts on its own account only: a
 * request naming another one is refused whether or not it exists (so the answer says nothing about
 * other accounts). The admin acts on the named account, and must name one when `required`.
 * @returns the account name, or `undefined` for an admin request naming none (meaning all).
 * @throws {@link HttpError} 403 for a key naming another account; 422 when the admin names none and
 *   one is `required` (`loc` says where).
 */
export function accountInScope(
  principal: Principal,
  requested: string | undefined,
  where: { loc: (string | number)[]; required: boolean },
): string | undefined {
  if (principal.role === "account") {
    if (requested !== undefined && requested !== principal.account.name)
      throw new ApiError(Errors.permissionDenied, [principal.account.name]);
    return principal.account.name;
  }
  if (requested === undefined && where.required)
    throw validationError([
      { loc: where.loc, msg: "Field required: an admin names the account", type: "missing" },
    ]);
  return requested;
}

/**
 * A key the principal may manage: any key for the admin, a key of its own account for a key
 * principal. A key of another account is reported as missing, like one that does not exist.
 * @throws {@link HttpError} 404 when there is no such key in scope.
 */
export async function keyInScope(
  principal: Principal,
  store: AccountStore,
  id: number,
): Promise<ApiKeyRecord> {
  const record = await store.keyById(id);
  if (!record || (principal.role === "account" && record.accountId !== principal.account.id))
    throw principal.role === "account"
      ? new ApiError(Errors.keyNotFoundInAccount, [id, principal.account.name])
      : new ApiError(Errors.keyNotFound, [id]);
  return record;
}
