import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toDecisionRequest } from "../src/decision/from-wire.js";
import type { SystemOneRequest } from "../src/protocol/schemas.js";
import type { Service } from "../src/service/build.js";
import { postJson, startTestService } from "./support/service.js";

/**
 * Issue 2 integration tests: the real default model through the real HTTP server (auth off).
 * The model is small and slow on CPU; states and questions are kept short.
 */

let service: Service;
let url: string;

beforeAll(async () => {
  service = await startTestService();
  url = `${service.url}/v1/systemone`;
});

afterAll(async () => {
  await service?.close();
});

const TICKET =
  "Hi, I was charged twice for my March invoice and the refund I was promised still hasn't arrived. Please fix this today.";
const NOUL = { type: "noul", instructions: "Is the customer asking for money back?" };
const CHOICE = {
  type: "choice",
  instructions: "Which team should handle this ticket?",
  criteria: { Billing: "Payments, invoices, refunds", Technical: "Bugs, outages", Sales: null },
};
const SCORE = {
  type: "score",
  instructions: "How frustrated is the customer?",
  criteria: ["Calm", "Frustrated", "Very angry"],
};

function sum(values: Record<string, number>): number {
  return Object.values(values).reduce((a, b) => a + b, 0);
}

/** Checks one answer against the readout rules (DESIGN.md) for its question. */
function expectValidAnswer(question: any, answer: any): void {
  expect(answer.type).toBe(question.type);
  if (question.type === "noul") {
    expect(Object.keys(answer).sort()).toEqual(["noul", "type"]);
    expect(answer.noul).toBeGreaterThanOrEqual(0);
    expect(answer.noul).toBeLessThanOrEqual(1);
    return;
  }
  if (question.type === "choice") {
    const options = Object.keys(question.criteria);
    expect(Object.keys(answer).sort()).toEqual(["choice", "confidence", "probabilities", "type"]);
    expect(Object.keys(answer.probabilities)).toEqual(options);
    expect(sum(answer.probabilities)).toBeCloseTo(1, 9);
    const top = Math.max(...(Object.values(answer.probabilities) as number[]));
    expect(answer.probabilities[answer.choice]).toBe(top);
    const n = options.length;
    expect(answer.confidence).toBeCloseTo((top - 1 / n) / (1 - 1 / n), 9);
    return;
  }
  const n = question.criteria.length;
  const keys = Array.from({ length: n }, (_, i) => String(i));
  expect(Object.keys(answer).sort()).toEqual([
    "confidence",
    "legend",
    "probabilities",
    "score",
    "type",
  ]);
  expect(Object.keys(answer.probabilities)).toEqual(keys);
  expect(Object.keys(answer.legend)).toEqual(keys);
  keys.forEach((k, i) => expect(answer.legend[k]).toEqual(question.criteria[i] ?? ""));
  expect(sum(answer.probabilities)).toBeCloseTo(1, 9);
  const p = keys.map((k) => answer.probabilities[k] as number);
  expect(answer.score).toBeCloseTo(
    p.reduce((s, pi, i) => s + i * pi, 0),
    9,
  );
  const mode = p.indexOf(Math.max(...p));
  const spread = p.reduce((s, pi, i) => s + pi * Math.abs(i - mode), 0);
  const uniform = keys.reduce((s, _, i) => s + Math.abs(i - (n - 1) / 2), 0) / n;
  expect(answer.confidence).toBeCloseTo(Math.max(0, 1 - spread / uniform), 9);
}

