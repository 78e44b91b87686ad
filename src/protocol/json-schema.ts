import { z } from "zod";
import { jsonSchemaExtras, SystemOneRequestSchema } from "./schemas.js";

/** A JSON Schema document, draft-07. */
export type JsonSchema = Record<string, unknown>;

/**
 * The JSON Schema (draft-07) of the request body of `POST /v1/systemone`, generated from
 * {@link SystemOneRequestSchema} as zod reads input, with each refinement's keywords
 * ({@link jsonSchemaExtras}) added, so that it accepts exactly the bodies zod accepts. Any-JSON
 * values (the state, structured text) are left unchecked: the body comes from `JSON.parse`.
 * Unknown fields are allowed, as zod allows them (it strips them; readers ignore them).
 *
 * Compile it once (src/api/validate.ts); test/request-schema.test.ts holds it to zod's verdict.
 * @returns a fresh document on each call
 * @example
 * ```ts
 * const validate = new Ajv({ discriminator: true, allowUnionTypes: true }).compile(requestJsonSchema());
 * ```
 */
export function requestJsonSchema(): JsonSchema {
  const schema = z.toJSONSchema(SystemOneRequestSchema, {
    io: "input",
    target: "draft-7",
    unrepresentable: "throw",
    override: ({ zodSchema, jsonSchema }) => {
      const extra = jsonSchemaExtras.get(zodSchema as unknown as z.ZodType);
      if (!extra) return;
      const { replace, ...keywords } = extra;
      if (replace) {
        for (const key of Object.keys(jsonSchema)) delete (jsonSchema as JsonSchema)[key];
        Object.assign(jsonSchema, replace);
      } else Object.assign(jsonSchema, keywords);
    },
  }) as JsonSchema & { definitions?: Record<string, JsonSchema> };
  // Definitions only the replaced schemas used are left out.
  const { definitions = {}, ...rest } = schema;
  const text = JSON.stringify(rest);
  const used = Object.entries(definitions).filter(([name]) =>
    text.includes(`"#/definitions/${name}"`),
  );
  return used.length > 0 ? { ...rest, definitions: Object.fromEntries(used) } : rest;
}
