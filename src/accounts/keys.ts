import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * API keys: `dsk_` followed by {@link KEY_BODY_LENGTH} random base62 characters (about 238 bits).
 *
 * A key is shown once, when it is created; the store keeps only its SHA-256 hash and its first
 * {@link KEY_PREFIX_LENGTH} characters (the prefix, shown in listings and used to find the
 * candidate rows). A fast hash is the right tool here: password hashes (scrypt, argon2) are slow
 * on purpose to make guessing low-entropy secrets expensive, but a key drawn uniformly from 62^40
 * values cannot be guessed, and hashing it once per request must stay cheap.
 */

/** What every key starts with. */
export const KEY_SCHEME = "dsk_";
/** Random base62 characters after {@link KEY_SCHEME}. */
export const KEY_BODY_LENGTH = 40;
/** Characters of a key kept in clear and shown in listings (`dsk_` + 8). */
export const KEY_PREFIX_LENGTH = 12;

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const KEY_PATTERN = new RegExp(`^${KEY_SCHEME}[0-9A-Za-z]{${KEY_BODY_LENGTH}}$`);

/** A new random key. Base62 digits are drawn by rejection sampling, so each is uniform. */
export function generateApiKey(): string {
  let body = "";
  while (body.length < KEY_BODY_LENGTH) {
    for (const byte of randomBytes(64)) {
      // 248 = 4 · 62: bytes at or above it would favour the first digits.
      if (byte < 248 && body.length < KEY_BODY_LENGTH) body += BASE62[byte % 62];
    }
  }
  return KEY_SCHEME + body;
}

/** Whether a string has the shape of a decisiond key (says nothing about whether it exists). */
export function isWellFormedApiKey(key: string): boolean {
  return KEY_PATTERN.test(key);
}

/** The SHA-256 of a key's UTF-8 bytes: what the store keeps. */
export function hashApiKey(key: string): Buffer {
  return createHash("sha256").update(key, "utf8").digest();
}

/** The part of a key that is stored and shown in clear. */
export function apiKeyPrefix(key: string): string {
  return key.slice(0, KEY_PREFIX_LENGTH);
}

/** Compares two hashes in time independent of where they differ (`crypto.timingSafeEqual`). */
export function hashesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