describe("POST /v1/systemone with the real model", () => {
  it("answers all three types with the exact response shape", async () => {
    const questions = { refund: NOUL, team: CHOICE, anger: SCORE };
    const res = await postJson(url, {
      model: "decisiond-1.0-experimental",
      state: TICKET,
      questions,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    // Server-Timing: the engine and readout's own time, then the whole time the server held the
    // request, positive numbers of milliseconds, the second the larger.
    const timing = /^decide;dur=(\d+\.\d{2}), app;dur=(\d+\.\d{2})$/.exec(
      res.headers.get("server-timing") ?? "",
    );
    expect(Number(timing?.[1])).toBeGreaterThan(0);
    expect(Number(timing?.[2])).toBeGreaterThan(Number(timing?.[1]));
    expect(Object.keys(res.body).sort()).toEqual(["answers", "model", "usage"]);
    expect(res.body.model).toBe("decisiond-1.0-experimental");
    expect(Object.keys(res.body.answers)).toEqual(["refund", "team", "anger"]);
    for (const [id, q] of Object.entries(questions)) expectValidAnswer(q, res.body.answers[id]);
    expect(Object.keys(res.body.usage).sort()).toEqual(["input_tokens", "output_tokens"]);
    expect(Number.isInteger(res.body.usage.input_tokens)).toBe(true);
    expect(res.body.usage.input_tokens).toBeGreaterThan(40);
    // One answer position per question, plus one per extra token of a multi-token option id.
    expect(res.body.usage.output_tokens).toBeGreaterThanOrEqual(3);
    expect(res.body.usage.output_tokens).toBeLessThanOrEqual(3 + 3);
  });

  it("accepts the model under its own name and the official clients' default alias", async () => {
    for (const model of ["smollm2-135m-instruct", "jev-latest"]) {
      const res = await postJson(url, { model, state: "hello", questions: { q: NOUL } });
      expect(res.status).toBe(200);
    }
    const models = (await (await fetch(`${service.url}/v1/models`)).json()) as {
      models: { name: string }[];
    };
    expect(models.models.map((m) => m.name)).toEqual([
      "decisiond-1.0-experimental",
      "smollm2-135m-instruct",
      "jev-latest",
    ]);
  });

  it("answers 16 questions in one request, reading the state once", async () => {
    const questions: Record<string, unknown> = {};
    for (let i = 0; i < 16; i++) questions[`q${i}`] = [NOUL, CHOICE, SCORE][i % 3];
    const before = service.engine.counters.prefixTokensEvaluated;
    // A state no earlier request used, so the prefix cannot come from the cache.
    const state = `${TICKET} (ticket ${Date.now()})`;
    const res = await postJson(url, { model: "jev-latest", state, questions });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.answers)).toEqual(Object.keys(questions));
    for (const [id, q] of Object.entries(questions)) expectValidAnswer(q, res.body.answers[id]);
    const prefixTokens = service.engine.counters.prefixTokensEvaluated - before;
    // The prefix (system message + state) went through the model once, not 16 times.
    const one = await postJson(url, {
      model: "jev-latest",
      state: `${state}!`,
      questions: { q: NOUL },
    });
    expect(one.status).toBe(200);
    expect(prefixTokens).toBeGreaterThan(30);
    expect(prefixTokens).toBeLessThan(one.body.usage.input_tokens);
  });

  it("takes string, object and array states, and unicode everywhere", async () => {
    for (const state of [
      "plain text",
      { subject: "Charged twice", body: TICKET, customer: { plan: "pro" } },
      ["Charged twice.", "Refund promised.", 3, null, true],
    ]) {
      const res = await postJson(url, { model: "jev-latest", state, questions: { q: NOUL } });
      expect(res.status).toBe(200);
      expectValidAnswer(NOUL, res.body.answers.q);
    }
    const options = {
      "환불 요청": "고객이 돈을 돌려받기를 원함",
      "배송 문의": "배송 상태를 물음",
      "🙂 기타": null,
    };
    const q = { type: "choice", instructions: "이 문의는 어떤 유형인가요?", criteria: options };
    const res = await postJson(url, {
      model: "jev-latest",
      state: "배송이 3일째 안 와요. 그냥 환불해 주세요 😡",
      questions: { "질문 🎯": q },
    });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.answers)).toEqual(["질문 🎯"]);
    expectValidAnswer(q, res.body.answers["질문 🎯"]);
  });

  it("accepts structured instructions and descriptions, and more than 26 options", async () => {
    const many: Record<string, null> = {};
    for (let i = 0; i < 40; i++) many[`Queue ${i}`] = null;
    const questions = {
      s: {
        type: "score",
        instructions: { scale: "frustration" },
        criteria: [{ label: "Calm" }, "Frustrated", ["Very angry", "threats"]],
      },
      many: { type: "choice", instructions: ["Route the ticket."], criteria: many },
    };
    const res = await postJson(url, { model: "jev-latest", state: TICKET, questions });
    expect(res.status).toBe(200);
    expectValidAnswer(questions.s, res.body.answers.s);
    expectValidAnswer(questions.many, res.body.answers.many);
  });

  it("gives the same answer for the same question whatever its id, order or neighbours", async () => {
    const alone = await postJson(url, {
      model: "jev-latest",
      state: TICKET,
      questions: { team: CHOICE },
    });
    const crowded = await postJson(url, {
      model: "jev-latest",
      state: TICKET,
      questions: { anger: SCORE, "renamed 🙂": CHOICE, refund: NOUL },
    });
    expect(alone.status).toBe(200);
    expect(crowded.status).toBe(200);
    for (const [k, v] of Object.entries(alone.body.answers.team.probabilities))
      expect(crowded.body.answers["renamed 🙂"].probabilities[k]).toBeCloseTo(v as number, 3);
  });

  it("refuses a state too long for the context with both token counts, truncating nothing", async () => {
    const state = "lorem ipsum dolor sit amet ".repeat(800);
    const res = await postJson(url, { model: "jev-latest", state, questions: { q: NOUL } });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].loc).toEqual(["body", "state"]);
    expect(res.body.detail[0].type).toBe("state_too_long");
    const numbers = (res.body.detail[0].msg as string).match(/\d+/g)!.map(Number);
    expect(numbers).toContain(service.engine.model.contextSize);
    expect(Math.max(...numbers)).toBeGreaterThan(service.engine.model.contextSize);
  });

  it("refuses 16 questions that each fit but together exceed twice the context, before the model runs", async () => {
    const options = Object.fromEntries(
      Array.from({ length: 80 }, (_, i) => [`queue-${i}-handling`, null]),
    );
    const questions = Object.fromEntries(
      Array.from({ length: 16 }, (_, i) => [
        `q${i}`,
        { type: "choice", instructions: `Route ${i}?`, criteria: options },
      ]),
    );
    // Each fits: planned alone (the tokenizer only, no model run, so no verdict waits on the
    // machine's load), one question's branch is inside the context and its tokens under the cap.
    const one = await service.decider.plan(
      toDecisionRequest({
        model: "jev-latest",
        state: TICKET,
        questions: { q0: questions.q0 },
      } as SystemOneRequest),
    );
    expect(one.neededTokens).toBeLessThanOrEqual(service.engine.model.contextSize);
    expect(one.inputTokens).toBeLessThanOrEqual(2 * service.engine.model.contextSize);
    const evaluated = service.engine.counters.branchTokensEvaluated;
    const res = await postJson(url, { model: "jev-latest", state: TICKET, questions });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].type).toBe("too_many_tokens");
    expect(res.body.detail[0].loc[0]).toBe("body");
    expect(res.body.detail[0].loc[1]).toBe("questions");
    const [total, limit] = (res.body.detail[0].msg as string).match(/\d+/g)!.map(Number);
    expect(limit).toBe(2 * service.engine.model.contextSize);
    expect(total).toBeGreaterThan(limit!);
    expect(service.engine.counters.branchTokensEvaluated).toBe(evaluated);
  });
});

