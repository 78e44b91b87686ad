// A choice of hundreds of real options (docs/decisions/113): the `test` rows of one intent
// dataset asked with the union of several datasets' intents, each with its description, or its
// label in words where the dataset has none. Reads `decisiond eval convert` outputs (one for the
// rows, one row of each other dataset for its intents) and writes eval items, gold unchanged.
//
// Usage: npm run build && for d in banking77 atis snips hwu64 goemotions emotion; do
//          node dist/cli/main.js eval convert --dataset $d --split test --limit 40 --out /tmp/$d.jsonl; done
//        node bench/union-intents.mjs rows=/tmp/banking77.jsonl \
//          with=/tmp/atis.jsonl,/tmp/snips.jsonl,/tmp/hwu64.jsonl,/tmp/goemotions.jsonl,/tmp/emotion.jsonl \
//          out=/tmp/banking77-union.jsonl
import { readFileSync, writeFileSync } from "node:fs";

const args = Object.fromEntries(process.argv.slice(2).map((a) => a.split("=")));
if (!args.rows || !args.with || !args.out) throw new Error("rows=F with=F,F,… out=F");
const lines = (file) =>
  readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
/** The one question of an item, by reference. */
const questionOf = (item) => Object.values(item.request.questions)[0];

const rows = lines(args.rows);
const union = {};
for (const item of [rows[0], ...args.with.split(",").map((file) => lines(file)[0])])
  for (const [id, description] of Object.entries(questionOf(item).criteria))
    union[id] ??= description ?? id.replaceAll("_", " ").replace(/^./, (c) => c.toUpperCase());
for (const item of rows) questionOf(item).criteria = union;
writeFileSync(args.out, rows.map((item) => JSON.stringify(item)).join("\n") + "\n");
console.log(`${rows.length} rows, ${Object.keys(union).length} options, to ${args.out}`);
