import madge from "madge";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The light package (DESIGN: client/ and mcp/ import nothing from the server side): the
 * `exports` entries `decisiond/client`, `decisiond/mcp` and `decisiond/protocol` reach, at run
 * time, only modules of src/client, src/mcp and src/protocol and the packages below: no model
 * runtime, no SQLite, no HTTP server. Type-only imports are left out (they are erased).
 * test/package-entry-dist.test.ts checks the same on the built package by importing it.
 */

const root = fileURLToPath(new URL("..", import.meta.url));

/** The light entries: `exports` subpath → the source of its module. */
const ENTRIES = {
  "./client": "src/client/index.ts",
  "./mcp": "src/mcp/server.ts",
  "./protocol": "src/protocol/index.ts",
} as const;

/** The packages the light entries may load. */
const ALLOWED_PACKAGES = ["zod", "@modelcontextprotocol/sdk"];

/** The package a resolved path lies in, `undefined` for one of ours. */
function packageOf(path: string): string | undefined {
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
  return match?.[1];
}

describe("the light package entries", () => {
  it("are exported as decisiond/client, decisiond/mcp and decisiond/protocol", async () => {
    const pkg = JSON.parse(await readFile(`${root}/package.json`, "utf8")) as {
      exports: Record<string, { types: string; default: string }>;
    };
    for (const [subpath, source] of Object.entries(ENTRIES)) {
      const built = source.replace(/^src\//, "./dist/").replace(/\.ts$/, ".js");
      expect(pkg.exports[subpath]).toEqual({
        types: built.replace(/\.js$/, ".d.ts"),
        default: built,
      });
    }
  });

  it("load only client/, mcp/, protocol/ and zod and the MCP SDK at run time", async () => {
    const graph = await madge(Object.values(ENTRIES), {
      baseDir: root,
      fileExtensions: ["ts"],
      tsConfig: `${root}/tsconfig.json`,
      includeNpm: true,
      detectiveOptions: { ts: { skipTypeImports: true }, es6: { skipTypeImports: true } },
    });
    const modules = new Set(Object.entries(graph.obj()).flat(2));
    const ours = [...modules].filter((m) => packageOf(m) === undefined);
    const packages = new Set([...modules].map(packageOf).filter((p) => p !== undefined));
    expect(ours.length).toBeGreaterThan(10);
    for (const module of ours) expect(module).toMatch(/^src\/(client|mcp|protocol)\//);
    expect([...packages].sort()).toEqual([...ALLOWED_PACKAGES].sort());
  });

  it("protocol/ imports nothing else of ours", async () => {
    const graph = await madge(`${root}/src/protocol`, {
      baseDir: root,
      fileExtensions: ["ts"],
      tsConfig: `${root}/tsconfig.json`,
    });
    for (const [module, imports] of Object.entries(graph.obj()))
      for (const imported of imports)
        expect(`${module} → ${imported}`).toMatch(/→ src\/protocol\//);
  });
});
