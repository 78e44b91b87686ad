import { isUtf8 } from "node:buffer";
import { createHash } from "node:crypto";
import { validationError, type HttpError } from "./errors.js";
import { MAX_JSON_DEPTH } from "./limits.js";

/**
 * A bound on what a JSON body may cost before it is parsed. `JSON.parse` holds the event loop for
 * the whole body at once, and what it costs depends on the number of values, not the bytes: 16 MB
 * of `[[],[],…]` is eight million arrays (seconds of parsing and gigabytes of heap), 16 MB of one
 * string is 30 ms. {@link JsonBodyScanner} counts values and nesting as the bytes arrive, a chunk
 * at a time, and a body past either bound is refused with 422 before the rest is read or parsed.
 * Why: docs/decisions/084-bounded-cost-before-admission.md
 */

/**
 * Most values (arrays, objects and the elements and members in them) in one JSON body: more than
 * the context of any model decisiond serves holds, as each value renders to at least one token.
 * Parsing 100,000 empty arrays takes about 15 ms.
 */
export const MAX_JSON_VALUES = 100_000;

/**
 * Deepest nesting the scanner lets through to the parser. Bodies between {@link MAX_JSON_DEPTH}
 * and this are parsed and refused by the shape check (src/api/json-shape.ts), which names where; deeper
 * ones are refused while they arrive.
 */
export const MAX_SCANNED_DEPTH = 16_384;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;

/** An integer the body writes that `JSON.parse` would not give back as written. */
export interface InexactInteger {
  /** Where it is: member names and indexes from the body down. */
  readonly path: readonly (string | number)[];
  /** Its digits as sent, a `-` before them when negative. */
  readonly text: string;
}

/** Most {@link InexactInteger}s a body's scan records; later ones are read as floats. */
export const MAX_INEXACT_INTEGERS = 10_000;
/**
 * A number literal longer than this is not kept: past 309 digits it parses as Infinity, which
 * src/api/json-shape.ts refuses.
 */
const LONGEST_NUMBER = 400;

/**
 * Counts the values and nesting of a JSON text given in chunks of UTF-8 bytes, without parsing
 * it: brackets and commas outside strings (a multi-byte UTF-8 sequence never holds an ASCII
 * byte). It also reads each object's member names, and refuses a name an object gives twice:
 * `JSON.parse` keeps the last of them and drops the others without a word (RFC 8259 §4 leaves
 * duplicate names to the parser), so a request with two questions or two options of one id would
 * lose one. It notes the integers `JSON.parse` would change ({@link JsonBodyScanner.inexact}), whose
 * digits the state keeps (src/api/json.ts `keepStateDigits`). Malformed JSON is counted as far as
 * it goes; `JSON.parse` reports it later.
 * @example
 * ```ts
 * const scanner = new JsonBodyScanner(100_000, 1024);
 * scanner.push(Buffer.from('{"a": [1, 2]}')); // → undefined: within both bounds
 * scanner.push(Buffer.from('{"a": 1, "a": 2}')); // → the 422 of a duplicate name at body.a
 * ```
 */
export class JsonBodyScanner {
  /** Values seen so far: containers opened, plus commas (one more value each). */
  values = 0;
  private inString = false;
  private escaped = false;
  /**
   * Each open container, outermost first (its length is the nesting depth): an object's names so
   * far, or `undefined` (an array).
   */
  private readonly containers: (Set<string> | undefined)[] = [];
  /** Where the value being read is in each open container: its member's name, or its index. */
  private readonly path: (string | number)[] = [];
  /** Whether the next string is a member's name (just after `{` or an object's `,`). */
  private expectName = false;
  /**
   * The bytes of the member name being read, when the string being read is one: those of the
   * chunks before the one it ends in (none when it starts in that chunk).
   */
  private name: Buffer[] | undefined;
  /** The number literal being read (its first {@link LONGEST_NUMBER} characters), if any. */
  private number: string | undefined;
  /**
   * The integers, in document order, that `JSON.parse` would not give back as written: more than
   * 15 digits that a 64-bit float rounds (`9007199254740993`, a 30-digit id) or writes with an
   * exponent (1e21 and up), at most {@link MAX_INEXACT_INTEGERS}, within the nesting a body may
   * have. Fractions and exponents are not listed: their rounding is in digits past a float's
   * precision.
   */
  readonly inexact: InexactInteger[] = [];

