/**
 * Option ids that read the same: two ids that differ only in their Unicode form (`"café"` as one
 * code point `é`, or as `e` and a combining accent), in spacing (`"yes"` and `"yes "`, one space
 * or two between words) or in invisible characters (a zero-width space, a direction mark) look
 * alike to a caller, and to the model nearly so, and come back as two answers shown the same,
 * each with its own probability. Both wires refuse them.
 */

/**
 * Code points that draw nothing and change no glyph: zero-width space, word joiner and its kin,
 * byte order mark, soft hyphen, combining grapheme joiner, the direction marks, embeddings and
 * isolates, and the control characters other than tab, LF, VT, FF and CR. Not the joiners (ZWJ, ZWNJ),
 * variation selectors or tag characters: those make another glyph (a family emoji, a flag of a
 * country's region, an ideographic variant, a ligature of Arabic or Indic letters); but see
 * {@link IDLE_JOINER}.
 */
/** {@link INVISIBLE}'s code points, as a character class's body. */
const INVISIBLE_CODES = String.raw`\u0000-\u0008\u000e-\u001f\u007f-\u009f\u00ad\u034f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff`;
// eslint-disable-next-line no-misleading-character-class -- escapes of lone code points, listed
const INVISIBLE = new RegExp(`[${INVISIBLE_CODES}]`, "gu");
/**
 * Characters beside which a joiner changes nothing drawn: Latin, Greek and Cyrillic letters,
 * digits, white space and punctuation.
 */
const UNJOINED = String.raw`[\p{Script=Latin}\p{Script=Greek}\p{Script=Cyrillic}\p{Nd}\s\p{P}]`;
/**
 * A joiner (ZWJ, ZWNJ) that joins nothing: between two of {@link UNJOINED} (the first with its
 * combining marks: `"bill\u200ding"` draws as `"billing"`), between one of them and either end of
 * the text, or alone. Beside an emoji, or an Indic or Arabic letter, it makes another glyph
 * (a family, a half form): kept.
 */
const IDLE_JOINER = new RegExp(
  String.raw`(?<=${UNJOINED}\p{M}*|^)[\u200c\u200d]+(?=${UNJOINED}|$)`,
  "gu",
);
/** The joiners, escaped in a message wherever they stand. */
const JOINER = /[\u200c\u200d]/gu;
/** Control characters other than tab, LF, VT, FF and CR: they draw nothing, or garble a terminal. */
// eslint-disable-next-line no-control-regex -- control characters are what it finds
const CONTROL = /[\u0000-\u0008\u000e-\u001f\u007f-\u009f]/u;
/** Direction overrides and embeddings: they reorder how the text after them shows. */
const REORDERING = /[\u202a-\u202e]/u;
/** Direction isolates: LRI, RLI, FSI open one, PDI closes it. */
const ISOLATE = /[\u2066-\u2069]/gu;
/** Runs of white space (Unicode's, no-break spaces included). */
const SPACES = /\s+/gu;
/** White space other than the plain space, written as an escape in a message. */
const OTHER_SPACE = /[^\S ]/gu;
/** A code point that is none of white space, {@link INVISIBLE} and the joiners: one that shows. */
// eslint-disable-next-line no-misleading-character-class -- escapes of lone code points, listed
const SHOWN = new RegExp(String.raw`[^\s\u200c\u200d${INVISIBLE_CODES}]`, "u");

/**
 * Whether non-empty `text` shows nothing: only white space, invisible code points and joiners,
 * so its {@link sameTextKey} is `""`. Stops at the first code point that shows, so a long text is
 * not walked.
 * @example
 * ```ts
 * showsNothing(" \u200b\n"); // → true
 * ```
 */
export function showsNothing(text: string): boolean {
  return text.length > 0 && !SHOWN.test(text);
}

/**
 * The key under which option ids that read the same meet: the id with its invisible code points
 * and its joiners that join nothing ({@link IDLE_JOINER}) dropped, in Unicode normalization form
 * C, runs of white space made one space, and trimmed.
 * @example
 * ```ts
 * sameTextKey(" Yes\u200b  please "); // → "Yes please"
 * ```
 */
export function sameTextKey(id: string): string {
  return id
    .replace(INVISIBLE, "")
    .replace(IDLE_JOINER, "")
    .normalize("NFC")
    .replace(SPACES, " ")
    .trim();
}

