import { describe, expect, it } from "vitest";
import { ClientQuestionSchema } from "../src/protocol/client-question.js";
import { QuestionSchema } from "../src/protocol/schemas.js";

/**
 * The client's question shape (the MCP tool's input) and the server's question schema are
 * declared apart on purpose (the client's has none of the server's limits): these tests keep them
 * from drifting. Why: docs/decisions/089.
 */

/** Each question type of a discriminated union and its fields, sorted. */
function fieldsByType(schema: { options: readonly { shape: Record<string, unknown> }[] }) {
  return Object.fromEntries(
    schema.options.map((option) => {
      const type = (option.shape.type as { value: string }).value;
      return [type, Object.keys(option.shape).sort()];
    }),
  );
}

describe("the client's question shape", () => {
  it("has the server's question types, each with the server's fields", () => {
    expect(fieldsByType(ClientQuestionSchema)).toEqual(fieldsByType(QuestionSchema));
  });

  const valid = [
    { type: "choice", criteria: { billing: "payments", technical: null } },
    {
      type: "choice",
      instructions: { ask: "Which team?", context: ["a", 1] },
      criteria: { a: ["structured", { x: 1 }], b: { when: "b" }, c: "c" },
    },
    { type: "noul", instructions: "Is it a refund?" },
    { type: "noul", instructions: null, criteria: { true: "a refund", false: null } },
    { type: "noul", instructions: "Refund?", criteria: null },
    { type: "noul", criteria: { false: { not: "a refund" } } },
    { type: "score", criteria: ["calm", null, "furious"] },
    { type: "score", instructions: "How urgent?", criteria: Array.from({ length: 10 }, String) },
  ];

  it("takes every question the server's schema takes", () => {
    for (const question of valid) {
      expect(QuestionSchema.safeParse(question).success, JSON.stringify(question)).toBe(true);
      expect(ClientQuestionSchema.parse(question)).toEqual(question);
    }
  });

  it("leaves the server's limits to the server, whose 422 names them", () => {
    const limits = [
      { type: "score", criteria: ["only one level"] },
      { type: "choice", criteria: { alone: null } },
      { type: "noul", instructions: "Refund?", criteria: { yes: "a" } },
      { type: "noul" },
    ];
    for (const question of limits) {
      expect(QuestionSchema.safeParse(question).success, JSON.stringify(question)).toBe(false);
      expect(ClientQuestionSchema.safeParse(question).success, JSON.stringify(question)).toBe(true);
    }
  });
});
