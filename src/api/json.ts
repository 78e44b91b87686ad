import { apiError } from "./errors.js";

/**
 * Parses a JSON request body.
 * @throws {HttpError} 400 `invalid_json` whose message says where the syntax breaks
 *   (line, column and character offset when the parser reports one).
 */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === "")
    throw apiError(400, "invalid_json", "the body is empty; send a JSON object");
  try {
    return JSON.parse(text);
  } catch (error) {
    const reason = (error as Error).message;
    const position = /position (\d+)/.exec(reason)?.[1];
    const offset = position !== undefined ? Number(position) : text.length;
    const before = text.slice(0, offset);
    const line = before.split("\n").length;
    const column = offset - before.lastIndexOf("\n");
    const where =
      position !== undefined
        ? `at line ${line}, column ${column} (character ${offset})`
        : `at the end of the body (character ${offset}, line ${line}, column ${column})`;
    throw apiError(400, "invalid_json", `the body is not valid JSON ${where}: ${reason}`);
  }
}
