import { z } from "zod";
import { validationError, type HttpError } from "../protocol/errors.js";
import { detailsFromZod } from "../protocol/validation.js";

/**
 * Request schemas of the console's JSON API (`/console/api/…`). Failures become 422 with
 * `detail[]` whose `loc` starts with where the value was: "body", "query" or "path".
 */

/** Longest key label, in characters. */
export const MAX_LABEL_LENGTH = 100;
/** Most days one usage request covers. */
export const MAX_USAGE_DAYS = 366;
/** Days of usage when none are asked for. */
export const DEFAULT_USAGE_DAYS = 30;

const AccountName = z.string().min(1, "An account name should not be empty");

/**
 * Characters a label may not hold: control characters (a terminal acts on them when
 * `decisiond keys list` prints the label), lone surrogates (not text) and bidirectional
 * overrides (they reorder what is shown around them).
 */
export const UNPRINTABLE = /[\p{Cc}\p{Cs}\u202A-\u202E\u2066-\u2069]/u;

/**
 * A key's label, as the console and `decisiond keys create` take it: trimmed, at most
 * {@link MAX_LABEL_LENGTH} characters, nothing {@link UNPRINTABLE}; an empty one is none.
 */
export const KeyLabel = z
  .string()
  .trim()
  .max(MAX_LABEL_LENGTH, `A label has at most ${MAX_LABEL_LENGTH} characters`)
  .refine(
    (label) => !UNPRINTABLE.test(label),
    "A label may not hold control characters, lone surrogates or bidirectional overrides",
  )
  .optional()
  .transform((label) => (label === "" ? undefined : label));

/** `POST /console/api/keys`: the account (admin only; a key creates in its own) and a label. */
export const CreateKeyBody = z.strictObject({
  account: AccountName.optional(),
  label: KeyLabel,
});

/** `GET /console/api/keys?account=`. */
export const KeysQuery = z.strictObject({ account: AccountName.optional() });

/** The one message of a `days` that is not 1 to {@link MAX_USAGE_DAYS}, whatever it is. */
const DAYS_MESSAGE = `days must be a whole number of days from 1 to ${MAX_USAGE_DAYS}`;

/** `GET /console/api/usage?account=&days=`. */
export const UsageQuery = z.strictObject({
  account: AccountName.optional(),
  days: z.coerce
    .number({ error: DAYS_MESSAGE })
    .int(DAYS_MESSAGE)
    .min(1, DAYS_MESSAGE)
    .max(MAX_USAGE_DAYS, DAYS_MESSAGE)
    .default(DEFAULT_USAGE_DAYS),
});

/** The body of a route that takes none: absent, empty, or `{}`. */
export const NoBody = z.strictObject(
  {},
  { error: "This route takes no body: send none (an empty one, or {}, is none)" },
);

/** `/console/api/keys/:id/…`. */
export const KeyParams = z.strictObject({
  // Digits only: `Number()` would also read `1e3`, `0x10` or ` 7` as a key id.
  id: z
    .string()
    .regex(/^[0-9]+$/, "A key id is a whole number ≥ 1, in digits")
    .max(16, `A key id is at most ${Number.MAX_SAFE_INTEGER}`)
    .transform(Number)
    .pipe(
      z
        .number()
        .int("A key id is a whole number")
        .positive("A key id is a whole number ≥ 1")
        .max(Number.MAX_SAFE_INTEGER, `A key id is at most ${Number.MAX_SAFE_INTEGER}`),
    ),
});

/**
 * Parses `value` found at `where`.
 * @throws {@link HttpError} 422 with one detail per problem, `loc` = [where, ...path].
 */
export function parseOr422<T extends z.ZodType>(
  schema: T,
  value: unknown,
  where: "body" | "query" | "path",
): z.output<T> {
  const parsed = schema.safeParse(value ?? {}, { reportInput: true });
  if (parsed.success) return parsed.data;
  const error: HttpError = validationError(
    detailsFromZod(parsed.error.issues).map((d) => ({ ...d, loc: [where, ...d.loc.slice(1)] })),
  );
  throw error;
}
