import type { z } from "zod";

/** One entry of a 422 body, FastAPI's shape: where (`loc` starting with "body"), what, and a type. */
export interface ValidationDetail {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/** An error the API answers with a status and a JSON body; never logged as a fault. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body === "object" && body !== null ? JSON.stringify(body) : String(body));
    this.name = "HttpError";
  }
}

/** 422 with a `detail` list. */
export function validationError(detail: ValidationDetail[]): HttpError {
  return new HttpError(422, { detail });
}

/** A non-validation error: `{"detail": {"error_type", "message"}}`. */
export function apiError(
  statusCode: number,
  errorType: string,
  message: string,
  headers: Record<string, string> = {},
): HttpError {
  return new HttpError(statusCode, { detail: { error_type: errorType, message } }, headers);
}

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
 * reported at the question's `type`, and unions of text report one message, not one per branch.
 */
export function detailsFromZod(issues: readonly z.core.$ZodIssue[]): ValidationDetail[] {
  return issues.map((issue) => {
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
      msg: missing ? "Field required" : issue.message,
      type: discriminator ? "union_tag_invalid" : issueType(issue),
    };
  });
}
