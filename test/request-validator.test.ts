import { describe, expect, it } from "vitest";
import { toDecisionRequest } from "../src/decision/from-wire.js";
import { isValidRequest } from "../src/api/validate.js";
import { sameTextKey, showsNothing } from "../src/protocol/option-ids.js";
import { SystemOneRequestSchema } from "../src/protocol/schemas.js";

/**
 * The request validator (src/api/validate.ts) is the JSON Schema generated from the zod schemas
 * (src/protocol/json-schema.ts), compiled with Ajv; zod only words the 422 of a body it refuses,
 * and the route reads the body as parsed. That is sound if the two accept exactly the same bodies,
 * and if zod's output (unknown fields dropped) makes the same decision request as the body
 * itself. These tests hold them to that on hand-picked bodies and on thousands of random
 * mutations of valid ones.
 */

type J = null | boolean | number | string | J[] | { [key: string]: J };

const options = (n: number, describe = true): Record<string, J> =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`opt${i}`, describe ? `option ${i}` : null]),
  );

/** Valid common bodies, one per shape the API allows. */
const BASES: J[] = [
  {
    model: "jev-latest",
    state: "The parcel arrived late.",
    questions: { q: { type: "choice", criteria: { a: null, b: null } } },
  },
  {
    model: "m",
    state: { ticket: { id: 7, tags: ["late", "damaged"] }, urgent: true, score: 1.5, none: null },
    questions: {
      team: {
        type: "choice",
        instructions: "Which team?",
        criteria: { billing: "Payments", shipping: { area: "deliveries" }, legal: ["contracts"] },
      },
      alarm: { type: "noul", instructions: "Is the alarm on?" },
      yes: { type: "noul", criteria: { true: "it is on" } },
      no: { type: "noul", instructions: null, criteria: { true: null, false: "it is off" } },
      both: { type: "noul", instructions: { ask: "on?" }, criteria: { true: "on", false: "off" } },
      urgency: { type: "score", instructions: "How urgent?", criteria: ["low", "mid", "high"] },
      wide: { type: "score", criteria: Array.from({ length: 10 }, (_, i) => `level ${i}`) },
    },
  },
  {
    model: "jev-1",
    state: [1, "two", { three: 3 }],
    questions: Object.fromEntries(
      Array.from({ length: 16 }, (_, i) => [`q${i}`, { type: "choice", criteria: options(8) }]),
    ),
  },
  { model: "x", state: null, questions: { q: { type: "choice", criteria: options(255, false) } } },
  { model: "x", state: 0, questions: { q: { type: "score", criteria: [["a"], { b: 1 }] } } },
];

/**
 * zod's verdict; when it accepts, its output and the body as parsed make the same decision
 * request (zod drops unknown fields, which nothing reads).
 */
function zodAccepts(body: J): boolean {
  const parsed = SystemOneRequestSchema.safeParse(body);
  if (!parsed.success) return false;
  const [asParsed, asZodReturns] = [body as never, parsed.data].map((b) =>
    JSON.stringify(toDecisionRequest(b)),
  );
  expect(asParsed, "the decision request of the body as parsed").toBe(asZodReturns);
  return true;
}

/** Mulberry32: a small seeded PRNG, so a failure can be replayed. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Replacement values: wrong types, empty texts and containers, near-valid question shapes. */
const POOL: J[] = [
  null,
  true,
  0,
  -1,
  "",
  "x",
  "choice",
  "noul",
  "score",
  [],
  [""],
  ["a"],
  ["a", "b"],
  ["data:image/png;base64,iVBORw0KGgo="],
  ["DATA:Video/MP4;Base64,AAAA"],
  ["data:image/png,iVBORw0KGgo="],
  ["data:image/png;base64,AAAA", "data:image/png;base64,AAAA"],
  {},
  { a: null },
  { "": "x" },
  { true: "" },
  { false: null },
  { true: "yes", extra: 1 },
  { type: "choice", criteria: { a: null } },
  { type: "noul" },
  { type: "score", criteria: ["a"] },
  { type: "other", criteria: ["a", "b"] },
  options(256),
  Array.from({ length: 11 }, (_, i) => `l${i}`),
];

/** Every path to a node of `value` (the root is []). */
function paths(value: J, at: (string | number)[] = []): (string | number)[][] {
  const out = [at];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...at, i])));
  else if (value !== null && typeof value === "object")
    for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...at, k]));
  return out;
}

/** A copy of `body` with one random change: replace, delete, or add a key or item. */
function mutate(body: J, random: () => number): J {
  const copy = structuredClone(body);
  const all = paths(copy);
  const path = all[Math.floor(random() * all.length)]!;
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const value = structuredClone(pick(POOL));
  if (path.length === 0) return random() < 0.5 ? value : copy;
  const parent = path.slice(0, -1).reduce<J>((node, k) => (node as Record<string, J>)[k]!, copy);
  const key = path.at(-1)!;
  const action = random();
  if (Array.isArray(parent)) {
    if (action < 0.3) parent.splice(Number(key), 1);
    else if (action < 0.5) parent.push(value);
    else parent[Number(key)] = value;
  } else if (parent !== null && typeof parent === "object") {
    if (action < 0.3) delete parent[key];
    else if (action < 0.5)
      parent[pick(["images", "videos", "extra", "type", "criteria", "true", "z"])] = value;
    else parent[key] = value;
  }
  return copy;
}

