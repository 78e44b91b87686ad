import { ApiError, Errors } from "./errors.js";

/**
 * The API's credential on the wire: `Authorization: Bearer <key>`, the scheme any case.
 */

/** The challenge a 401 of the API carries. */
export const WWW_AUTHENTICATE: Readonly<Record<string, string>> = {
  "www-authenticate": 'Bearer realm="decisiond"',
};

/**
 * The key of an `Authorization: Bearer <key>` header.
 * @param header - the header's value, `undefined` when absent
 * @returns the key; `undefined` when the header is absent or blank
 * @throws {@link ApiError} {@link Errors.malformedAuthorization} (401) for another scheme or a
 *   malformed header
 * @example bearerKey("Bearer dsk_abc") // → "dsk_abc"
 */
export function bearerKey(header: string | undefined): string | undefined {
  if (header === undefined || header.trim() === "") return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  if (!match) throw new ApiError(Errors.malformedAuthorization, [], { headers: WWW_AUTHENTICATE });
  return match[1];
}
