import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import OpenAI, {
  AuthenticationError,
  BadRequestError,
  NotFoundError,
  RateLimitError,
} from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import { accountGate } from "../src/api/gate.js";
import { DEFAULT_PUBLIC_NAME, type Service } from "../src/service/build.js";
import { startTestService } from "./support/service.js";

/**
 * The official `openai` SDKs, npm 7.55 and PyPI 3.51, at their default settings (two retries,
 * their own timeouts), against the real service on the real default model through the accounts
 * gate (issue 45, "Done when"): every answer type comes back typed (a boolean choice value stays
 * a boolean), the text-only model refuses an image question and answers the others, and a wrong
 * key, a second request in flight and a malformed body raise the SDKs' own exceptions. Two model
 * calls in all (one per SDK). The Python SDK runs from a venv this file creates under
 * `.decisiond-test/` (ignored by git); the Python half is skipped, saying why, only when pip
 * cannot install it.
 */

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const VENV = join(ROOT, ".decisiond-test", "openai-py-3.51");
const PYTHON = join(VENV, "bin", "python");
const SCRIPT = join(ROOT, "test", "support", "openai_sdk.py");
/** A 1×1 PNG: the image of the image question (a text-only model never decodes it). */
const PNG =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

let dir: string;
let store: AccountStore;
let admission: Admission;
let service: Service;
let key: string;
/** Why the Python half cannot run; `undefined` when it can. */
let noPython: string | undefined;

/** Creates the venv with `openai==3.51` once; later runs reuse it. */
async function ensurePythonSdk(): Promise<string | undefined> {
  try {
    const { stdout } = await run(PYTHON, ["-c", "import openai; print(openai.__version__)"]);
    if (stdout.trim().startsWith("3.51")) return undefined;
  } catch {
    /* not there yet */
  }
  try {
    await mkdir(dirname(VENV), { recursive: true });
    await run("python3", ["-m", "venv", "--clear", VENV]);
    await run(join(VENV, "bin", "pip"), ["install", "--quiet", "openai==3.51"], {
      timeout: 480_000,
    });
    return undefined;
  } catch (error) {
    return `pip could not install openai==3.51 into ${VENV}: ${(error as Error).message.split("\n")[0]}`;
  }
}

/** Runs test/support/openai_sdk.py in `mode`; returns what it printed. */
async function python(mode: "answers" | "errors" | "busy"): Promise<any> {
  const { stdout } = await run(PYTHON, [SCRIPT, mode], {
    env: {
      ...process.env,
      DECISIOND_URL: service.url,
      DECISIOND_KEY: key,
      DECISIOND_MODEL: DEFAULT_PUBLIC_NAME,
      DECISIOND_IMAGE: PNG,
    },
    timeout: 300_000,
  });
  return JSON.parse(stdout);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-openai-"));
  store = SqliteStore.open(join(dir, "decisiond.db"));
  admission = new Admission(store);
  key = (await store.createKey("openai", "vitest")).key;
  [noPython, service] = await Promise.all([
    ensurePythonSdk(),
    startTestService({ gate: accountGate(admission) }),
  ]);
  if (noPython) console.warn(`openai-sdk.test.ts: skipping the Python SDK half: ${noPython}`);
});