describe("the request validator", () => {
  it("accepts every valid body, as zod does", () => {
    for (const body of BASES) {
      expect(isValidRequest(body)).toBe(true);
      expect(zodAccepts(body)).toBe(true);
    }
  });

  it("accepts what zod accepts beyond the common body: media, unknown fields", () => {
    const base = BASES[0] as Record<string, J>;
    for (const body of [
      { ...base, images: ["data:image/png;base64,iVBORw0KGgo="] },
      { ...base, videos: ["DATA:VIDEO/MP4;BASE64,AAAA"] },
      { ...base, user: "someone" },
      { ...base, questions: { q: { type: "noul", instructions: "?", extra: 1 } } },
    ]) {
      expect(isValidRequest(body)).toBe(true);
      expect(zodAccepts(body)).toBe(true);
    }
    for (const body of [
      null,
      [],
      "x",
      1,
      { ...base, images: ["data:image/png,AAAA"] },
      { ...base, images: [] },
    ]) {
      expect(isValidRequest(body)).toBe(false);
      expect(zodAccepts(body)).toBe(false);
    }
  });

  it("rejects the limits zod enforces with refinements", () => {
    const choice = (n: number) => ({
      model: "m",
      state: "s",
      questions: { q: { type: "choice", criteria: options(n) } },
    });
    const many = (n: number) => ({
      model: "m",
      state: "s",
      questions: Object.fromEntries(
        Array.from({ length: n }, (_, i) => [`q${i}`, { type: "noul", instructions: "?" }]),
      ),
    });
    const noul = (q: J) => ({ model: "m", state: "s", questions: { q } });
    const text = (t: J) => noul({ type: "noul", instructions: t });
    for (const [body, valid] of [
      [choice(1), false],
      [choice(2), true],
      [choice(255), true],
      [choice(256), false],
      [many(0), false],
      [many(16), true],
      [many(17), false],
      [noul({ type: "noul" }), false],
      [noul({ type: "noul", criteria: null }), false],
      [noul({ type: "noul", criteria: { true: null, false: null } }), false],
      [noul({ type: "noul", criteria: { false: "off" } }), true],
      [noul({ type: "noul", instructions: "" }), false],
      [text({}), false],
      [text({ a: 1 }), true],
      [text([]), false],
      [text([1]), true],
    ] as const) {
      expect(isValidRequest(body), JSON.stringify(body).slice(0, 200)).toBe(valid);
      expect(zodAccepts(body as J)).toBe(valid);
    }
    // In the state, a `__proto__` key (an own key after JSON.parse) is kept as sent.
    const state = JSON.parse(
      '{"model":"m","state":{"__proto__":{"x":1}},"questions":{"q":{"type":"noul","instructions":"?"}}}',
    ) as J;
    expect(isValidRequest(state)).toBe(true);
    expect(JSON.stringify((state as { state: J }).state)).toBe('{"__proto__":{"x":1}}');
  });

  it("agrees with zod on 4000 random mutations", () => {
    const random = prng(20261123);
    let accepted = 0;
    let rejected = 0;
    for (let i = 0; i < 4000; i++) {
      let body: J = BASES[i % BASES.length]!;
      const changes = 1 + Math.floor(random() * 3);
      for (let c = 0; c < changes; c++) body = mutate(body, random);
      // Through JSON, as the server sees it.
      body = JSON.parse(JSON.stringify(body)) as J;
      const valid = isValidRequest(body);
      expect(zodAccepts(body), JSON.stringify(body).slice(0, 300)).toBe(valid);
      if (valid) accepted++;
      else rejected++;
    }
    // Both sides exercised, so the property above is not vacuous.
    expect(accepted).toBeGreaterThan(400);
    expect(rejected).toBeGreaterThan(400);
  });
});

describe("text that shows nothing (src/protocol/option-ids.ts)", () => {
  it("is exactly the text whose sameTextKey is empty", () => {
    const texts = [
      "",
      " ",
      "\n\t",
      "\u200b",
      " \u200d ",
      "\u200d",
      "\ufeff\u00a0",
      "\u2066\u2069",
      "a",
      " a ",
      "\u0301",
      "\u{1F468}\u200d\u{1F469}",
      "\u0915\u094d\u200d",
      "\u202e",
      "x".padStart(100, "\u200b"),
    ];
    for (const text of texts)
      expect(showsNothing(text), JSON.stringify(text)).toBe(
        text.length > 0 && sameTextKey(text) === "",
      );
  });
});
