import { isUtf8 } from "node:buffer";
import { validationError } from "../protocol/errors.js";
import type { InexactInteger } from "../protocol/json-scan.js";

/**
 * The content types parsed as JSON: `application/json` and `application/<x>+json`, any case,
 * with or without parameters (`; charset=utf-8`). Fastify tests it against the whole header.
 */
export const JSON_CONTENT_TYPE = /^application\/([\w.+-]*\+)?json\s*(;|$)/i;

/** Charsets a JSON body may declare: UTF-8 (RFC 8259 §8.1) and its subset US-ASCII. */
const UTF8_CHARSETS = new Set(["utf-8", "utf8", "us-ascii", "ascii"]);

/**
 * The charset a Content-Type declares that a JSON body may not be in (anything but UTF-8), or
 * `undefined` when it declares none or UTF-8.
 * @example unacceptableCharset("application/json; charset=utf-16") // → "utf-16"
 */
export function unacceptableCharset(contentType: string | undefined): string | undefined {
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(contentType ?? "")?.[1]?.toLowerCase();
  return charset === undefined || UTF8_CHARSETS.has(charset) ? undefined : charset;
}

/**
 * Parses a JSON request body. A leading byte order mark is ignored (RFC 8259 §8.1 lets a parser
 * do so).
 * @throws {@link HttpError} 422 with `detail[]` (FastAPI's shape, the API's convention for a body it
 *   cannot use): `type: "json_invalid"` at `loc: ["body", <character offset>]`, whose `msg` says
 *   where the syntax breaks (line, column and offset); `type: "missing"` at `["body"]` for an
 *   empty body.
 */
export function parseJsonBody(body: string): unknown {
  const text = body.startsWith("\uFEFF") ? body.slice(1) : body;
  if (text.trim() === "") throw emptyBodyError();
  try {
    return JSON.parse(text);
  } catch (error) {
    const reason = (error as Error).message;
    const position =
      /position (\d+)/.exec(reason)?.[1] ??
      (/Unexpected end of JSON/.test(reason) ? String(text.length) : undefined);
    const offset = position !== undefined ? Number(position) : undefined;
    // Node 20 names no position for some errors (`Unexpected token '}', ..."`): no loc then.
    let where = "";
    if (offset !== undefined) {
      const before = text.slice(0, offset);
      const line = before.split("\n").length;
      const column = offset - before.lastIndexOf("\n");
      where =
        offset === text.length
          ? ` at the end of the body (character ${offset}, line ${line}, column ${column})`
          : ` at line ${line}, column ${column} (character ${offset})`;
    }
    throw validationError([
      {
        loc: offset === undefined ? ["body"] : ["body", offset],
        msg: `JSON decode error: the body is not valid JSON${where}: ${reason}`,
        type: "json_invalid",
      },
    ]);
  }
}

/**
 * A JSON body's bytes as text. JSON exchanged between systems is UTF-8 (RFC 8259 §8.1), and bytes
 * that are not are refused rather than replaced with U+FFFD, which would change an id or a label
 * without a word.
 * @param bytes - the body as received (after any Content-Encoding is undone)
 * @returns the decoded text, a byte order mark included
 * @throws {@link HttpError} 422 with `detail[]`: `type: "json_invalid"` at `loc: ["body"]`, whose
 *   `msg` names the offset (in bytes) and value of the first byte that begins no UTF-8 character
 * @example `decodeJsonBytes(Buffer.from([0x22, 0xff, 0x22]))` throws: byte 1 (0xFF) begins no character
 */
export function decodeJsonBytes(bytes: Buffer): string {
  if (isUtf8(bytes)) return bytes.toString("utf8");
  const offset = firstInvalidUtf8(bytes);
  const value = bytes[offset]?.toString(16).toUpperCase().padStart(2, "0");
  const where = value === undefined ? "" : `: byte ${offset} (0x${value}) begins no character`;
  throw validationError([
    {
      loc: ["body"],
      msg: `JSON decode error: the body is not valid UTF-8${where}; send JSON encoded as UTF-8`,
      type: "json_invalid",
    },
  ]);
}

/**
 * The well-formed UTF-8 sequences of more than one byte (The Unicode Standard, Table 3-7): lead
 * bytes `[from, to]`, the sequence's length, and the lowest and highest second byte (every byte
 * after the second is 0x80–0xBF).
 */
const UTF8_LEADS: readonly (readonly [number, number, number, number, number])[] = [
  [0xc2, 0xdf, 2, 0x80, 0xbf],
  [0xe0, 0xe0, 3, 0xa0, 0xbf],
  [0xe1, 0xec, 3, 0x80, 0xbf],
  [0xed, 0xed, 3, 0x80, 0x9f],
  [0xee, 0xef, 3, 0x80, 0xbf],
  [0xf0, 0xf0, 4, 0x90, 0xbf],
  [0xf1, 0xf3, 4, 0x80, 0xbf],
  [0xf4, 0xf4, 4, 0x80, 0x8f],
];

/**
 * Offset of the first byte that begins no well-formed UTF-8 sequence (The Unicode Standard,
 * Table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), or `bytes.length` when
 * every sequence is whole.
 */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i += 1;
      continue;
    }
    const sequence = UTF8_LEADS.find(([from, to]) => lead >= from && lead <= to);
    if (!sequence || i + sequence[2] > bytes.length) return i;
    const [, , length, low, high] = sequence;
    const second = bytes[i + 1]!;
    if (second < low || second > high) return i;
    for (let k = 2; k < length; k++) {
      const next = bytes[i + k]!;
      if (next < 0x80 || next > 0xbf) return i;
    }
    i += length;
  }
  return i;
}

/** The 422 of an empty body. */
export function emptyBodyError() {
  return validationError([
    {
      loc: ["body"],
      msg: "Field required: the body is empty; send a JSON object",
      type: "missing",
    },
  ]);
}

/**
 * Puts back the digits of the state's integers that `JSON.parse` rounded to a 64-bit float (the
 * {@link InexactInteger}s its scan found): each becomes the string of its digits, so the model
 * reads every digit sent (`9007199254740993` is not read as `…992`, a 30-digit id not as
 * `1.2345678901234568e+29`). Other values, and integers outside `state`, are left as parsed.
 * @param body - the parsed body
 * @param inexact - the scan's list of the same body
 * @returns `body`, changed in place
 * @example
 * ```ts
 * const inexact = [{ path: ["state", "id"], text: "9007199254740993" }];
 * keepStateDigits({ state: { id: 9007199254740992 } }, inexact); // → { state: { id: "9007199254740993" } }
 * ```
 */
export function keepStateDigits(body: unknown, inexact: readonly InexactInteger[]): unknown {
  const own = (container: unknown, step: string | number): container is object =>
    typeof container === "object" && container !== null && Object.hasOwn(container, step);
  for (const { path, text } of inexact) {
    if (path[0] !== "state") continue;
    let parent: unknown = body;
    for (const step of path.slice(0, -1))
      parent = own(parent, step) ? (parent as Record<string | number, unknown>)[step] : undefined;
    const last = path.at(-1)!;
    if (
      !own(parent, last) ||
      typeof (parent as Record<string | number, unknown>)[last] !== "number"
    )
      continue;
    // Defined, not assigned: an own "__proto__" member is replaced like any other.
    Object.defineProperty(parent, last, {
      value: text,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  }
  return body;
}
