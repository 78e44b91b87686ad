import type { ValidationDetail } from "../protocol/errors.js";
import { MAX_JSON_DEPTH } from "../protocol/limits.js";

/**
 * Checks on a parsed body that the validator (./validate.ts) and zod run behind, so neither
 * recurses into a value too deep for the stack:
 * - nesting at most {@link MAX_JSON_DEPTH} deep (deeper states overflowed the prompt
 *   renderer's stack);
 * - finite numbers only (`1e999999` parses as Infinity, which JSON cannot carry);
 * - no question or option id `__proto__` (JSON.parse keeps it as an own key; zod would drop it
 *   silently, leaving the question unanswered).
 */

/** A container being walked: its keys (objects) and the index of the next child to visit. */
interface Frame {
  readonly container: unknown[] | Record<string, unknown>;
  readonly keys: string[] | undefined;
  next: number;
}

/**
 * The problems of a parsed JSON body, as 422 details (empty when there are none). Walks the value
 * iteratively with a stack of the containers it is in, so any depth is safe to check and a node
 * costs no allocation; a problem's path is read off that stack when it is found. The first
 * problem of each kind is reported, in document order.
 * @param body - a value from `JSON.parse`
 * @returns one detail per kind of problem found: `too_deep`, `finite_number`, `value_error`
 * @example
 * ```ts
 * jsonShapeProblems(JSON.parse("[".repeat(65) + "]".repeat(65))); // → [{ type: "too_deep", … }]
 * ```
 */
export function jsonShapeProblems(body: unknown): ValidationDetail[] {
  const details: ValidationDetail[] = [];
  let deep = false;
  let infinite = false;
  const frames: Frame[] = [];
  const loc = () => ["body", ...frames.map((f) => (f.keys ? f.keys[f.next - 1]! : f.next - 1))];
  let value: unknown = body;
  for (;;) {
    if (typeof value === "number") {
      if (!infinite && !Number.isFinite(value)) {
        infinite = true;
        details.push({
          loc: loc(),
          msg: "Input should be a finite number (this one is too large for a 64-bit float)",
          type: "finite_number",
        });
      }
    } else if (typeof value === "object" && value !== null) {
      if (frames.length < MAX_JSON_DEPTH)
        frames.push(
          Array.isArray(value)
            ? { container: value, keys: undefined, next: 0 }
            : { container: value as Record<string, unknown>, keys: Object.keys(value), next: 0 },
        );
      else if (!deep) {
        deep = true;
        details.push({
          loc: loc(),
          msg: `Input is nested too deeply: at most ${MAX_JSON_DEPTH} levels of arrays and objects`,
          type: "too_deep",
        });
      }
    }
    if (deep && infinite) break;
    // The next value: the next child of the innermost container that has one left.
    let top = frames.at(-1);
    while (top && top.next >= (top.keys ?? (top.container as unknown[])).length) {
      frames.pop();
      top = frames.at(-1);
    }
    if (!top) break;
    const at = top.next++;
    value = top.keys
      ? (top.container as Record<string, unknown>)[top.keys[at]!]
      : (top.container as unknown[])[at];
  }
  return [...details, ...reservedIds(body)];
}

/** `__proto__` as a question id or a choice's option id. */
function reservedIds(body: unknown): ValidationDetail[] {
  const own = (o: unknown): o is Record<string, unknown> =>
    typeof o === "object" && o !== null && !Array.isArray(o);
  if (!own(body) || !own(body.questions)) return [];
  const details: ValidationDetail[] = [];
  const reserved = (loc: (string | number)[], what: string) =>
    details.push({
      loc,
      msg: `"__proto__" cannot be ${what} id (it is reserved in JavaScript objects); use another id`,
      type: "value_error",
    });
  for (const id of Object.keys(body.questions)) {
    if (id === "__proto__") reserved(["body", "questions", id], "a question");
    const question = body.questions[id];
    if (own(question) && own(question.criteria) && Object.hasOwn(question.criteria, "__proto__"))
      reserved(["body", "questions", id, "criteria", "__proto__"], "an option");
  }
  return details;
}
