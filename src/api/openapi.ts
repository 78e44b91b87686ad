import { z } from "zod";
import { DecisionsRequestSchema } from "../protocol/decisions.js";
import {
  DecisionSchema,
  OpenAiErrorSchema,
  OpenAiModelSchema,
} from "../protocol/decisions-response.js";
import { Errors } from "../protocol/errors.js";
import { DECISIONS_PATH, SYSTEMONE_PATH } from "../protocol/routes.js";
import {
  ErrorSchema,
  ModelEntrySchema,
  QuestionSchema,
  SystemOneRequestSchema,
  SystemOneResponseSchema,
  ValidationErrorSchema,
} from "../protocol/schemas.js";

/**
 * `GET /openapi.json`: an OpenAPI 3.1 document whose schemas are generated (`z.toJSONSchema`)
 * from the same zod schemas that validate requests, so the two cannot drift. Checks zod cannot
 * express in JSON Schema (e.g. 1–16 questions, 2–255 options) are stated in the descriptions.
 */

/** Options of {@link openApiDocument}. */
export interface OpenApiOptions {
  /** decisiond's version. */
  readonly version: string;
  /** Whether requests need `Authorization: Bearer <key>`. */
  readonly auth: boolean;
  /** Names the service answers to, for the `model` field's description. */
  readonly models?: readonly string[];
}

type JsonSchema = Record<string, unknown>;

const REF_BASE = "#/components/schemas/";

/**
 * The component schemas: request-side schemas as zod reads input, response-side as zod writes
 * output. Recursive pieces (any-JSON values) that zod emits under a shared `$defs` become
 * components of their own, identical ones merged (`JsonValue`).
 */
export function componentSchemas(): Record<string, JsonSchema> {
  const input = z.registry<{ id: string }>();
  input.add(SystemOneRequestSchema, { id: "SystemOneRequest" });
  input.add(QuestionSchema, { id: "Question" });
  input.add(DecisionsRequestSchema, { id: "DecisionsRequest" });
  const output = z.registry<{ id: string }>();
  output.add(SystemOneResponseSchema, { id: "SystemOneResponse" });
  output.add(ModelEntrySchema, { id: "ModelEntry" });
  output.add(ValidationErrorSchema, { id: "ValidationError" });
  output.add(ErrorSchema, { id: "Error" });
  output.add(DecisionSchema, { id: "Decision" });
  output.add(OpenAiModelSchema, { id: "OpenAiModel" });
  output.add(OpenAiErrorSchema, { id: "OpenAiError" });

  const schemas: Record<string, JsonSchema> = {};
  const shared = new Map<string, string>(); // canonical text → component name
  for (const [registry, io, tag] of [
    [input, "input", "in"],
    [output, "output", "out"],
  ] as const) {
    const generated = z.toJSONSchema(registry, {
      io,
      target: "draft-2020-12",
      unrepresentable: "any",
      uri: (id) => REF_BASE + id,
    }) as { schemas: Record<string, JsonSchema> };
    const { __shared, ...named } = generated.schemas;
    // Name the shared definitions, merging ones equal up to their own name.
    const renames = new Map<string, string>();
    const defs = (__shared as { $defs?: Record<string, JsonSchema> } | undefined)?.$defs ?? {};
    const fresh: [string, JsonSchema][] = [];
    for (const [key, schema] of Object.entries(defs)) {
      const from = `${REF_BASE}__shared#/$defs/${key}`;
      const canonical = JSON.stringify(schema).split(JSON.stringify(from)).join('"#self"');
      let name = shared.get(canonical);
      if (!name) {
        name = shared.size === 0 ? "JsonValue" : `Shared_${tag}_${key}`;
        shared.set(canonical, name);
        fresh.push([name, schema]);
      }
      renames.set(from, REF_BASE + name);
    }
    for (const [name, schema] of fresh) schemas[name] = rewriteRefs(schema, renames);
    for (const [name, schema] of Object.entries(named)) {
      const rest = { ...schema };
      delete rest.$schema;
      delete rest.$id;
      schemas[name] = rewriteRefs(rest, renames);
    }
  }
  return schemas;
}

