import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The built light package: importing `decisiond/client`, `decisiond/mcp` and `decisiond/protocol`
 * (through package.json `exports`, in a fresh Node process) loads no model runtime, no SQLite or
 * PostgreSQL driver, no image library and no HTTP server. A module-resolution hook records every
 * module the imports resolve, and the process's CommonJS cache every CommonJS file it loads.
 * Needs `npm run build` (the integration tests run after it); test/package-entry.test.ts checks
 * the sources without a build.
 */

const root = fileURLToPath(new URL("..", import.meta.url));

/** Packages of the server side that the light entries must not load. */
const SERVER_PACKAGES = [
  "node-llama-cpp",
  "@node-llama-cpp",
  "@fugood",
  "better-sqlite3",
  "pg",
  "sharp",
  "@img",
  "fastify",
  "@fastify",
  "prom-client",
  "@ffmpeg-installer",
  "@ffprobe-installer",
];

const HOOKS = `
import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.RESOLVE_LOG, resolved.url + "\\n");
  return resolved;
}
`;

const MAIN = `
import { register, createRequire } from "node:module";
import { appendFileSync } from "node:fs";
register(process.env.HOOKS_URL);
for (const entry of ["decisiond/client", "decisiond/mcp", "decisiond/protocol"]) await import(entry);
const cache = Object.keys(createRequire(import.meta.url).cache);
appendFileSync(process.env.RESOLVE_LOG, cache.map((f) => "file://" + f).join("\\n") + "\\n");
`;

let dir: string;
let loaded: string[];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "decisiond-entry-"));
  const hooks = join(dir, "hooks.mjs");
  const log = join(dir, "resolved.log");
  await writeFile(hooks, HOOKS);
  await writeFile(log, "");
  await promisify(execFile)(process.execPath, ["--input-type=module", "-e", MAIN], {
    cwd: root,
    env: { ...process.env, HOOKS_URL: `file://${hooks}`, RESOLVE_LOG: log },
  });
  loaded = (await readFile(log, "utf8")).split("\n").filter((line) => line !== "");
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The package a module URL lies in, `undefined` for a file of ours or a Node builtin. */
function packageOf(url: string): string | undefined {
  return /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
}

describe("the built light package", () => {
  it("resolves decisiond/client, decisiond/mcp and decisiond/protocol to dist/", () => {
    for (const file of ["client/index.js", "mcp/server.js", "protocol/index.js"])
      expect(loaded).toContain(`file://${root}dist/${file}`);
  });

  it("loads only dist/client, dist/mcp and dist/protocol of ours", () => {
    const ours = loaded.filter((url) => url.startsWith(`file://${root}dist/`));
    for (const url of ours) expect(url).toMatch(/\/dist\/(client|mcp|protocol)\/[^/]+\.js$/);
  });

  it("loads no model runtime, database driver, image library or HTTP server", () => {
    const packages = new Set(loaded.map(packageOf).filter((p) => p !== undefined));
    expect(packages).toContain("zod");
    for (const name of packages)
      expect(
        SERVER_PACKAGES.some((p) => name === p || name.startsWith(`${p}/`)),
        `loads ${name}`,
      ).toBe(false);
  });
});
