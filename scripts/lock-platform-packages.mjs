// Adds to package-lock.json the per-platform optional packages of node-llama-cpp that the
// registry reachable here does not serve (macOS, Windows, riscv64), so that `npm ci` finds the
// lockfile in sync with package.json. npm skips them on Linux by their `os`/`cpu` fields and never
// fetches them; on those platforms it fetches `resolved`. npm install keeps the entries.
//
// Usage: node scripts/lock-platform-packages.mjs   (after any npm install that rewrote the lockfile)
import { readFileSync, writeFileSync } from "node:fs";

const lockPath = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(lockPath, "utf8"));
const llama = JSON.parse(
  readFileSync(new URL("../node_modules/node-llama-cpp/package.json", import.meta.url), "utf8"),
);

/** `os` and `cpu` of each package, from its name (node-llama-cpp's own naming). */
function platformOf(name) {
  const [system, arch] = name.split("-");
  const os = { linux: "linux", mac: "darwin", win: "win32" }[system];
  const cpu = arch === "armv7l" ? "arm" : arch;
  if (!os || !cpu) throw new Error(`unknown platform package name ${name}`);
  return { os, cpu };
}

let added = 0;
for (const [pkg, version] of Object.entries(llama.optionalDependencies ?? {})) {
  const key = `node_modules/${pkg}`;
  if (lock.packages[key]) continue;
  const short = pkg.split("/")[1];
  const { os, cpu } = platformOf(short);
  lock.packages[key] = {
    version,
    resolved: `https://registry.npmjs.org/${pkg}/-/${short}-${version}.tgz`,
    cpu: [cpu],
    license: "MIT",
    optional: true,
    os: [os],
    engines: { node: ">=20.0.0" },
  };
  added++;
}
const root = lock.packages[""];
const rest = Object.keys(lock.packages)
  .filter((k) => k !== "")
  .sort((a, b) => a.localeCompare(b, "en"));
lock.packages = Object.fromEntries([["", root], ...rest.map((k) => [k, lock.packages[k]])]);
writeFileSync(lockPath, JSON.stringify(lock, null, 2) + "\n");
console.log(`package-lock.json: ${added} platform package(s) added`);
