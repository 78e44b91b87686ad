import {
  AuthenticationError,
  choice,
  noul,
  RateLimitError,
  score,
  TypeSafeClient,
  UnprocessableEntityError,
} from "@typesafe-ai/sdk";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import { accountGate } from "../src/api/gate.js";
import { DEFAULT_PUBLIC_NAME, type Service } from "../src/service/build.js";
import { startTestService } from "./support/service.js";

/**
 * The official npm client (`@typesafe-ai/sdk`) against the real service on the real default
 * model, through the accounts gate: it parses every answer type and maps decisiond's errors to
 * its classes. Three model calls in all (about a second each on two cores).
 */

let dir: string;
let store: AccountStore;
let admission: Admission;
let service: Service;
let key: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-sdk-"));
  store = SqliteStore.open(join(dir, "decisiond.db"));
  admission = new Admission(store);
  key = (await store.createKey("sdk", "vitest")).key;
  service = await startTestService({ gate: accountGate(admission) });
});

afterAll(async () => {
  await service?.close();
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A client as an app would make one; a long timeout, as this box may be busy (the SDK's default is 10 s). */
const client = (apiKey = key) =>
  new TypeSafeClient({ baseURL: service.url, apiKey, logLevel: "off", timeout: 120_000 });

const TICKET = {
  message: "I was charged twice for my subscription this month. Please refund one charge.",
};

describe("@typesafe-ai/sdk", () => {
  it("parses a noul, a choice and a score answer from decisiond; the call is in the ledger", async () => {
    const { data, requestId } = await client()
      .systemOne({
        state: TICKET,
        questions: {
          refund: noul("Does the customer ask for a refund?"),
          sided: noul("Is the customer calm?", { true: "calm and polite", false: "angry" }),
          team: choice("Which team should handle it?", {
            billing: null,
            technical: "Bugs and outages",
            sales: null,
          }),
          urgency: score("How urgent is it?", ["Can wait", "This week", "Today"]),
        },
      })
      .withResponse();

    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(data.model).toBe(DEFAULT_PUBLIC_NAME); // jev-latest, the client's default, resolves to it
    expect(Number.isInteger(data.usage.input_tokens) && data.usage.input_tokens > 0).toBe(true);
    expect(Number.isInteger(data.usage.output_tokens) && data.usage.output_tokens > 0).toBe(true);

    const { refund, sided, team, urgency } = data.answers;
    for (const n of [refund, sided]) {
      expect(n.type).toBe("noul");
      expect(n.noul).toBeGreaterThanOrEqual(0);
      expect(n.noul).toBeLessThanOrEqual(1);
    }

    expect(team.type).toBe("choice");
    expect(["billing", "technical", "sales"]).toContain(team.choice);
    expect(Object.keys(team.probabilities).sort()).toEqual(["billing", "sales", "technical"]);
    const tp = Object.values(team.probabilities) as number[];
    expect(tp.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
    expect(team.probabilities[team.choice]).toBe(Math.max(...tp));
    expect(team.confidence).toBeGreaterThanOrEqual(0);
    expect(team.confidence).toBeLessThanOrEqual(1);

    expect(urgency.type).toBe("score");
    expect(urgency.legend).toEqual({ "0": "Can wait", "1": "This week", "2": "Today" });
    expect(Object.keys(urgency.probabilities).sort()).toEqual(["0", "1", "2"]);
    const up = urgency.probabilities as Record<string, number>;
    expect(urgency.score).toBeCloseTo(up["1"]! + 2 * up["2"]!, 6);
    expect(urgency.confidence).toBeGreaterThanOrEqual(0);

    const [call] = await store.calls("sdk");
    expect(call).toMatchObject({
      status: 200,
      model: DEFAULT_PUBLIC_NAME,
      inputTokens: data.usage.input_tokens,
      outputTokens: data.usage.output_tokens,
    });
    expect((await store.usage("sdk"))[0]).toMatchObject({
      calls: 1,
      inputTokens: data.usage.input_tokens,
    });
  });

  it("lists the models", async () => {
    const models = await client().models.list();
    expect(models.map((m) => m.name)).toContain(DEFAULT_PUBLIC_NAME);
  });

  it("raises AuthenticationError for a bad key", async () => {
    const error = await client("dsk_" + "0".repeat(40))
      .systemOne({ state: "x", questions: { q: noul("Is it?") } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuthenticationError);
    const e = error as AuthenticationError;
    expect(e.status).toBe(401);
    expect(e.message).toMatch(/invalid API key/);
    expect((e.body as any).detail.error_type).toBe("authentication_error");
    expect(e.requestId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("raises UnprocessableEntityError for a bad request, naming the place", async () => {
    const error = await client()
      .systemOne({ state: "x", questions: { team: choice("Which?", { only: null }) } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnprocessableEntityError);
    const e = error as UnprocessableEntityError;
    expect(e.status).toBe(422);
    expect(e.message).toMatch(/questions\.team\.criteria/);
  });

  it("raises RateLimitError while the account has a request in flight (retries off); the account works after", async () => {
    const account = (await store.findAccount("sdk"))!;
    const first = client().systemOne({
      state: {
        ...TICKET,
        history: Array.from({ length: 12 }, (_, i) => `earlier message ${i}: still waiting`),
      },
      questions: { refund: noul("Does the customer ask for a refund?") },
    });
    await vi.waitFor(() => expect(admission.busy(account.id)).toBe(true), {
      timeout: 30_000,
      interval: 5,
    });
    const error = await client()
      .systemOne({ state: "x", questions: { q: noul("Is it?") } }, { retry: { maxRetries: 0 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    const e = error as RateLimitError;
    expect(e.status).toBe(429);
    expect((e.body as any).detail.error_type).toBe("concurrency_limit");
    expect(e.retryAfterMs).toBeGreaterThanOrEqual(1);
    expect(e.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);

    const answered = await first;
    expect(answered.answers.refund.type).toBe("noul");
    expect(admission.busy(account.id)).toBe(false);
    expect((await store.calls("sdk")).map((c) => c.status)).toEqual([200, 422, 200]);
  });
});
