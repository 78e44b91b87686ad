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
/** Keys of the entries this run creates. */
const fresh = new Set();
for (const [pkg, version] of Object.entries(llama.optionalDependencies ?? {})) {
  const key = `node_modules/${pkg}`;
  const short = pkg.split("/")[1];
  const resolved = `https://registry.npmjs.org/${pkg}/-/${short}-${version}.tgz`;
  if (lock.packages[key]) {
    // npm install drops `resolved` from entries it cannot fetch; put it back.
    if (!lock.packages[key].integrity && !lock.packages[key].resolved) {
      lock.packages[key] = { version, resolved, ...lock.packages[key] };
      added++;
    }
    continue;
  }
  const { os, cpu } = platformOf(short);
  lock.packages[key] = {
    version,
    resolved,
    cpu: [cpu],
    license: "MIT",
    optional: true,
    os: [os],
    engines: { node: ">=20.0.0" },
  };
  fresh.add(key);
  added++;
}
// New entries go after the last of node-llama-cpp's platform packages; nothing else moves.
const keys = Object.keys(lock.packages);
const ours = keys.filter((k) => k.startsWith("node_modules/@node-llama-cpp/")).sort();
const last = keys.findLastIndex(
  (k) => k.startsWith("node_modules/@node-llama-cpp/") && !fresh.has(k),
);
const order = keys.filter((k) => !fresh.has(k));
order.splice(
  last - [...fresh].filter((k) => keys.indexOf(k) < last).length + 1,
  0,
  ...ours.filter((k) => fresh.has(k)),
);
lock.packages = Object.fromEntries(order.map((k) => [k, lock.packages[k]]));
writeFileSync(lockPath, JSON.stringify(lock, null, 2) + "\n");
console.log(`package-lock.json: ${added} platform package entries added or completed`);