  /**
   * @param maxValues - most values a body may hold
   * @param maxDepth - deepest nesting a body may reach
   */
  constructor(
    private readonly maxValues: number,
    private readonly maxDepth: number,
  ) {}

  /**
   * Scans the next bytes.
   * @returns the 422 to answer when the body went past a bound or an object named a member
   *   twice, else `undefined`
   */
  push(chunk: Uint8Array): HttpError | undefined {
    const n = chunk.length;
    let i = 0;
    // The next quote and backslash at or after i (n: none in this chunk), found again only once
    // passed, so a string full of escapes costs one pass, not one search per escape.
    let quote = -1;
    let backslash = -1;
    // Where the string being read starts in this chunk.
    let start = 0;
    while (i < n) {
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          i++;
          continue;
        }
        if (quote < i) quote = indexOr(chunk, QUOTE, i, n);
        if (backslash < i) backslash = indexOr(chunk, BACKSLASH, i, n);
        if (backslash < quote) {
          this.escaped = true;
          i = backslash + 1;
        } else {
          this.inString = quote === n;
          if (!this.inString && this.name) {
            const duplicate = this.endName(chunk, start, quote);
            if (duplicate) return duplicate;
          }
          i = quote + 1;
        }
        continue;
      }
      const byte = chunk[i++]!;
      if (this.number !== undefined) {
        // Digits, sign, point and exponent go on; anything else ends the literal.
        if (isNumberByte(byte)) {
          if (this.number.length < LONGEST_NUMBER) this.number += String.fromCharCode(byte);
          continue;
        }
        this.endNumber();
      }
      if ((byte >= DIGIT_0 && byte <= DIGIT_9) || byte === MINUS) {
        this.number = String.fromCharCode(byte);
      } else if (byte === QUOTE) {
        this.inString = true;
        start = i;
        if (this.expectName) this.name = [];
        this.expectName = false;
      } else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
        this.values++;
        const object = byte === OPEN_OBJECT;
        this.containers.push(object ? new Set() : undefined);
        this.path.push(object ? "" : 0);
        this.expectName = object;
        if (this.containers.length > this.maxDepth) return tooDeep(this.maxDepth);
        if (this.values > this.maxValues) return tooManyValues(this.maxValues);
      } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
        this.containers.pop();
        this.path.pop();
        this.expectName = false;
      } else if (byte === COMMA) {
        if (++this.values > this.maxValues) return tooManyValues(this.maxValues);
        const at = this.path.length - 1;
        this.expectName = this.containers[at] !== undefined;
        if (typeof this.path[at] === "number") this.path[at]++;
      }
    }
    // A name that goes on in the next chunk.
    if (this.inString) this.name?.push(Buffer.from(chunk.subarray(start, n)));
    return undefined;
  }

  /** Ends the number literal just read: notes it when it is an integer a float would change. */
  private endNumber(): void {
    const text = this.number!;
    this.number = undefined;
    if (text.length < 16 || text.length >= LONGEST_NUMBER || !INTEGER.test(text)) return;
    // Deeper than a body may nest it is refused (src/api/json-shape.ts): no path is copied.
    if (this.inexact.length >= MAX_INEXACT_INTEGERS || this.path.length > MAX_JSON_DEPTH) return;
    // Written otherwise once parsed: rounded (`…993` → `…992`), or held exactly but shown with
    // an exponent (2⁷⁰ as `1.1805916207174113e+21`).
    const float = Number(text);
    if (Number.isFinite(float) && String(float) !== text)
      this.inexact.push({ path: [...this.path], text });
  }

  /**
   * Ends the member name just read, given where its bytes end in the chunk it ends in
   * (`chunk[from, to)`): the 422 when its object already has it, else notes it. A name begun in
   * an earlier chunk is decoded whole, so that a character cut between two chunks stays one; a
   * name that is not UTF-8 is left to the parser.
   */
  private endName(chunk: Uint8Array, from: number, to: number): HttpError | undefined {
    const parts = this.name!;
    this.name = undefined;
    const names = this.containers.at(-1);
    if (!names) return undefined;
    const bytes =
      parts.length === 0
        ? chunk.subarray(from, to)
        : Buffer.concat([...parts, chunk.subarray(from, to)]);
    // Bytes that are not UTF-8 are the body's fault, which its parser names (api/json.ts); as
    // U+FFFD here they would read as a name given twice.
    if (!isUtf8(bytes)) return undefined;
    const raw = utf8(bytes, 0, bytes.length);
    const name = raw.includes("\\") ? unescaped(raw) : raw;
    const key = nameKey(name);
    if (names.has(key)) return duplicateName([...this.path.slice(0, -1), name]);
    names.add(key);
    this.path[this.path.length - 1] = name;
    return undefined;
  }
}

