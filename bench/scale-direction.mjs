// Which way does each score scale run (docs/decisions/115)? Every scale below is written rising
// (from the lowest value of the quality asked about up) and asked both ways (as written, and
// reversed: falling), with its first and last level texts as states, on five shown scales: the
// caller's own levels (`given`, the asking of 2026-11-30), numbers only, `lowest`…`highest` (the
// asking since 2026-12-01), `low`…`high`, `not at all`…`extremely`. A scale reads as falling when
// its first text is placed above its last by more than 0.1 of its span (ORIENTATION_MARGIN).
// Prints each scale's (first − last) / span per shown scale, then per shown scale the falling
// scales found and the rising ones reversed. `dev` holds the scales the asking was first measured
// on (rebuilt); `fresh` was written before any shown scale was measured on it.
//
// Usage: npm run build && node bench/scale-direction.mjs [--set dev|fresh] [--json OUT]
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: { set: { type: "string", default: "dev" }, json: { type: "string" } },
});
const dev = [
  ["How angry is the customer?", ["calm", "annoyed", "frustrated", "very angry"]],
  ["How urgent is this ticket?", ["not urgent", "somewhat urgent", "urgent", "extremely urgent"]],
  [
    "How satisfied is the customer?",
    ["very dissatisfied", "dissatisfied", "neutral", "satisfied", "very satisfied"],
  ],
  ["How risky is this transaction?", ["no risk", "low risk", "medium risk", "high risk"]],
  ["How formal is the writing?", ["very casual", "casual", "neutral", "formal", "very formal"]],
  [
    "How confident does the author sound?",
    ["very unsure", "unsure", "somewhat confident", "very confident"],
  ],
  ["How severe is this bug?", ["trivial", "minor", "major", "critical"]],
  [
    "How likely is this customer to cancel?",
    ["very unlikely", "unlikely", "likely", "very likely"],
  ],
  ["How polite is the message?", ["rude", "neutral", "polite", "very polite"]],
  ["How complex is this request?", ["trivial", "simple", "moderate", "complex"]],
  ["How toxic is this comment?", ["not toxic", "mildly toxic", "toxic", "extremely toxic"]],
  [
    "How relevant is the document to the query?",
    ["irrelevant", "somewhat relevant", "relevant", "highly relevant"],
  ],
  [
    "What is the sentiment of this review?",
    ["very negative", "negative", "neutral", "positive", "very positive"],
  ],
  [
    "How related are the two sentences?",
    ["unrelated", "slightly related", "somewhat related", "closely related", "nearly identical"],
  ],
  [
    "How similar in meaning are the two sentences?",
    ["no overlap", "same topic", "partly equivalent", "mostly equivalent", "equivalent"],
  ],
  [
    "How true is this statement?",
    ["pants on fire", "false", "barely true", "half true", "mostly true", "true"],
  ],
  [
    "How good is the product according to the review?",
    ["terrible", "poor", "average", "good", "excellent"],
  ],
  [
    "How likely is this message spam?",
    ["certainly not spam", "probably not spam", "probably spam", "certainly spam"],
  ],
  ["How easy is this text to read?", ["very hard", "hard", "easy", "very easy"]],
  ["What priority should this ticket get?", ["low", "medium", "high", "urgent"]],
  [
    "How likely is this order fraudulent?",
    ["legitimate", "slightly suspicious", "suspicious", "almost certainly fraud"],
  ],
  [
    "How much does the reply agree with the proposal?",
    ["strongly disagrees", "disagrees", "neutral", "agrees", "strongly agrees"],
  ],
  [
    "How much pain does the patient report?",
    ["no pain", "mild pain", "moderate pain", "severe pain"],
  ],
  ["How expert is the author?", ["novice", "intermediate", "advanced", "expert"]],
  [
    "How sarcastic is the message?",
    ["sincere", "slightly sarcastic", "sarcastic", "very sarcastic"],
  ],
  ["How helpful is the answer?", ["useless", "slightly helpful", "helpful", "very helpful"]],
  ["How large is the company?", ["tiny", "small", "medium", "large", "huge"]],
  ["How afraid is the writer?", ["calm", "uneasy", "scared", "terrified"]],
  ["How angry is the customer?", ["calm", "irritated", "furious"]],
  ["How upset is the customer?", ["happy", "upset", "livid"]],
  ["How aggressive is the message?", ["peaceful", "aggressive", "very aggressive"]],
  ["How long is the message?", ["short", "long", "very long"]],
  [
    "How angry is the customer?",
    [
      "completely calm",
      "calm",
      "relaxed",
      "slightly annoyed",
      "annoyed",
      "irritated",
      "frustrated",
      "angry",
      "very angry",
      "livid",
    ],
  ],
];
const fresh = [
  [
    "How positive is the customer's feedback?",
    ["very negative", "negative", "mixed", "positive", "very positive"],
  ],
  ["How serious is the security incident?", ["informational", "low", "medium", "high", "critical"]],
  ["How confident is the diagnosis?", ["speculative", "uncertain", "likely", "certain"]],
  ["How much effort will this task take?", ["minutes", "hours", "days", "weeks"]],
  ["How clear is the bug report?", ["incomprehensible", "vague", "clear", "very clear"]],
  [
    "How strongly does the tweet support the policy?",
    ["strongly opposes", "opposes", "neutral", "supports", "strongly supports"],
  ],
  ["How happy is the user?", ["miserable", "unhappy", "content", "happy", "delighted"]],
  [
    "How professional is the email?",
    ["unprofessional", "somewhat professional", "professional", "highly professional"],
  ],
  [
    "How much does the applicant know about Python?",
    ["nothing", "basics", "working knowledge", "expert"],
  ],
  [
    "How dangerous is the situation described?",
    ["safe", "slightly dangerous", "dangerous", "life-threatening"],
  ],
  ["How hot is the weather described?", ["freezing", "cold", "mild", "warm", "scorching"]],
  ["How expensive is the item?", ["cheap", "affordable", "pricey", "very expensive"]],
  ["How engaged is the student?", ["disengaged", "distracted", "attentive", "very engaged"]],
  ["How complete is the answer?", ["missing", "partial", "mostly complete", "complete"]],
  ["How loud is the noise complaint?", ["quiet", "noticeable", "loud", "deafening"]],
  ["How trustworthy is the seller?", ["scam", "dubious", "reliable", "highly trustworthy"]],
];
const set = { dev, fresh }[args.set];
if (!set) throw new Error(`--set: dev or fresh; got ${args.set}`);
const dist = new URL("../dist", import.meta.url).href;
const { Decider, TUNED_READOUT } = await import(`${dist}/decision/decide.js`);
const { openLlamaEngine } = await import(`${dist}/engine/llama/index.js`);
const { resolveModel } = await import(`${dist}/evaluation/model.js`);
const { adapterWeights } = await import(`${dist}/service/model.js`);
const model = await resolveModel("smollm2-135m-instruct", false, undefined);
const engine = await openLlamaEngine({
  ...(await adapterWeights(model.modelPath, model.adapterPath)),
  id: model.modelId,
});
// Placed as asked, uncalibrated, never reversed.
const decider = new Decider(engine, {
  ...TUNED_READOUT,
  scaleOrientation: false,
  calibration: undefined,
});
const ends = (low, high) => (levels) =>
  levels.map((_, i) => (i === 0 ? low : i === levels.length - 1 ? high : null));
