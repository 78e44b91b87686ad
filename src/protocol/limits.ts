/**
 * The limits of `POST /v1/systemone` (System One API docs; jevcompat SPEC §3). The request
 * schemas (./schemas.ts) enforce them; clients and the console read them from here.
 */

/** Most questions in one request; the least is 1. */
export const MAX_QUESTIONS = 16;
/** Fewest options of a `choice` question. */
export const MIN_CHOICE_OPTIONS = 2;
/** Most options of a `choice` question. */
export const MAX_CHOICE_OPTIONS = 255;
/** Fewest levels of a `score` question. */
export const MIN_SCORE_LEVELS = 2;
/** Most levels of a `score` question. */
export const MAX_SCORE_LEVELS = 10;

/**
 * Deepest nesting of arrays and objects accepted anywhere in a request body; the body itself is
 * level 1. Deeper bodies get 422 `too_deep`.
 */
export const MAX_JSON_DEPTH = 64;

/** Default largest request body, in bytes (16 MiB), after decompression. */
export const DEFAULT_BODY_LIMIT = 16 * 1024 * 1024;

/**
 * A zod error message for a count bound that names the count sent, for both wires' schemas.
 * @param message - the bound, e.g. "A choice needs 2 to 255 choices"
 * @returns a zod `error` function: `message, got N` for an array input, else `message`
 * @example `z.array(x).max(255, { error: countBoundError("A choice needs 2 to 255 choices") })`
 */
export const countBoundError = (message: string) => (issue: { input?: unknown }) =>
  Array.isArray(issue.input) ? `${message}, got ${issue.input.length}` : message;
