import { validationError } from "../protocol/errors.js";

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
