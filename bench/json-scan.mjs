// What the JSON body scan (src/protocol/json-scan.ts, docs/decisions/084) costs beside the JSON.parse it
// guards, on bodies built to be slow for each: many short member names, many longer ones, and
// long names of one length (V8 hashes strings over 16,383 characters by their length alone). Each
// body is scanned in chunks of 64 KiB, as a request arrives; prints the scan's milliseconds per run
// and one parse.
//
// Usage: npm run build && node bench/json-scan.mjs [--runs 3]
import { parseArgs } from "node:util";
import { JsonBodyScanner, MAX_JSON_VALUES, MAX_SCANNED_DEPTH } from "../dist/protocol/json-scan.js";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "3" } } });
const runs = Number(args.runs);

/** Milliseconds to scan `body` a chunk at a time, and the status it refused it with, if any. */
function scan(body) {
  const scanner = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH);
  const start = process.hrtime.bigint();
  let refusal;
  for (let i = 0; i < body.length && !refusal; i += 65536)
    refusal = scanner.push(body.subarray(i, i + 65536));
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, status: refusal?.statusCode };
}

const object = (names) => `{${names.map((name, i) => `"${name}":${i}`).join(",")}}`;
const bodies = {
  "99,000 short names": object(Array.from({ length: 99_000 }, (_, i) => `k${i}`)),
  "99,000 names of 157 characters": object(
    Array.from({ length: 99_000 }, (_, i) => `${"n".repeat(150)}${i}`),
  ),
  "1,000 names of 16,400 characters": object(
    Array.from({ length: 1_000 }, (_, i) => `${"x".repeat(16_394)}${String(i).padStart(6, "0")}`),
  ),
};
for (const [name, text] of Object.entries(bodies)) {
  const body = Buffer.from(text);
  const scans = Array.from({ length: runs }, () => scan(body));
  const start = Date.now();
  JSON.parse(text);
  const parse = Date.now() - start;
  const ms = scans.map((s) => s.ms.toFixed(0)).join(" / ");
  console.log(
    `${name} (${(body.length / 1e6).toFixed(1)} MB): scan ${ms} ms, parse ${parse} ms` +
      (scans[0].status ? `, refused ${scans[0].status}` : ""),
  );
}
