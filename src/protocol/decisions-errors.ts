import type { z } from "zod";
import { Errors, HttpError, type ErrorBody, type ValidationDetail } from "./errors.js";
import type { OpenAiErrorBody } from "./decisions-response.js";

/**
 * Errors of `POST /v1/decisions` in OpenAI's shape, `{"error": {message, type, param, code}}`,
 * with the statuses the official SDKs map to their exceptions (400 `BadRequestError`, 401
 * `AuthenticationError`, 404 `NotFoundError`, 422 `UnprocessableEntityError`, 429
 * `RateLimitError`, 5xx `InternalServerError`). The app's one error table (./errors.ts) decides
 * every status and message; this module re-shapes its answers for this wire: `code` is the
 * table's `error_type` (the same word on both wires, and in the metrics), `type` OpenAI's
 * category of the status, `param` where in the body (`questions[2].choices`).
 */

/** OpenAI's error `type` of each status this wire answers; any other 4xx is `invalid_request_error`. */
export const OPENAI_ERROR_TYPES: Readonly<Record<number, string>> = {
  401: "authentication_error",
  403: "permission_error",
  404: "invalid_request_error",
  429: "rate_limit_error",
  500: "server_error",
  502: "server_error",
  503: "server_error",
};

/** The table's `error_type`s whose OpenAI `type` is not their status's. */
const TYPE_BY_ERROR_TYPE: Readonly<Record<string, string>> = {
  [Errors.allowanceExhausted.type]: "insufficient_quota",
};

/** The errors only this wire answers: OpenAI `code` → status and `type`. */
export const DecisionsErrors = {
  /** The body does not match the wire's schema, or breaks one of its rules. */
  invalidRequest: { status: 400, type: "invalid_request_error" },
  /** The `model` names no served model (OpenAI answers 404 here, as the SDKs expect). */
  modelNotFound: { status: 404, type: "invalid_request_error", code: "model_not_found" },
  /** The input does not fit the model's context (OpenAI's code for it). */
  contextLengthExceeded: {
    status: 400,
    type: "invalid_request_error",
    code: "context_length_exceeded",
  },
  /** The questions together would put more tokens through the model than one request may. */
  tooManyTokens: { status: 400, type: "invalid_request_error", code: "too_many_tokens" },
  /** An image whose data cannot be decoded as an image: well-formed, but not processable. */
  invalidImage: { status: 422, type: "invalid_request_error", code: "invalid_image" },
} as const;

/**
 * An error of this wire, its body in OpenAI's shape.
 * @param spec - the status and type, e.g. `DecisionsErrors.modelNotFound`
 * @param message - for people
 * @param param - where in the body (`questions[0].choices`), `null` for the whole request
 * @param code - for programs; default the spec's own code
 * @example throw decisionsError(DecisionsErrors.invalidRequest, "one image per request", "input[2].content[0]", "too_many_images");
 */
export function decisionsError(
  spec: { readonly status: number; readonly type: string; readonly code?: string },
  message: string,
  param: string | null,
  code?: string,
): HttpError {
  const body: OpenAiErrorBody = {
    error: { message, type: spec.type, param, code: code ?? spec.code ?? null },
  };
  return new HttpError(spec.status, body);
}

/**
 * A path into the body as OpenAI names a parameter: keys joined by dots, indexes in brackets.
 * @example paramOf(["body", "questions", 0, "choices", 1]) // → "questions[0].choices[1]"
 */
export function paramOf(path: readonly PropertyKey[]): string | null {
  let param = "";
  for (const key of path[0] === "body" ? path.slice(1) : path) {
    if (typeof key === "number") param += `[${key}]`;
    else param += param === "" ? String(key) : `.${String(key)}`;
  }
  return param === "" ? null : param;
}