/** A JSON integer literal: a sign, then digits without a leading 0. */
const INTEGER = /^-?[1-9][0-9]*$/;

/** Whether `byte` goes on a number literal: a digit, sign, point or exponent. */
function isNumberByte(byte: number): boolean {
  return (
    (byte >= DIGIT_0 && byte <= DIGIT_9) ||
    byte === MINUS ||
    byte === 0x2b || // +
    byte === 0x2e || // .
    byte === 0x65 || // e
    byte === 0x45 // E
  );
}

/** The UTF-8 text of `chunk[from, to)`, decoded in place. */
function utf8(chunk: Uint8Array, from: number, to: number): string {
  return Buffer.isBuffer(chunk)
    ? chunk.toString("utf8", from, to)
    : Buffer.from(chunk.buffer, chunk.byteOffset + from, to - from).toString("utf8");
}

/**
 * Names longer than this are kept in an object's set by their SHA-256: V8 hashes a string of
 * more than 16,383 characters by its length alone, so a set of many long names of one length
 * would take time quadratic in their number (1,000 names of 16,400 characters: 1.9 s).
 */
const LONG_NAME = 1024;

/** How a member name is kept in its object's set of names. */
function nameKey(name: string): string {
  if (name.length <= LONG_NAME) return name;
  return `\u0000${name.length}:${createHash("sha256").update(name).digest("base64")}`;
}

/** A JSON string's text without its escapes; as it is when malformed (the parser says so later). */
function unescaped(raw: string): string {
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

/** The 422 of a name given twice; a long name is cut to its first 200 characters in the reply. */
function duplicateName(path: (string | number)[]): HttpError {
  const loc = path.map((step) =>
    typeof step === "string" && step.length > 200 ? `${step.slice(0, 200)}…` : step,
  );
  return validationError([
    {
      loc: ["body", ...loc],
      msg: `Duplicate name ${JSON.stringify(loc.at(-1))}: this object names the member twice; a JSON parser keeps only the last (RFC 8259 §4), so the body would lose the other; give each one its own name`,
      type: "duplicate_key",
    },
  ]);
}

/** The index of `byte` in `chunk` from `from`, or `n` (its length) when there is none. */
function indexOr(chunk: Uint8Array, byte: number, from: number, n: number): number {
  const at = chunk.indexOf(byte, from);
  return at === -1 ? n : at;
}

function tooDeep(maxDepth: number): HttpError {
  return validationError([
    {
      loc: ["body"],
      msg: `Input is nested too deeply: at most ${MAX_JSON_DEPTH} levels of arrays and objects (this body goes past ${maxDepth})`,
      type: "too_deep",
    },
  ]);
}

function tooManyValues(maxValues: number): HttpError {
  return validationError([
    {
      loc: ["body"],
      msg: `The body holds more than ${maxValues} values (arrays, objects and their elements): more than a model's context can hold; send less`,
      type: "too_many_values",
    },
  ]);
}