/**
 * An id quoted for a message, its invisible code points and its white space other than plain
 * spaces written as `\uXXXX` escapes, so that a reader sees where two ids differ.
 * @example
 * ```ts
 * quoteId("yes\u200b"); // → the 11 characters "yes\u200b" (quotes included)
 * ```
 */
export function quoteId(id: string): string {
  const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
  return JSON.stringify(id)
    .replace(INVISIBLE, escape)
    .replace(JOINER, escape)
    .replace(OTHER_SPACE, escape);
}

/** How two ids that meet under {@link sameTextKey} differ, for a message: "… read the same …". */
export const SAME_TEXT_REASON = "they differ only in Unicode form, spacing or invisible characters";

/**
 * The first pair of `ids` that read the same ({@link sameTextKey}), by index.
 * @returns `[earlier, later]`, or `undefined` when all are distinct
 * @example
 * ```ts
 * sameTextIds(["caf\u00e9", "tea", "cafe\u0301"]); // → [0, 2]
 * ```
 */
export function sameTextIds(ids: readonly string[]): [number, number] | undefined {
  const seen = new Map<string, number>();
  for (const [index, id] of ids.entries()) {
    const text = sameTextKey(id);
    const earlier = seen.get(text);
    if (earlier !== undefined) return [earlier, index];
    seen.set(text, index);
  }
  return undefined;
}

/** Half of a UTF-16 surrogate pair without its other half (code units, no `u` flag). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why `text` cannot be an id or name that an answer echoes and a person reads, or `undefined`
 * when it can:
 * - a lone surrogate (half of a UTF-16 pair: JSON.parse takes one from a `"\ud800"` escape) is not
 *   Unicode text: UTF-8 cannot carry it, and strict JSON parsers refuse an answer that echoes it;
 * - a control character other than white space draws nothing, or garbles the terminal it is
 *   printed to;
 * - a direction override or embedding, or an isolate left open or closed unopened, reorders the
 *   text shown around it (the "Trojan Source" spoof); isolates that close (Fluent puts its
 *   placeables in them) are taken;
 * - text of only spaces and invisible characters shows nothing.
 * @example
 * ```ts
 * notTextReason("ok\ud800"); // → "it holds a lone surrogate (\\ud800 at code unit 2), …"
 * notTextReason("ok \ud83d\ude00"); // → undefined (a whole pair: 😀)
 * notTextReason("\u200b "); // → "it shows nothing: …"
 * ```
 */
export function notTextReason(text: string): string | undefined {
  const at = (match: RegExpExecArray) =>
    `\\u${match[0].charCodeAt(0).toString(16).padStart(4, "0")} at code unit ${match.index}`;
  const surrogate = LONE_SURROGATE.exec(text);
  if (surrogate)
    return `it holds a lone surrogate (${at(surrogate)}), half of a UTF-16 pair and not Unicode text; send the character whole, or leave it out`;
  const control = CONTROL.exec(text);
  if (control)
    return `it holds a control character (${at(control)}), which draws nothing or garbles a terminal; leave it out`;
  const reordering = REORDERING.exec(text) ?? unbalancedIsolate(text);
  if (reordering)
    return `it holds a direction override, embedding or unclosed isolate (${at(reordering)}), which reorders how the text around it shows; leave it out`;
  if (showsNothing(text))
    return "it shows nothing: it holds only spaces or invisible characters; give it a visible name";
  return undefined;
}

/** The first isolate of `text` that is not closed, or closes none; `null` when they pair up. */
function unbalancedIsolate(text: string): RegExpExecArray | null {
  const open: RegExpExecArray[] = [];
  for (const isolate of text.matchAll(ISOLATE)) {
    if (isolate[0] !== "\u2069") open.push(isolate);
    else if (!open.pop()) return isolate;
  }
  return open[0] ?? null;
}

/**
 * What is wrong with `text` as an id or name that an answer echoes, for a message: the text
 * quoted ({@link quoteId}) and {@link notTextReason}; `undefined` when it can be echoed. Both
 * wires word their refusals with it.
 * @example
 * ```ts
 * echoProblem("ok\ud800"); // → '"ok\\ud800" cannot be echoed: it holds a lone surrogate …'
 * ```
 */
export function echoProblem(text: string): string | undefined {
  const reason = notTextReason(text);
  return reason && `${quoteId(text)} cannot be echoed: ${reason}`;
}