afterAll(async () => {
  await service?.close();
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A client at the SDK's default settings, but for where it calls and with what key. */
const client = (apiKey = key) => new OpenAI({ baseURL: `${service.url}/v1`, apiKey });

const TICKET = "I was charged twice for my subscription this month. Please refund one charge.";

/** Holds the account's one slot, as a request in flight on either wire would, until released. */
async function holdSlot(): Promise<() => void> {
  const permit = await admission.admit(key);
  return () => permit.settle(undefined);
}

describe("openai npm SDK 7.55", () => {
  it("gets every answer type typed, and a refusal for the image question", async () => {
    const { data, response } = await client()
      .decisions.create({
        model: DEFAULT_PUBLIC_NAME,
        input: [
          { role: "user", content: TICKET },
          { role: "assistant", content: "Sorry about that. Let me check." },
        ],
        questions: [
          { type: "predicate", name: "refund", instructions: "The customer asks for a refund." },
          {
            type: "choice",
            name: "team",
            instructions: "Which team should handle it?",
            choices: [{ value: "billing", description: "Payments" }, { value: "technical" }],
          },
          {
            type: "choice",
            name: "charged_twice",
            instructions: "Was the customer charged twice?",
            choices: [{ value: true }, { value: false }],
          },
          {
            type: "score",
            name: "urgency",
            instructions: "How urgent is it?",
            levels: [{ label: "low" }, { label: "high", description: "today" }],
          },
          {
            type: "predicate",
            name: "photo",
            instructions: [
              { type: "input_text", text: "The photo shows a receipt." },
              { type: "input_image", image_url: PNG },
            ],
          },
        ],
        safety_identifier: "user-1234",
        prompt_cache_key: "tickets",
      })
      .withResponse();

    expect(response.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(data.model).toBe(DEFAULT_PUBLIC_NAME);
    const [refund, team, twice, urgency, photo] = data.answers;
    expect(data.answers).toHaveLength(5);

    if (refund?.type !== "predicate") throw new Error(`refund: ${JSON.stringify(refund)}`);
    expect(refund.name).toBe("refund");
    expect(refund.probability).toBeGreaterThanOrEqual(0);
    expect(refund.probability).toBeLessThanOrEqual(1);

    if (team?.type !== "choice") throw new Error(`team: ${JSON.stringify(team)}`);
    expect(["billing", "technical"]).toContain(team.choice);
    expect(team.probabilities.map((p) => p.value)).toEqual(["billing", "technical"]);
    expect(team.probabilities.reduce((s, p) => s + p.probability, 0)).toBeCloseTo(1, 9);
    expect(team.confidence).toBeGreaterThanOrEqual(0);

    if (twice?.type !== "choice") throw new Error(`twice: ${JSON.stringify(twice)}`);
    expect(typeof twice.choice).toBe("boolean");
    expect(twice.probabilities.map((p) => p.value)).toEqual([true, false]);

    if (urgency?.type !== "score") throw new Error(`urgency: ${JSON.stringify(urgency)}`);
    expect(urgency.probabilities.map((p) => [p.label, p.value])).toEqual([
      ["low", 0],
      ["high", 1],
    ]);
    expect(urgency.score).toBeCloseTo(urgency.probabilities[1]!.probability, 9);

    expect(photo).toEqual({ type: "refusal", name: "photo" });

    const { usage } = data;
    expect(usage.input_tokens).toBeGreaterThan(0);
    expect(usage.output_tokens).toBeGreaterThan(0);
    expect(usage.output_tokens_details.reasoning_tokens).toBe(0);
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    const { cached_tokens, cache_write_tokens } = usage.input_tokens_details;
    expect(cached_tokens + cache_write_tokens).toBeLessThanOrEqual(usage.input_tokens);

    const [call] = await store.calls("openai");
    expect(call).toMatchObject({
      status: 200,
      model: DEFAULT_PUBLIC_NAME,
      inputTokens: usage.input_tokens,
    });
  });

  it("lists the models", async () => {
    const ids: string[] = [];
    for await (const model of client().models.list()) ids.push(model.id);
    expect(ids).toContain(DEFAULT_PUBLIC_NAME);
    const one = await client().models.retrieve(DEFAULT_PUBLIC_NAME);
    expect(one).toMatchObject({ id: DEFAULT_PUBLIC_NAME, object: "model", owned_by: "decisiond" });
    const missing = await client()
      .models.retrieve("no-such-model")
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect((missing as NotFoundError).code).toBe("model_not_found");
  });

  it("raises AuthenticationError, BadRequestError and NotFoundError with OpenAI's error fields", async () => {
    const question = [{ type: "predicate" as const, instructions: "Is it?" }];
    const wrong = await client("dsk_" + "0".repeat(40))
      .decisions.create({ model: DEFAULT_PUBLIC_NAME, input: "x", questions: question })
      .catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(AuthenticationError);
    expect((wrong as AuthenticationError).type).toBe("authentication_error");
    expect((wrong as AuthenticationError).requestID).toMatch(/^[0-9a-f-]{36}$/);

    const malformed = await client()
      .decisions.create({
        model: DEFAULT_PUBLIC_NAME,
        input: "x",
        questions: [{ type: "choice", instructions: "Which?", choices: [{ value: "only" }] }],
      })
      .catch((e: unknown) => e);
    expect(malformed).toBeInstanceOf(BadRequestError);
    expect((malformed as BadRequestError).param).toBe("questions[0].choices");
    expect((malformed as BadRequestError).message).toMatch(/2 to 255 choices/);

    const unknown = await client()
      .decisions.create({ model: "gpt-6-luna", input: "x", questions: question })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect((unknown as NotFoundError).code).toBe("model_not_found");
  });

  it("raises RateLimitError while the account has a request in flight (after its retries)", async () => {
    const release = await holdSlot();
    try {
      const started = performance.now();
      const error = await client()
        .decisions.create({
          model: DEFAULT_PUBLIC_NAME,
          input: "x",
          questions: [{ type: "predicate", instructions: "Is it?" }],
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimitError);
      const e = error as RateLimitError;
      expect(e.code).toBe("concurrency_limit");
      expect(e.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
      // The SDK waited as Retry-After said before each of its two retries.
      expect(performance.now() - started).toBeGreaterThanOrEqual(2 * 250);
    } finally {
      release();
    }
  });
});

describe("openai PyPI SDK 3.51", () => {
  it("gets every answer type typed, and a refusal for the image question", async (ctx) => {
    if (noPython) return ctx.skip();
    const out = await python("answers");
    expect(out.model).toBe(DEFAULT_PUBLIC_NAME);
    const [refund, team, twice, urgency, photo] = out.answers;
    expect(refund).toMatchObject({ class: "AnswerAnswerResourcePredicate", name: "refund" });
    expect(refund.probability).toBeGreaterThanOrEqual(0);
    expect(team).toMatchObject({
      class: "AnswerAnswerResourceChoice",
      values: ["billing", "technical"],
    });
    expect(team.sum).toBeCloseTo(1, 9);
    expect(twice).toMatchObject({ choice_is_bool: true, values: [true, false] });
    expect(urgency).toMatchObject({
      class: "AnswerAnswerResourceScore",
      levels: [
        ["low", 0],
        ["high", 1],
      ],
    });
    expect(photo).toEqual({ class: "AnswerAnswerResourceRefusal", type: "refusal", name: "photo" });
    expect(out.usage.reasoning).toBe(0);
    expect(out.usage.total).toBe(out.usage.input + out.usage.output);
    expect(out.models).toContain(DEFAULT_PUBLIC_NAME);
  });

  it("raises AuthenticationError, BadRequestError, NotFoundError", async (ctx) => {
    if (noPython) return ctx.skip();
    const out = await python("errors");
    expect(out.wrong_key).toMatchObject({ class: "AuthenticationError", status: 401 });
    expect(out.wrong_key.request_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(out.malformed).toMatchObject({
      class: "BadRequestError",
      status: 400,
      type: "invalid_request_error",
      param: "questions[0].choices",
    });
    expect(out.unknown_model).toMatchObject({ class: "NotFoundError", code: "model_not_found" });
  });

  it("raises RateLimitError while the account has a request in flight", async (ctx) => {
    if (noPython) return ctx.skip();
    const release = await holdSlot();
    try {
      const out = await python("busy");
      expect(out.busy).toMatchObject({
        class: "RateLimitError",
        status: 429,
        code: "concurrency_limit",
      });
      expect(out.busy.retry_after).toMatch(/^[1-9]\d*$/);
    } finally {
      release();
    }
  });
});