describe("validation (seed rule 5): 422 with detail[] saying where", () => {
  const ok = { model: "jev-latest", state: "x", questions: { q: NOUL } };
  const cases: [string, unknown, (string | number)[], RegExp?][] = [
    ["missing model", { state: "x", questions: { q: NOUL } }, ["body", "model"], /required/i],
    ["unknown model", { ...ok, model: "gpt-9" }, ["body", "model"], /not served/],
    [
      "missing state",
      { model: "jev-latest", questions: { q: NOUL } },
      ["body", "state"],
      /required/i,
    ],
    ["missing questions", { model: "jev-latest", state: "x" }, ["body", "questions"], /required/i],
    ["no questions", { ...ok, questions: {} }, ["body", "questions"], /1 to 16/],
    [
      "17 questions",
      {
        ...ok,
        questions: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`q${i}`, NOUL])),
      },
      ["body", "questions"],
      /1 to 16/,
    ],
    [
      "unknown type",
      { ...ok, questions: { q: { type: "boolean", instructions: "x" } } },
      ["body", "questions", "q", "type"],
    ],
    [
      "missing type",
      { ...ok, questions: { q: { instructions: "x" } } },
      ["body", "questions", "q", "type"],
    ],
    [
      "empty instructions",
      { ...ok, questions: { q: { ...CHOICE, instructions: "" } } },
      ["body", "questions", "q", "instructions"],
    ],
    [
      "one option",
      { ...ok, questions: { q: { ...CHOICE, criteria: { a: null } } } },
      ["body", "questions", "q", "criteria"],
      /2 to 255/,
    ],
    [
      "256 options",
      {
        ...ok,
        questions: {
          q: {
            ...CHOICE,
            criteria: Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`o${i}`, null])),
          },
        },
      },
      ["body", "questions", "q", "criteria"],
      /2 to 255 options, got 256/,
    ],
    [
      "one level",
      { ...ok, questions: { q: { ...SCORE, criteria: ["a"] } } },
      ["body", "questions", "q", "criteria"],
      /2 to 10 levels, got 1/,
    ],
    [
      "11 levels",
      {
        ...ok,
        questions: { q: { ...SCORE, criteria: Array.from({ length: 11 }, (_, i) => `l${i}`) } },
      },
      ["body", "questions", "q", "criteria"],
      /2 to 10 levels, got 11/,
    ],
    [
      "map-form score",
      { ...ok, questions: { q: { ...SCORE, criteria: { 0: "a", 1: "b" } } } },
      ["body", "questions", "q", "criteria"],
    ],
    // A null level is accepted (issue 31 item 11: the official SDKs allow it).
    [
      "noul with nothing to ask",
      { ...ok, questions: { q: { type: "noul" } } },
      ["body", "questions", "q", "instructions"],
    ],
    [
      "two images",
      { ...ok, images: ["data:image/png;base64,AA==", "data:image/png;base64,AA=="] },
      ["body", "images"],
    ],
    [
      "image and video",
      { ...ok, images: ["data:image/png;base64,AA=="], videos: ["data:video/mp4;base64,AA=="] },
      ["body", "videos"],
      /not both/,
    ],
    [
      "image for a text model",
      { ...ok, images: ["data:image/png;base64,AA=="] },
      ["body", "images"],
      /model jev-latest does not accept images|does not accept images/,
    ],
    [
      "video for a text model",
      { ...ok, videos: ["data:video/mp4;base64,AA=="] },
      ["body", "videos"],
      /does not accept videos/,
    ],
    ["body not an object", [1, 2], ["body"]],
  ];
  for (const [name, body, loc, msg] of cases) {
    it(name, async () => {
      const res = await postJson(url, body);
      expect(res.status).toBe(422);
      const hit = (res.body.detail as any[]).find(
        (d) => JSON.stringify(d.loc) === JSON.stringify(loc),
      );
      expect(hit, JSON.stringify(res.body.detail)).toBeDefined();
      expect(typeof hit.type).toBe("string");
      if (msg) expect(hit.msg).toMatch(msg);
    });
  }

  it("names the model in the no-vision message", async () => {
    const res = await postJson(url, {
      ...ok,
      model: "smollm2-135m-instruct",
      images: ["data:image/png;base64,AA=="],
    });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].msg).toMatch(
      /^model smollm2-135m-instruct does not accept images: .*decisiond serve --model smolvlm/,
    );
  });

  it("ignores unknown top-level fields", async () => {
    const res = await postJson(url, { ...ok, x_trace_id: "t", seed: 7 });
    expect(res.status).toBe(200);
  });

  it("says where malformed JSON breaks, and refuses other content types", async () => {
    const bad = await postJson(url, '{"model": "jev-latest",\n "state": }');
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].type).toBe("json_invalid");
    expect(bad.body.detail[0].msg).toMatch(/line 2, column|"state": }/);
    const text = await fetch(url, {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: "hi",
    });
    expect(text.status).toBe(415);
    expect(((await text.json()) as { detail: { error_type: string } }).detail.error_type).toBe(
      "unsupported_media_type",
    );
  });
});