function rewriteRefs<T>(value: T, renames: ReadonlyMap<string, string>): T {
  if (renames.size === 0) return value;
  return JSON.parse(JSON.stringify(value), (key, v: unknown) =>
    key === "$ref" && typeof v === "string" ? (renames.get(v) ?? v) : v,
  ) as T;
}

const json = (schema: string) => ({ "application/json": { schema: { $ref: REF_BASE + schema } } });
const error = (description: string) => ({ description, content: json("Error") });
const openAiError = (description: string) => ({ description, content: json("OpenAiError") });

/** The OpenAPI 3.1 document of the service. */
export function openApiDocument(options: OpenApiOptions): Record<string, unknown> {
  const security = options.auth ? [{ bearer: [] }] : [];
  const unauthorized = options.auth
    ? { "401": error(`Missing, unknown or revoked API key (\`${Errors.unknownKey.type}\`)`) }
    : {};
  return {
    openapi: "3.1.0",
    info: {
      title: "decisiond",
      version: options.version,
      description:
        "Typed answers (choice, noul, score) read from a language model's next-token probabilities, in the shapes of the System One API.",
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    paths: {
      [SYSTEMONE_PATH]: {
        post: {
          operationId: "systemOne",
          summary: "Answer 1–16 questions about a state",
          description:
            "One answer per question. Limits: 1–16 questions; a choice has 2–255 options; a score 2–10 levels; " +
            "one image or one video. Bodies may be sent with Content-Encoding gzip, deflate, br or zstd; the body limit " +
            "applies to the decompressed size." +
            (options.models?.length ? ` Models: ${options.models.join(", ")}.` : ""),
          security,
          requestBody: { required: true, content: json("SystemOneRequest") },
          responses: {
            "200": {
              description: "The answers",
              headers: { "x-request-id": { schema: { type: "string" } } },
              content: json("SystemOneResponse"),
            },
            "400": error("The body's Content-Encoding data cannot be decoded"),
            ...unauthorized,
            "408": error(
              `The body was not received in full within the request timeout (\`${Errors.requestTimeout.type}\`)`,
            ),
            "413": error(
              `The body is larger than the body limit (\`${Errors.requestTooLarge.type}\`)`,
            ),
            "415": error(
              "The body is not `application/json`, declares a charset other than UTF-8, or its Content-Encoding is unsupported",
            ),
            "422": {
              description:
                'The body is not JSON (`json_invalid` at `["body", offset]`) or does not validate; `detail[].loc` says where. ' +
                "A state too long for the context is `state_too_long`; questions that together exceed the tokens one " +
                "request may put through the model, `too_many_tokens`",
              content: json("ValidationError"),
            },
            "429": {
              description:
                `The account has a request in flight (\`${Errors.concurrencyLimit.type}\`) ` +
                `or its allowance is spent (\`${Errors.allowanceExhausted.type}\`)`,
              headers: {
                "retry-after": { schema: { type: "integer", minimum: 1 }, description: "seconds" },
                "retry-after-ms": {
                  schema: { type: "integer", minimum: 1 },
                  description: "milliseconds",
                },
              },
              content: json("Error"),
            },
            "500": error(
              `An internal fault (\`${Errors.internal.type}\`); the message names the request id`,
            ),
          },
        },
      },
      [DECISIONS_PATH]: {
        post: {
          operationId: "createDecision",
          summary: "Answer 1–400 questions about an input (OpenAI's Decisions API)",
          description:
            "OpenAI's Decisions wire, as the official `openai` SDKs type it (`client.decisions.create`), answered by " +
            "the same core as `/v1/systemone`. Limits: 1–400 questions, bounded by the tokens one request may put " +
            "through the model; a choice has 2–255 unique values (a string or a boolean); a score 2–10 levels; one " +
            "image per request, as a base64 data URL. A question this model cannot answer (an image question on a " +
            'text-only model, a question too long for the context) is answered `{type: "refusal"}`. Every error ' +
            "is `{error: {message, type, param, code}}`; `code` is the `error_type` `/v1/systemone` would name." +
            (options.models?.length ? ` Models: ${options.models.join(", ")}.` : ""),
          security,
          requestBody: { required: true, content: json("DecisionsRequest") },
          responses: {
            "200": {
              description: "The answers, in question order",
              headers: { "x-request-id": { schema: { type: "string" } } },
              content: json("Decision"),
            },
            "400": openAiError(
              "The body is not JSON, does not match the schema (`param` says where), has a second image, an http(s) " +
                "image URL, or does not fit the model's context (`context_length_exceeded`, `too_many_tokens`)",
            ),
            ...(options.auth ? { "401": openAiError("Missing, unknown or revoked API key") } : {}),
            "404": openAiError("The model is not served here (`model_not_found`)"),
            "408": openAiError("The body was not received in full within the request timeout"),
            "413": openAiError("The body is larger than the body limit"),
            "415": openAiError(
              "The body is not `application/json` in UTF-8, or its Content-Encoding is unsupported",
            ),
            "422": openAiError("The image's data cannot be decoded as an image (`invalid_image`)"),
            "429": {
              description:
                "The account has a request in flight on either wire (`concurrency_limit`) or its allowance is spent " +
                "(`allowance_exhausted`, type `insufficient_quota`)",
              headers: {
                "retry-after": { schema: { type: "integer", minimum: 1 }, description: "seconds" },
                "retry-after-ms": {
                  schema: { type: "integer", minimum: 1 },
                  description: "milliseconds",
                },
              },
              content: json("OpenAiError"),
            },
            "500": openAiError("An internal fault; the message names the request id"),
            "503": openAiError(
              "Overloaded, past the deadline, draining, or no engine answered; sent with Retry-After",
            ),
          },
        },
      },
      "/v1/models": {
        get: {
          operationId: "listModels",
          summary: "The models served",
          security: [],
          responses: {
            "200": {
              description: "Served models: System One's `models` and the OpenAI SDKs' `data`",
              content: {
                "application/json": {
                  schema: {
                    type: "object",
                    properties: {
                      models: { type: "array", items: { $ref: REF_BASE + "ModelEntry" } },
                      object: { const: "list" },
                      data: { type: "array", items: { $ref: REF_BASE + "OpenAiModel" } },
                    },
                    required: ["models", "object", "data"],
                  },
                },
              },
            },
          },
        },
      },
      "/v1/models/{model}": {
        get: {
          operationId: "retrieveModel",
          summary: "One model served, as the OpenAI SDKs' `models.retrieve` reads it",
          security: [],
          parameters: [{ name: "model", in: "path", required: true, schema: { type: "string" } }],
          responses: {
            "200": {
              description: "The model",
              content: {
                "application/json": { schema: { $ref: REF_BASE + "OpenAiModel" } },
              },
            },
            "404": openAiError("The model is not served here (`model_not_found`)"),
          },
        },
      },
      "/healthz": {
        get: {
          operationId: "health",
          summary: "Liveness",
          security: [],
          responses: {
            "200": {
              description: "The service is up",
              content: {
                "application/json": {
                  schema: {
                    type: "object",
                    properties: {
                      status: { const: "ok" },
                      models: { type: "array", items: { type: "string" } },
                    },
                    required: ["status"],
                  },
                },
              },
            },
          },
        },
      },
      "/openapi.json": {
        get: {
          operationId: "openapi",
          summary: "This document",
          security: [],
          responses: { "200": { description: "OpenAPI 3.1", content: { "application/json": {} } } },
        },
      },
    },
    components: {
      schemas: componentSchemas(),
      ...(options.auth
        ? {
            securitySchemes: {
              bearer: {
                type: "http",
                scheme: "bearer",
                description: "A decisiond API key (dsk_…)",
              },
            },
          }
        : {}),
    },
  };
}
