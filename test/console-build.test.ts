import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { SqliteStore } from "../src/accounts/sqlite-store.js";
import type { AccountStore } from "../src/accounts/store.js";
import { buildApp, type FastifyInstance } from "../src/api/app.js";
import { defaultAssetsDir } from "../src/console/assets.js";
import { consoleMount } from "../src/console/plugin.js";

/**
 * The console front end as `npm run build` leaves it in dist/console-app. An integration test:
 * it needs the build (`npm test` builds first; the unit project runs on a clean checkout).
 */

let dir: string;
let store: AccountStore;
let app: FastifyInstance | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-console-build-"));
  store = SqliteStore.open(join(dir, "decisiond.db"));
});

afterEach(async () => {
  await app?.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

it("is built by npm run build into dist/console-app, with no address outside this server", async () => {
  const html = await readFile(join(defaultAssetsDir(), "index.html"), "utf8");
  const urls = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
  expect(urls.length).toBeGreaterThan(1);
  for (const url of urls) expect(url).toMatch(/^\/console\//);
  app = await buildApp({
    models: [],
    logger: false,
    mounts: [consoleMount({ store, adminToken: "console-test-admin-token-0123456789" })],
  });
  for (const url of urls)
    expect((await app.inject({ method: "GET", url })).statusCode, url).toBe(200);
});
