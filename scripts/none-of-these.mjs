#!/usr/bin/env node
/**
 * Whether a choice's "none of these" option is picked when it is the answer: each choice item of
 * the given `decisiond eval convert` files is asked twice with a none option added, once with its
 * answer taken away (the none option is then right) and once with it kept. The none option is
 * `none_of_these` described "None of the other options fits", or `other` undescribed, drawn with
 * a fixed seed.
 *
 *   node scripts/none-of-these.mjs items OUT.jsonl CONVERTED.jsonl…   # the items to evaluate
 *   node dist/cli/main.js eval --data OUT.jsonl --split all --no-flip --json RESULT.json
 *   node scripts/none-of-these.mjs table RESULT.json                    # accuracy and AUC per dataset
 *
 * The table: with the answer away, how often the none option is chosen (accuracy) and its mean
 * probability; with it kept, accuracy and how often none is chosen instead; the AUC of P(none)
 * between the two (how well it tells them apart, 0.5 = not at all).
 */
import { readFileSync, writeFileSync } from "node:fs";

const NONE = [
  ["none_of_these", "None of the other options fits"],
  ["other", null],
];

/** A seeded generator (mulberry32): the same items on every run. */
function seeded(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function items(out, files) {
  const random = seeded(7);
  const lines = [];
  for (const file of files)
    for (const line of readFileSync(file, "utf8").split("\n")) {
      if (!line.trim()) continue;
      const item = JSON.parse(line);
      const [[id, question]] = Object.entries(item.request.questions);
      if (question.type !== "choice" || Array.isArray(question.criteria)) continue;
      const gold = item.expected[id];
      for (const variant of ["absent", "present"]) {
        const [none, description] = NONE[Math.floor(random() * NONE.length)];
        const criteria = Object.fromEntries(
          Object.entries(question.criteria).filter(([o]) => variant === "present" || o !== gold),
        );
        criteria[none] = description;
        const request = structuredClone(item.request);
        request.questions[id].criteria = criteria;
        const expected = { [id]: variant === "absent" ? none : gold };
        lines.push(JSON.stringify({ ...item, id: `${item.id}#${variant}`, request, expected }));
      }
    }
  writeFileSync(out, lines.join("\n") + "\n");
  console.log(`${lines.length} items written to ${out}`);
}

function table(file) {
  const result = JSON.parse(readFileSync(file, "utf8"));
  for (const [system, rows] of Object.entries(result.outcomes)) {
    console.log(system);
    const byDataset = new Map();
    for (const row of rows) {
      const [dataset, variant] = row.dataset.split("#");
      const none = row.classes.findIndex((c) => NONE.some(([id]) => id === c));
      const p = row.probabilities;
      const top = p.indexOf(Math.max(...p));
      const list = byDataset.get(dataset) ?? [];
      list.push({ variant, pNone: p[none], right: top === row.gold, none: top === none });
      byDataset.set(dataset, list);
    }
    const line = (name, xs) => {
      const absent = xs.filter((x) => x.variant === "absent");
      const present = xs.filter((x) => x.variant === "present");
      const mean = (ys, f) => ys.reduce((s, y) => s + f(y), 0) / ys.length;
      let auc = 0;
      for (const a of absent)
        for (const b of present) auc += a.pNone > b.pNone ? 1 : a.pNone === b.pNone ? 0.5 : 0;
      auc /= absent.length * present.length;
      console.log(
        `  ${name.padEnd(12)} answer away: none chosen ${mean(absent, (x) => x.right).toFixed(2)}, ` +
          `P(none) ${mean(absent, (x) => x.pNone).toFixed(3)} | kept: right ` +
          `${mean(present, (x) => x.right).toFixed(2)}, none chosen ` +
          `${mean(present, (x) => x.none).toFixed(2)} | AUC ${auc.toFixed(2)} (n ${absent.length})`,
      );
    };
    for (const [dataset, xs] of [...byDataset].sort()) line(dataset, xs);
    line("all", [...byDataset.values()].flat());
  }
}

const [command, ...args] = process.argv.slice(2);
if (command === "items" && args.length >= 2) items(args[0], args.slice(1));
else if (command === "table" && args.length === 1) table(args[0]);
else {
  console.error("usage: none-of-these.mjs items OUT.jsonl CONVERTED.jsonl… | table RESULT.json");
  process.exit(2);
}
