import { validationError } from "../protocol/errors.js";

/**
 * The content types parsed as JSON: `application/json` and `application/<x>+json`, any case,
 * with or without parameters (`; charset=utf-8`). Fastify tests it against the whole header.
 */
export const JSON_CONTENT_TYPE = /^application\/([\w.+-]*\+)?json\s*(;|$)/i;

/**
 * Parses a JSON request body.
 * @throws {@link HttpError} 422 with `detail[]` (FastAPI's shape, the API's convention for a body it
 *   cannot use): `type: "json_invalid"` at `loc: ["body", <character offset>]`, whose `msg` says
 *   where the syntax breaks (line, column and offset); `type: "missing"` at `["body"]` for an
 *   empty body.
 */
export function parseJsonBody(text: string): unknown {
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
