import { describe, expect, it } from "vitest";
import { isCommonRequest } from "../src/api/fast-check.js";
import { SystemOneRequestSchema } from "../src/protocol/schemas.js";

/**
 * The compiled fast check (src/api/fast-check.ts) lets a body skip zod. That is only sound if
 * every body it accepts, zod accepts and returns unchanged. These tests hold the two to that on
 * hand-picked bodies and on thousands of random mutations of valid ones.
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

/** zod's verdict: accepted and returned equal to the input. */
function zodKeepsIt(body: J): boolean {
  const parsed = SystemOneRequestSchema.safeParse(body);
  if (!parsed.success) return false;
  expect(parsed.data).toEqual(body);
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
      parent[pick(["images", "extra", "type", "criteria", "true", "z"])] = value;
    else parent[key] = value;
  }
  return copy;
}

describe("the fast check of common request bodies", () => {
  it("accepts every valid common body, which zod returns unchanged", () => {
    for (const body of BASES) {
      expect(isCommonRequest(body)).toBe(true);
      expect(zodKeepsIt(body)).toBe(true);
    }
  });

  it("leaves to zod what it does not cover: media, unknown fields, a non-object body", () => {
    const base = BASES[0] as Record<string, J>;
    const withImage = { ...base, images: ["data:image/png;base64,iVBORw0KGgo="] };
    expect(isCommonRequest(withImage)).toBe(false);
    expect(SystemOneRequestSchema.safeParse(withImage).success).toBe(true);
    const extraField = { ...base, user: "someone" };
    expect(isCommonRequest(extraField)).toBe(false);
    expect(SystemOneRequestSchema.safeParse(extraField).success).toBe(true);
    for (const body of [null, [], "x", 1]) expect(isCommonRequest(body)).toBe(false);
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
    expect(isCommonRequest(choice(1))).toBe(false);
    expect(isCommonRequest(choice(256))).toBe(false);
    expect(isCommonRequest(many(0))).toBe(false);
    expect(isCommonRequest(many(16))).toBe(true);
    expect(isCommonRequest(many(17))).toBe(false);
    const noul = (q: J) => ({ model: "m", state: "s", questions: { q } });
    expect(isCommonRequest(noul({ type: "noul" }))).toBe(false);
    expect(isCommonRequest(noul({ type: "noul", criteria: { true: null, false: null } }))).toBe(
      false,
    );
    expect(isCommonRequest(noul({ type: "noul", instructions: "" }))).toBe(false);
    // `__proto__` (an own key after JSON.parse) as a question or option id goes to zod, which
    // drops it; in the state it is kept as sent.
    const parsed = (text: string) => JSON.parse(text) as J;
    const q = '{"type":"noul","instructions":"?"}';
    expect(
      isCommonRequest(parsed(`{"model":"m","state":1,"questions":{"__proto__":${q},"b":${q}}}`)),
    ).toBe(false);
    expect(
      isCommonRequest(
        parsed(
          '{"model":"m","state":1,"questions":{"q":{"type":"choice","criteria":{"__proto__":null,"b":null,"c":null}}}}',
        ),
      ),
    ).toBe(false);
    const state = parsed(`{"model":"m","state":{"__proto__":{"x":1}},"questions":{"q":${q}}}`);
    expect(isCommonRequest(state)).toBe(true);
    expect(JSON.stringify((state as { state: J }).state)).toBe('{"__proto__":{"x":1}}');
  });

  it("accepts only bodies zod accepts unchanged, over 4000 random mutations", () => {
    const random = prng(20261123);
    let accepted = 0;
    let rejected = 0;
    for (let i = 0; i < 4000; i++) {
      let body: J = BASES[i % BASES.length]!;
      const changes = 1 + Math.floor(random() * 3);
      for (let c = 0; c < changes; c++) body = mutate(body, random);
      // Through JSON, as the server sees it.
      body = JSON.parse(JSON.stringify(body)) as J;
      if (isCommonRequest(body)) {
        accepted++;
        expect(zodKeepsIt(body), JSON.stringify(body).slice(0, 300)).toBe(true);
      } else rejected++;
    }
    // Both sides exercised, so the property above is not vacuous.
    expect(accepted).toBeGreaterThan(400);
    expect(rejected).toBeGreaterThan(400);
  });
});
