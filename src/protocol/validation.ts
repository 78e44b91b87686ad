import type { z } from "zod";
import type { ValidationDetail } from "./errors.js";

/**
 * Zod's verdict on a request as 422 details, in the words FastAPI/pydantic clients know: the
 * wire's validation vocabulary, shared by the API and the console's API.
 */

/** Zod issue codes → the error `type` names FastAPI/pydantic clients know. */
function issueType(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "invalid_type":
      return issue.input === undefined ? "missing" : `${issue.expected}_type`;
    case "too_small":
      return "too_short";
    case "too_big":
      return "too_long";
    case "invalid_union":
      return "union_type";
    case "invalid_value":
      return "literal_error";
    case "invalid_format":
      return "string_pattern_mismatch";
    case "unrecognized_keys":
      return "extra_forbidden";
    case "invalid_key":
      return "key_error";
    default:
      return "value_error";
  }
}

/**
 * Zod issues as 422 details with `loc` = ["body", ...path]. A discriminated-union miss is
 * reported at the question's `type`, unions of text report one message, not one per branch, and
 * a value of the wrong type only that (not also its schema's checks).
 * @param issues - from a failed `safeParse` (parsed with `reportInput: true`, so a missing field
 *   reads "Field required")
 * @returns one detail per issue, in zod's order
 * @example
 * ```ts
 * detailsFromZod(SystemOneRequestSchema.safeParse({}).error!.issues);
 * // → [{ loc: ["body", "model"], msg: "Field required", type: "missing" }, …]
 * ```
 */
export function detailsFromZod(issues: readonly z.core.$ZodIssue[]): ValidationDetail[] {
  // A value of the wrong type gets that one error: zod also runs the checks of its schema (an
  // array's length on a string) and would report them at the same place.
  const mistyped = new Set(
    issues.filter((i) => i.code === "invalid_type").map((i) => JSON.stringify(i.path)),
  );
  const kept = issues.filter(
    (i) => i.code === "invalid_type" || !mistyped.has(JSON.stringify(i.path)),
  );
  return kept.map((issue) => {
    const path = issue.path.map((p) => (typeof p === "symbol" ? String(p) : p));
    const discriminator =
      issue.code === "invalid_union" &&
      (issue as { note?: string }).note === "No matching discriminator";
    const missing = issue.code === "invalid_type" && issue.input === undefined;
    return {
      loc: [
        "body",
        ...path,
        ...(discriminator && path[path.length - 1] !== "type" ? ["type"] : []),
      ],
      // A bad key (an empty question or option id) says what its own check says.
      msg: missing
        ? "Field required"
        : issue.code === "invalid_key"
          ? (issue.issues[0]?.message ?? issue.message)
          : issue.message,
      type: discriminator ? "union_tag_invalid" : issueType(issue),
    };
  });
}
