import { Ajv, type JSONSchemaType, type ValidateFunction } from "ajv";
import {
  MAX_CHOICE_OPTIONS,
  MAX_QUESTIONS,
  MAX_SCORE_LEVELS,
  MIN_CHOICE_OPTIONS,
  MIN_SCORE_LEVELS,
} from "../protocol/limits.js";
import type { SystemOneRequest } from "../protocol/schemas.js";

/**
 * A compiled check (Ajv, JSON Schema draft-07) of the common request body: `model`, `state` and
 * 1–16 questions with no other fields and no media. It is stricter than
 * {@link SystemOneRequestSchema}: every body it accepts, zod accepts and returns unchanged (zod
 * strips unknown fields, and this schema admits none), so a body that passes skips zod; any
 * other body (media, unknown fields, or invalid) goes through zod, which also writes the 422
 * details. test/fast-check.test.ts holds the two to that on generated bodies. The one difference:
 * an object inside the state keeps a `__proto__` key, which zod drops.
 *
 * Why: on this 2-core VM a request reaches the server with cold caches (it waited in the
 * client, or the model just ran), and there zod's walk of a 16-question × 8-option body took
 * 0.27 ms, this check 0.07 ms (1 question × 2 options: 0.19 against 0.04). Through the whole app
 * (Fastify on loopback, a stand-in model that computes 400 ms per request, 40 requests, medians,
 * 2026-11-23): the server's time around `decide` (Server-Timing `app` − `decide`) went from
 * 0.65 to 0.45 ms and the client's overhead over `decide` from 2.15–2.26 to 1.92–1.94 ms for
 * 16 × 8; for 1 × 2 from 0.46–0.51 to 0.38 and from 1.89–2.00 to 1.77–1.82 ms.
 */

/**
 * Text: a non-empty string, array or object (zod's `TextValue`). Each of `minLength`, `minItems`
 * and `minProperties` applies to its own type only, so one schema does it without an `anyOf`.
 */
const TEXT = { type: ["string", "array", "object"], minLength: 1, minItems: 1, minProperties: 1 };
const NULLABLE_TEXT = { ...TEXT, type: ["null", ...TEXT.type] };

/**
 * A question or option id: non-empty, and not `__proto__` (JSON.parse makes it an own key; zod
 * drops it, and it would not survive as a key of the answers).
 */
const ID = { type: "string", minLength: 1, not: { const: "__proto__" } };

/**
 * One question type: `type` and optional `instructions`, its `criteria` (required when the type
 * needs them), nothing else.
 */
function questionOf(type: string, criteria: object, criteriaRequired: boolean) {
  return {
    type: "object",
    required: criteriaRequired ? ["type", "criteria"] : ["type"],
    additionalProperties: false,
    properties: { type: { const: type }, instructions: NULLABLE_TEXT, criteria },
  };
}

const CHOICE = questionOf(
  "choice",
  {
    type: "object",
    minProperties: MIN_CHOICE_OPTIONS,
    maxProperties: MAX_CHOICE_OPTIONS,
    propertyNames: ID,
    additionalProperties: NULLABLE_TEXT,
  },
  true,
);

const NOUL = {
  ...questionOf(
    "noul",
    {
      anyOf: [
        { type: "null" },
        {
          type: "object",
          additionalProperties: false,
          properties: { true: NULLABLE_TEXT, false: NULLABLE_TEXT },
        },
      ],
    },
    false,
  ),
  // Instructions, or a criterion for true or for false (zod's superRefine).
  anyOf: [
    { type: "object", required: ["instructions"], properties: { instructions: TEXT } },
    ...(["true", "false"] as const).map((side) => ({
      type: "object",
      required: ["criteria"],
      properties: {
        criteria: { type: "object", required: [side], properties: { [side]: TEXT } },
      },
    })),
  ],
};

const SCORE = questionOf(
  "score",
  { type: "array", minItems: MIN_SCORE_LEVELS, maxItems: MAX_SCORE_LEVELS, items: NULLABLE_TEXT },
  true,
);

/** The JSON Schema of the common body. */
const COMMON_REQUEST_SCHEMA = {
  type: "object",
  required: ["model", "state", "questions"],
  additionalProperties: false,
  properties: {
    model: { type: "string", minLength: 1 },
    // Any JSON value: the body came from JSON.parse. (Unlike zod, this keeps a `__proto__` key
    // inside the state as the caller sent it.)
    state: {},
    questions: {
      type: "object",
      minProperties: 1,
      maxProperties: MAX_QUESTIONS,
      propertyNames: ID,
      additionalProperties: {
        type: "object",
        required: ["type"],
        properties: { type: { enum: ["choice", "noul", "score"] } },
        discriminator: { propertyName: "type" },
        oneOf: [CHOICE, NOUL, SCORE],
      },
    },
  },
} as const;

let compiled: ValidateFunction | undefined;

/**
 * Whether a parsed JSON body is a common request that zod would accept unchanged (see above).
 * `false` says nothing about validity: such a body goes to zod. Compiles on first use (~10 ms).
 * @param body a value from `JSON.parse` (not arbitrary JavaScript: no `undefined`, functions or
 *   class instances).
 */
export function isCommonRequest(body: unknown): body is SystemOneRequest {
  compiled ??= new Ajv({ strict: true, allowUnionTypes: true, discriminator: true }).compile(
    COMMON_REQUEST_SCHEMA as unknown as JSONSchemaType<unknown>,
  );
  return compiled(body);
}