const shown = {
  given: (levels) => levels,
  numbers: (levels) => levels.map(() => null),
  lowest: ends("lowest", "highest"),
  low: ends("low", "high"),
  extremely: ends("not at all", "extremely"),
};
async function place(state, instructions, levels) {
  const question = { type: "score", instructions, levels };
  return (await decider.decide({ state, questions: [["q", question]] })).answers.q.score;
}
const rows = [];
for (const [instructions, rising] of set) {
  for (const direction of ["rising", "falling"]) {
    const levels = direction === "rising" ? rising : [...rising].reverse();
    const row = { instructions, direction, levels };
    for (const [name, show] of Object.entries(shown)) {
      const first = await place(levels[0], instructions, show(levels));
      const last = await place(levels.at(-1), instructions, show(levels));
      row[name] = (first - last) / (levels.length - 1);
    }
    rows.push(row);
    const figures = Object.keys(shown).map((name) => `${name} ${row[name].toFixed(2)}`);
    console.log(
      `${direction.padEnd(7)} ${instructions.slice(0, 40).padEnd(40)} ${figures.join("  ")}`,
    );
  }
}
const summary = {};
for (const name of Object.keys(shown)) {
  const found = rows.filter((r) => r.direction === "falling" && r[name] > 0.1).length;
  const reversed = rows.filter((r) => r.direction === "rising" && r[name] > 0.1).length;
  summary[name] = { found, reversed, scales: set.length };
  console.log(
    `${name}: falling found ${found}/${set.length}, rising reversed ${reversed}/${set.length}`,
  );
}
if (args.json)
  writeFileSync(
    args.json,
    JSON.stringify(
      { command: process.argv.slice(1).join(" "), date: new Date().toISOString(), summary, rows },
      null,
      1,
    ),
  );
await engine.close();
