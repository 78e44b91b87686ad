/**
 * The paths of the API's wires, spelled once: the server registers its routes on them, the
 * client and the pass-through backend call them, the OpenAPI document lists them.
 *
 * @packageDocumentation
 */

/** System One's decision operation: `POST` a state and 1–16 named questions. */
export const SYSTEMONE_PATH = "/v1/systemone";

/** OpenAI's Decisions operation: `POST` an input and 1–400 questions. */
export const DECISIONS_PATH = "/v1/decisions";
