import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Admission } from "../src/accounts/admission.js";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import { accountGate } from "../src/api/gate.js";
import type { Service } from "../src/service/build.js";
import {
  chromiumMissing,
  horizontalOverflow,
  launchChromium,
  screenshot,
} from "./support/browser.js";
import { postJson, startTestService } from "./support/service.js";

/**
 * The console end to end, in headless Chromium against the real service on the real model:
 * sign in, create a key in the UI, call /v1/systemone with it, revoke it in the UI, get 401; a
 * key's session sees its own account only; every page at 1280 and 375 px wide, with screenshots
 * in test-artifacts/console/.
 */

const missing = chromiumMissing();
if (missing) console.warn(`console e2e tests skipped: ${missing}`);

/** Earlier calls of account acme: [days ago, calls that day]. */
const HISTORY: [number, number][] = [
  [27, 3],
  [26, 5],
  [23, 2],
  [22, 6],
  [20, 4],
  [19, 8],
  [16, 5],
  [15, 9],
  [13, 7],
  [12, 4],
  [9, 10],
  [8, 6],
  [6, 12],
  [5, 7],
  [3, 9],
  [2, 11],
  [1, 6],
];

const ADMIN_TOKEN = `admin-${randomBytes(24).toString("base64url")}`;

const REQUEST = {
  model: "decisiond-1.0-experimental",
  state: { message: "The app crashes every time I open the settings page." },
  questions: {
    bug: { type: "noul", instructions: "Is this a bug report?" },
    team: {
      type: "choice",
      instructions: "Which team should handle it?",
      criteria: { billing: "Payments", technical: "Bugs and outages", sales: null },
    },
  },
};

