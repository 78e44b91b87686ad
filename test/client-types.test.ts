import { describe, expectTypeOf, it } from "vitest";
import {
  DecisiondClient,
  type Answer,
  type DecideRequest,
  type DecideResponse,
} from "../src/client/index.js";

/**
 * The client's answers typed from the question map. These are checks of types: `npm run
 * typecheck` compiles this file and fails when the typing regresses; at run time the calls below
 * are never made. Why: docs/decisions/089.
 */

const client = new DecisiondClient({ baseUrl: "http://127.0.0.1:9" });

/** A request written in place: its question map types the answers. */
const inPlace = () =>
  client.decide({
    model: "decisiond-1.0-experimental",
    state: { message: "I was charged twice" },
    questions: {
      team: {
        type: "choice",
        instructions: "Which team should handle this?",
        criteria: { billing: "payments and refunds", technical: null },
      },
      refund: { type: "noul", instructions: "Is this a refund request?" },
      anger: { type: "score", criteria: ["calm", "annoyed", "furious"] },
    },
  });
type InPlace = Awaited<ReturnType<typeof inPlace>>;

describe("decide() answers typed by the question map", () => {
  it("types a choice's choice as the union of its option ids", () => {
    expectTypeOf<InPlace["answers"]["team"]["type"]>().toEqualTypeOf<"choice">();
    expectTypeOf<InPlace["answers"]["team"]["choice"]>().toEqualTypeOf<"billing" | "technical">();
    expectTypeOf<InPlace["answers"]["team"]["probabilities"]>().toEqualTypeOf<
      Record<"billing" | "technical", number>
    >();
    expectTypeOf<InPlace["answers"]["team"]["confidence"]>().toEqualTypeOf<number>();
    expectTypeOf<InPlace["answers"]["team"]>().not.toHaveProperty("noul");
  });

  it("gives a noul answer its noul and a score answer its fields", () => {
    expectTypeOf<InPlace["answers"]["refund"]>().toEqualTypeOf<{ type: "noul"; noul: number }>();
    expectTypeOf<InPlace["answers"]["anger"]["type"]>().toEqualTypeOf<"score">();
    expectTypeOf<InPlace["answers"]["anger"]["score"]>().toEqualTypeOf<number>();
    expectTypeOf<InPlace["answers"]["anger"]>().toHaveProperty("legend");
    expectTypeOf<InPlace["answers"]["anger"]>().toHaveProperty("probabilities");
  });

  it("has exactly the request's question ids", () => {
    expectTypeOf<keyof InPlace["answers"]>().toEqualTypeOf<"team" | "refund" | "anger">();
    expectTypeOf<InPlace["model"]>().toEqualTypeOf<string>();
    expectTypeOf<InPlace["usage"]>().toEqualTypeOf<DecideResponse["usage"]>();
  });

  it("still answers a DecideResponse, for code that takes any response", () => {
    expectTypeOf(inPlace).returns.resolves.toExtend<DecideResponse>();
  });

  it("takes a request written `as const`", () => {
    const request = {
      model: "decisiond-1.0-experimental",
      state: "a ticket",
      questions: {
        team: { type: "choice", criteria: { billing: ["payments", "refunds"], sales: null } },
        levels: { type: "score", criteria: ["low", { text: "high" }] },
      },
    } as const;
    const decide = () => client.decide(request);
    expectTypeOf(decide).returns.resolves.toExtend<DecideResponse>();
    type AsConst = Awaited<ReturnType<typeof decide>>;
    expectTypeOf<AsConst["answers"]["team"]["choice"]>().toEqualTypeOf<"billing" | "sales">();
    expectTypeOf<AsConst["answers"]["levels"]["score"]>().toEqualTypeOf<number>();
  });

  it("answers a request whose questions are not known to the compiler untyped", () => {
    const request: DecideRequest = { model: "m", state: null, questions: {} };
    const decide = () => client.decide(request);
    expectTypeOf(decide).returns.resolves.toEqualTypeOf<DecideResponse>();
    expectTypeOf<DecideResponse["answers"][string]>().toEqualTypeOf<Answer>();
  });

  it("refuses what the wire refuses", () => {
    // @ts-expect-error: a choice question needs criteria
    void (() => client.decide({ model: "m", state: 1, questions: { q: { type: "choice" } } }));
    // @ts-expect-error: no such question type
    void (() => client.decide({ model: "m", state: 1, questions: { q: { type: "maybe" } } }));
  });
});
