#!/usr/bin/env node
// The repository's `prepare` (run by `npm install` and `npm ci` in a clone, not where decisiond is
// installed as a dependency): builds better-sqlite3's native binding, whose own install script
// `allowScripts` in package.json turns off. It runs that same script (`prebuild-install ||
// node-gyp rebuild --release`), with one difference: when the running Node's own headers are
// installed beside it (`<prefix>/include/node`, as Node's release archives, NodeSource, nvm and
// Homebrew install them) and are of its version, node-gyp builds against them instead of
// downloading them from nodejs.org. So `npm install` works on a machine that reaches the npm
// registry and nothing else (no github.com for the prebuilt binary, no nodejs.org for headers).
// A binding that already loads is left as it is. An `npm_config_nodedir` set by the caller wins.
//
// Exit status: 0 when the binding loads at the end; else the failed build's, with a message that
// names docs/DEVELOPMENT.md#installing.
//
// Usage: npm install (runs it), or `npm run prepare` (npm puts node-gyp on the PATH).
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, dirname, join, resolve } from "node:path";

const require = createRequire(import.meta.url);

/** Whether better-sqlite3 loads and opens a database, in a child (a failed load is cached). */
function loads() {
  const probe = spawnSync(
    process.execPath,
    ["-e", 'new (require("better-sqlite3"))(":memory:").close()'],
    { cwd: process.cwd(), stdio: "ignore" },
  );
  return probe.status === 0;
}

/**
 * The directory holding the running Node's headers (`include/node/node_version.h` of this very
 * version, and the `common.gypi` node-gyp builds with), or undefined.
 */
function localNodeDir() {
  const prefix = resolve(dirname(process.execPath), "..");
  const header = join(prefix, "include", "node", "node_version.h");
  if (!existsSync(header) || !existsSync(join(prefix, "include", "node", "common.gypi")))
    return undefined;
  const text = readFileSync(header, "utf8");
  const part = (name) => text.match(new RegExp(`#define NODE_${name}_VERSION (\\d+)`))?.[1];
  const version = `${part("MAJOR")}.${part("MINOR")}.${part("PATCH")}`;
  return version === process.versions.node ? prefix : undefined;
}

if (loads()) process.exit(0);

const packageDir = dirname(require.resolve("better-sqlite3/package.json"));
const { scripts } = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8"));
const env = { ...process.env };
const nodeDir = localNodeDir();
if (nodeDir && !env.npm_config_nodedir) env.npm_config_nodedir = nodeDir;
// The PATH variable is `Path` on Windows; prebuild-install's command is in the .bin beside the
// package (hoisted) or in its own.
const pathKey = Object.keys(env).find((k) => k.toUpperCase() === "PATH") ?? "PATH";
env[pathKey] = [
  join(packageDir, "node_modules", ".bin"),
  join(packageDir, "..", ".bin"),
  env[pathKey],
]
  .filter(Boolean)
  .join(delimiter);
console.log(
  `better-sqlite3: ${scripts.install}` + (nodeDir ? ` (Node's headers from ${nodeDir})` : ""),
);
const build = spawnSync(scripts.install, { cwd: packageDir, env, stdio: "inherit", shell: true });
if (build.status === 0 && loads()) process.exit(0);
console.error(
  "better-sqlite3 could not be built: see docs/DEVELOPMENT.md#installing " +
    "(a C/C++ toolchain, Python 3, and Node's headers or a way to download them)",
);
process.exit(build.status || 1);