// Skipping is for a developer's machine without Chromium; CI installs it (.ci/run) and must run
// these, so there a missing Chromium fails them.
describe.skipIf(missing !== undefined && !process.env.CI)("console in headless Chromium", () => {
  let dir: string;
  let store: AccountStore;
  let service: Service;
  let browser: Browser;
  let otherKeyPrefix: string;
  let acmeKey: string;

  beforeAll(async () => {
    if (missing) throw new Error(missing);
    dir = await mkdtemp(join(tmpdir(), "decisiond-console-e2e-"));
    store = SqliteStore.open(join(dir, "decisiond.db"));
    otherKeyPrefix = (await store.createKey("other", "not acme's")).record.prefix;
    const acme = await store.createKey("acme", "phone");
    acmeKey = acme.key;
    // Earlier calls in the ledger (real rows, as the gate writes them) and an allowance, so the
    // usage page has a history to chart.
    const day = 86_400_000;
    for (const [daysAgo, calls] of HISTORY)
      for (let i = 0; i < calls; i++)
        await store.recordCall({
          accountId: acme.record.accountId,
          keyId: acme.record.id,
          at: Date.now() - daysAgo * day - i * 60_000,
          inputTokens: 180 + ((daysAgo * 37 + i * 11) % 90),
          outputTokens: 3,
          model: "decisiond-1.0-experimental",
          status: i === 2 ? 429 : 200,
        });
    await store.setAllowance("acme", { tokens: 100_000, period: "month" });
    service = await startTestService({
      gate: accountGate(new Admission(store)),
      console: { store, adminToken: ADMIN_TOKEN },
    });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await service?.close();
    await store?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function open(
    width: number,
  ): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
    const context = await browser.newContext({
      viewport: { width, height: width < 500 ? 812 : 900 },
      deviceScaleFactor: 1,
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    page.on("console", (m) => {
      // The browser reports refused requests (401 on purpose) as console errors; scripts' errors
      // and CSP violations are what must not happen.
      if (m.type() === "error" && !/status of 40\d/.test(m.text())) errors.push(m.text());
    });
    return { context, page, errors };
  }

  async function signIn(page: Page, credential: string): Promise<void> {
    await page.goto(`${service.url}/console/`);
    await page.locator("#credential").fill(credential);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
  }

  it("admin: creates a key in the UI, the key answers /v1/systemone, revoked in the UI it gets 401", async () => {
    const { context, page, errors } = await open(1280);
    await context.grantPermissions(["clipboard-read", "clipboard-write"], {
      origin: service.url,
    });

    await page.goto(`${service.url}/console/`);
    await page.locator("#credential").waitFor();
    await screenshot(page, "sign-in-1280");
    // A wrong token is refused on the page.
    await page.locator("#credential").fill("not-the-admin-token-at-all-0000");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").getByText("invalid API key or admin token").waitFor();

    await page.locator("#credential").fill(ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
    expect(await page.getByTestId("who").textContent()).toBe("admin");

    // Create: the key is shown once, and the copy button puts exactly it on the clipboard.
    await page.locator("#new-key-account").fill("acme");
    await page.locator("#new-key-label").fill("e2e");
    await page.getByRole("button", { name: "Create key" }).click();
    const key = await page.getByTestId("new-key").inputValue();
    expect(key).toMatch(/^dsk_[0-9A-Za-z]{40}$/);
    await page.getByRole("button", { name: "Copy" }).click();
    await page.getByRole("button", { name: "Copied" }).waitFor();
    expect(await page.evaluate<string>("navigator.clipboard.readText()")).toBe(key);
    const created = await store.findKey(key);
    expect(created?.account.name).toBe("acme");
    expect(created?.key.label).toBe("e2e");
    const row = page.locator(`tr[data-key-prefix="${created!.key.prefix}"]`);
    expect(await row.locator('td[data-label="Last used"]').textContent()).toBe("never");
    await screenshot(page, "keys-created-1280");

    // The new key answers the API.
    const answered = await postJson(`${service.url}/v1/systemone`, REQUEST, {
      authorization: `Bearer ${key}`,
    });
    expect(answered.status).toBe(200);
    expect(Object.keys(answered.body.answers)).toEqual(["bug", "team"]);

    // Playground with that key: the UI shows the answers the API returned.
    await page.getByRole("button", { name: "Use in playground" }).click();
    await page.getByRole("heading", { name: "Playground", level: 1 }).waitFor();
    expect(await page.getByTestId("playground-key").textContent()).toContain(created!.key.prefix);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith("/v1/systemone")),
      page.getByRole("button", { name: "Run" }).click(),
    ]);
    const played = (await response.json()) as {
      answers: Record<string, any>;
      usage: { input_tokens: number; output_tokens: number };
    };
    expect(response.status()).toBe(200);
    await page.getByTestId("answer").nth(2).waitFor();
    expect(await page.getByTestId("answer").count()).toBe(3);
    const team = page.locator('[data-question="team"]');
    expect(await team.locator(".bar.chosen .bar-label").textContent()).toBe(
      played.answers.team.choice,
    );
    const percents = await team.locator(".bar-value").allTextContents();
    expect(percents).toHaveLength(3);
    expect(percents.reduce((s, p) => s + Number.parseFloat(p), 0)).toBeCloseTo(100, 0);
    expect(await team.locator(".answer-value").textContent()).toContain(
      played.answers.team.confidence.toFixed(2),
    );
    expect(await page.locator('[data-question="refund"] .answer-value').textContent()).toBe(
      `P(yes) = ${(played.answers.refund.noul * 100).toFixed(1)}%`,
    );
    expect(await horizontalOverflow(page)).toBe(0);
    await screenshot(page, "playground-1280");

    // Usage of acme: the two calls and their tokens.
    await page.getByRole("link", { name: "Usage" }).click();
    await page.locator("#usage-account").selectOption("acme");
    const calls = await store.calls("acme");
    const tokens = calls.reduce((s, c) => s + c.inputTokens + c.outputTokens, 0);
    expect(calls.slice(-2).map((c) => c.inputTokens + c.outputTokens)).toEqual([
      answered.body.usage.input_tokens + answered.body.usage.output_tokens,
      played.usage.input_tokens + played.usage.output_tokens,
    ]);
    const stat = (label: string) =>
      page.locator(".stat", { hasText: label }).locator(".stat-value");
    await stat("Tokens, 30 days").getByText(tokens.toLocaleString("en-US")).waitFor();
    expect(await stat("Requests, 30 days").textContent()).toBe(String(calls.length));
    const allowance = (await store.allowanceState((await store.findAccount("acme"))!))!;
    expect(await stat("Allowance left").textContent()).toBe(
      allowance.remaining.toLocaleString("en-US"),
    );
    expect(await page.locator(".chart-bar").count()).toBe(30);
    await screenshot(page, "usage-1280");

    // Revoke in the UI, after a confirmation; then the key gets 401.
    await page.getByRole("link", { name: "API keys" }).click();
    await row.waitFor();
    expect(await row.locator('td[data-label="Last used"]').textContent()).toMatch(/UTC$/);
    await row.getByRole("button", { name: /Revoke key/ }).click();
    const dialog = page.getByRole("dialog", { name: "Revoke this key?" });
    await dialog.waitFor();
    await screenshot(page, "keys-revoke-1280");
    await dialog.getByRole("button", { name: "Revoke key" }).click();
    await row.getByText(/^revoked /).waitFor();
    expect((await store.findKey(key))?.key.revokedAt).toBeDefined();
    const refused = await postJson(`${service.url}/v1/systemone`, REQUEST, {
      authorization: `Bearer ${key}`,
    });
    expect(refused.status).toBe(401);
    expect(refused.body.detail.error_type).toBe("authentication_error");
    expect(refused.body.detail.message).toMatch(/was revoked/);
    await screenshot(page, "keys-1280");

    // The playground, still holding the revoked key, shows the refusal.
    await page.getByRole("link", { name: "Playground" }).click();
    await page.getByRole("button", { name: "Run" }).click();
    await page.getByTestId("run-error").getByText("401 authentication_error").waitFor();
    expect(errors).toEqual([]);
    await context.close();
  });

  it("admin at 1280 px: a 100-character label stays in its card; a new try clears a refusal", async () => {
    const { context, page, errors } = await open(1280);
    await signIn(page, ADMIN_TOKEN);

    // A label without spaces at the length limit: the table and its Revoke buttons stay inside
    // the card.
    const label = "L".repeat(100);
    const { record } = await store.createKey("acme", label);
    await page.reload();
    const row = page.locator(`tr[data-key-prefix="${record.prefix}"]`);
    await row.waitFor();
    const card = page.locator(".card", { has: page.getByTestId("keys-table") });
    const cardBox = (await card.boundingBox())!;
    const inside = async (box: { x: number; width: number } | null) =>
      expect(box!.x + box!.width).toBeLessThanOrEqual(cardBox.x + cardBox.width);
    await inside(await page.getByTestId("keys-table").boundingBox());
    for (const button of await page.getByRole("button", { name: /Revoke key/ }).all())
      await inside(await button.boundingBox());
    expect(await row.locator('td[data-label="Label"]').textContent()).toBe(label);
    expect(await horizontalOverflow(page)).toBe(0);
    await screenshot(page, "keys-long-label-1280");

    // A refused label's error goes when the form is changed and tried again, even when the
    // browser's own check (the account is required) stops that try.
    const refusal = page.locator(".create-key .error");
    await page.locator("#new-key-account").fill("acme");
    await page.locator("#new-key-label").fill("a\u202Eb");
    await page.getByRole("button", { name: "Create key" }).click();
    await refusal.getByText(/bidirectional overrides/).waitFor();
    await page.locator("#new-key-label").fill("");
    await page.locator("#new-key-account").fill("");
    await page.getByRole("button", { name: "Create key" }).click();
    await refusal.waitFor({ state: "detached" });
    // The browser reports the refused label's 422 too: it is on purpose.
    expect(errors.filter((e) => !/status of 422/.test(e))).toEqual([]);
    await context.close();
  });

  it("key: signs in at 375 px, sees its own account only, every page fits the width", async () => {
    const { context, page, errors } = await open(375);
    await page.goto(`${service.url}/console/`);
    await page.locator("#credential").waitFor();
    expect(await horizontalOverflow(page)).toBe(0);
    await screenshot(page, "sign-in-375");

    await signIn(page, acmeKey);
    expect(await page.getByTestId("who").textContent()).toBe("acme");
    const table = page.getByTestId("keys-table");
    await table.waitFor();
    const prefixes = await table
      .locator("tr[data-key-prefix]")
      .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-key-prefix")));
    expect(prefixes).toEqual((await store.listKeys("acme")).map((k) => k.prefix).reverse());
    expect(prefixes).not.toContain(otherKeyPrefix);
    expect(await page.locator("#new-key-account").count()).toBe(0); // no account to choose
    expect(await horizontalOverflow(page)).toBe(0);
    await screenshot(page, "keys-375");

    await page.getByRole("link", { name: "Usage" }).click();
    await page.locator(".stat").first().waitFor();
    expect(await page.locator("#usage-account").count()).toBe(0);
    expect(await horizontalOverflow(page)).toBe(0);
    await screenshot(page, "usage-375");

    await page.getByRole("link", { name: "Playground" }).click();
    expect(await page.getByTestId("playground-key").textContent()).toContain("your signed-in key");
    // A state that is not JSON is caught before sending.
    await page.locator(".cm-content").fill('{"message": "broken');
    await page.getByRole("button", { name: "Run" }).click();
    await page.getByTestId("run-error").getByText("the state is not valid JSON").waitFor();
    await page.locator(".cm-content").fill('{"message": "Please cancel my subscription."}');
    await page.getByRole("button", { name: "Run" }).click();
    await page.getByTestId("answer").nth(2).waitFor();
    expect(await horizontalOverflow(page)).toBe(0);
    await screenshot(page, "playground-375");
    expect(errors).toEqual([]);
    await context.close();
  });
});