/**
 * An answer of the app's error handler (System One's shapes, ./errors.ts) in this wire's shape.
 * A 422 list (a body that is not JSON, nested too deeply, …) becomes a 400 naming its first
 * place as `param` (`null` for a body that is not JSON: its place is a character offset, which the
 * message names, not a parameter); `{"detail": {error_type, message}}` keeps its status, its `error_type` becoming `code`;
 * a body already in OpenAI's shape, or one in neither shape, is left as it is.
 * @returns the status and body to send
 * @example
 * ```ts
 * toOpenAiError(429, { detail: { error_type: "concurrency_limit", message: "…" } });
 * // → { status: 429, body: { error: { type: "rate_limit_error", code: "concurrency_limit", param: null, message: "…" } } }
 * ```
 */
export function toOpenAiError(status: number, body: unknown): { status: number; body: unknown } {
  const detail = (body as { detail?: unknown } | null | undefined)?.detail;
  if (Array.isArray(detail) && detail.length > 0) {
    const details = detail as ValidationDetail[];
    const first = details[0]!;
    const param = first.type === "json_invalid" ? null : paramOf(first.loc);
    return {
      status: DecisionsErrors.invalidRequest.status,
      body: {
        error: {
          message: details.map((d) => d.msg).join("; "),
          type: DecisionsErrors.invalidRequest.type,
          param,
          code: first.type,
        },
      } satisfies OpenAiErrorBody,
    };
  }
  if (typeof detail === "object" && detail !== null) {
    const { error_type: code, message } = (detail as ErrorBody["detail"]) ?? {};
    return {
      status,
      body: {
        error: {
          message: String(message ?? ""),
          type:
            TYPE_BY_ERROR_TYPE[code] ??
            OPENAI_ERROR_TYPES[status] ??
            (status >= 500 ? "server_error" : "invalid_request_error"),
          param: null,
          code: typeof code === "string" ? code : null,
        },
      } satisfies OpenAiErrorBody,
    };
  }
  return { status, body };
}

/** OpenAI-style codes for zod's issues. */
function codeOf(issue: z.core.$ZodIssue): string {
  const own = (issue as { params?: { code?: unknown } }).params?.code;
  if (typeof own === "string") return own;
  switch (issue.code) {
    case "invalid_type":
      return issue.input === undefined ? "missing_required_parameter" : "invalid_type";
    case "invalid_union":
      return "invalid_type";
    case "too_small":
    case "too_big":
      return "invalid_value";
    default:
      return "invalid_value";
  }
}

/**
 * The issue of a union that says most: a union over `string | array` reports every branch's
 * issues; the branch that failed deepest (its type matched, something inside did not) is the one
 * the caller meant. A discriminated union's miss is its own issue.
 */
function innermost(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== "invalid_union") return issue;
  const branches = (issue as { errors?: z.core.$ZodIssue[][] }).errors ?? [];
  let best: z.core.$ZodIssue | undefined;
  let depth = 0;
  for (const branch of branches) {
    const first = branch[0];
    if (!first) continue;
    const typeMiss = first.code === "invalid_type" && first.path.length === 0;
    const d = typeMiss ? 0 : first.path.length + 1;
    if (d > depth) {
      depth = d;
      best = { ...first, path: [...issue.path, ...first.path] };
    }
  }
  return best ? innermost(best) : issue;
}

/**
 * Zod's verdict on a body as one OpenAI error: the first issue (inside unions, the branch the
 * caller meant), `param` where it is, its message prefixed with the place.
 * @param issues - from a failed `DecisionsRequestSchema.safeParse(body, { reportInput: true })`
 * @returns the 400 to throw
 * @example
 * ```ts
 * invalidRequestFromZod(DecisionsRequestSchema.safeParse({}, { reportInput: true }).error!.issues);
 * // → 400 { error: { param: "model", code: "missing_required_parameter", … } }
 * ```
 */
export function invalidRequestFromZod(issues: readonly z.core.$ZodIssue[]): HttpError {
  const issue = innermost(issues[0]!);
  const param = paramOf(issue.path);
  const missing = issue.code === "invalid_type" && issue.input === undefined;
  const message = missing ? "Field required" : issue.message;
  return decisionsError(
    DecisionsErrors.invalidRequest,
    param === null ? message : `${param}: ${message}`,
    param,
    codeOf(issue),
  );
}
