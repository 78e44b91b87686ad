import { z } from "zod";

// Why a client's question shape sits here, beside the server's schemas: docs/decisions/089
/**
 * Text as a client checks it before sending: a non-empty string, or structured JSON (a non-empty
 * array, or an object), rendered into the prompt as JSON. Deeper limits are the server's.
 */
const ClientText = z.union([
  z.string().min(1),
  z.array(z.unknown()).min(1),
  z.record(z.string(), z.unknown()),
]);
// Where the API takes null (absent instructions, an undescribed option, level or criterion), so
// does a client: what the API accepts, a client passes on.
const NullableClientText = ClientText.nullable();

/**
 * One question of `POST /v1/systemone` as a client checks it before sending (the MCP `decide`
 * tool's input): the question types and fields of the server's `QuestionSchema` (./schemas.ts),
 * described for a reader that writes them (an agent), without the server's limits (option and
 * level counts, a noul's instructions or criteria, unknown noul criteria). Those the server
 * checks, and its 422 names what is wrong more precisely than a client's own refusal would.
 * Every question the server's schema accepts, this one accepts (test/client-question.test.ts).
 */
export const ClientQuestionSchema = z.discriminatedUnion("type", [
  z
    .object({
      type: z.literal("choice"),
      instructions: NullableClientText.optional().describe(
        "the question, e.g. 'Which team should handle this ticket?'",
      ),
      criteria: z
        .record(z.string().min(1), NullableClientText)
        .describe(
          "option id → description of when it applies (null: the id says it); 2–255 options",
        ),
    })
    .describe("pick one of several options; answers choice, probabilities, confidence"),
  z
    .object({
      type: z.literal("noul"),
      instructions: NullableClientText.optional().describe(
        "a yes/no question, e.g. 'Is the customer asking for a refund?'",
      ),
      // Loose: another key goes on to the server, whose 422 names it (a strict schema here
      // would answer with the client's less precise error; a stripping one would drop it unsaid).
      criteria: z
        .looseObject({ true: NullableClientText.optional(), false: NullableClientText.optional() })
        .nullable()
        .optional()
        .describe("what true and what false mean (optional when instructions say it)"),
    })
    .describe("a true/false question; answers noul = P(true)"),
  z
    .object({
      type: z.literal("score"),
      instructions: NullableClientText.optional().describe(
        "what to rate, e.g. 'How urgent is this?'",
      ),
      criteria: z
        .array(NullableClientText)
        .describe("level descriptions, lowest first; the index is the value; 2–10 levels"),
    })
    .describe(
      "place the state on an ordered scale; answers score = expected level, probabilities, confidence",
    ),
]);

/** A question as {@link ClientQuestionSchema} takes it. */
export type ClientQuestion = z.infer<typeof ClientQuestionSchema>;
