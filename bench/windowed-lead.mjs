// Option lines in parallel windows (docs/decisions/112): a prototype of the lever measured there,
// outside the engine. A rendered choice (`decisiond render`, state first) is evaluated two ways
// into sequence 0 before its cue: "full", the prefix and every option line in one causal
// sequence, as the engine does; "block", each window of whole option lines (about `chunk`
// tokens) in a helper sequence holding a copy of the prefix, so it attends to the prefix and
// itself only, then the windows' KV cells merged into one sequence-state file with the engine's
// own code (sequence-state.ts: anything but the layout it knows throws), each window's keys
// rotated (RoPE, ropeShiftOf) from where it was evaluated to its place in the list, and
// loaded into sequence 0. Then the cue, and every label scored by its summed log-probability in
// both cases. Prints accuracy, agreement and the median time to put the list in; with
// `score=no`, times only. Uses node-llama-cpp's private `_copyStateFromOtherSequence`.
//
// Usage: npm run build && node bench/windowed-lead.mjs data=RENDERED.jsonl [limit=40] [chunk=512] [helpers=8]
//          [ctx=4096] [modes=full,block] [score=no] [model=GGUF] [out=RESULT.json]
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { servedModelFile } from "./workload.mjs";
const { parseSequenceState } = await import("../dist/engine/llama/sequence-state.js");
const { StateWriter } = await import("../dist/engine/llama/state-writer.js");
const { ropeShiftOf } = await import("../dist/engine/llama/windowed-lead.js");
const args = Object.fromEntries(process.argv.slice(2).map((a) => a.split("=")));
const MODEL = args.model ?? (await servedModelFile());
const CHUNK = Number(args.chunk ?? 512),
  HELPERS = Number(args.helpers ?? 8),
  LIMIT = Number(args.limit ?? 40);
const MODES = (args.modes ?? "full,block").split(",");
const ROTATE = args.rotate !== "no";
// The engine's own choice of llama.cpp build (setup.ts), as every server and test makes it.
const { usableLlama } = await import("../dist/engine/llama/setup.js");
const llama = await usableLlama("auto");
const model = await llama.loadModel({ modelPath: MODEL });
// The engine's own reading, writing and key rotation (sequence-state.ts, windowed-lead.ts).
const rotate = ROTATE ? ropeShiftOf(model) : () => {};
if (!rotate) throw new Error("the model's keys cannot be turned (windowed-lead.ts ropeShiftOf)");
const ctx = await model.createContext({
  contextSize: Number(args.ctx ?? 4096),
  sequences: HELPERS + 1,
  batchSize: 512,
  flashAttention: true,
  threads: 2,
});
const seq0 = ctx.getSequence();
const helpers = Array.from({ length: HELPERS }, () => ctx.getSequence());
const dir = mkdtempSync(join(tmpdir(), "windowed-lead-"));

/** Splits a branch into option chunks (whole lines, about CHUNK tokens) and its tail. */
function split(branch) {
  const lines = [];
  let start = 0;
  branch.forEach((t, i) => {
    if (t === 198) {
      lines.push(branch.slice(start, i + 1));
      start = i + 1;
    }
  });
  const rest = branch.slice(start);
  const end = lines.findIndex((l) => l.includes(2)); // the line holding <|im_end|>
  const options = lines.slice(0, end - 1),
    tail = [...lines.slice(end - 1).flat(), ...rest];
  const chunks = [];
  let cur = [];
  for (const l of options) {
    if (cur.length && cur.length + l.length > CHUNK) {
      chunks.push(cur);
      cur = [];
    }
    cur.push(...l);
  }
  if (cur.length) chunks.push(cur);
  return { chunks, tail };
}

async function putBlock(prefix, chunks) {
  const T0 = performance.now();
  await seq0.clearHistory();
  await seq0.evaluateWithoutGeneratingNewTokens(prefix);
  const P = prefix.length;
  let offset = P;
  const tokens = [...prefix, ...chunks.flat()];
  let writer;
  for (let r = 0; r < chunks.length; r += HELPERS) {
    const round = chunks.slice(r, r + HELPERS);
    await Promise.all(
      round.map(async (chunk, i) => {
        const h = helpers[i];
        await h._copyStateFromOtherSequence(seq0, P);
        await h.evaluateWithoutGeneratingNewTokens(chunk);
      }),
    );
    for (let i = 0; i < round.length; i++) {
      const path = `${dir}/h${i}.bin`;
      await helpers[i].saveStateToFile(path);
      const st = parseSequenceState(readFileSync(path));
      if (!writer) {
        writer = await StateWriter.create(`${dir}/merged.bin`, st, tokens, rotate);
        await writer.place(st, 0, P, 0, 0);
      }
      await writer.place(st, P, P + round[i].length, offset, offset - P);
      offset += round[i].length;
    }
  }
  T.eval += performance.now() - T0;
  const T1 = performance.now();
  await writer.finish();
  await seq0.loadStateFromFile(`${dir}/merged.bin`, { acceptRisk: true });
  T.merge += performance.now() - T1;
}
const T = { eval: 0, merge: 0 };

async function scoreLabels(tail, labels) {
  const out = await seq0.controlledEvaluate(
    tail.map((t, i) =>
      i === tail.length - 1 ? [t, { generateNext: { probabilities: true } }] : t,
    ),
  );
  const first = out[tail.length - 1].next.probabilities;
  const base = seq0.nextTokenIndex;
  const scores = new Array(labels.length);
  for (let r = 0; r < labels.length; r += HELPERS) {
    await Promise.all(
      labels.slice(r, r + HELPERS).map(async (label, i) => {
        let lp = Math.log(first.get(label[0]) ?? 1e-12);
        if (label.length > 1) {
          const h = helpers[i];
          await h._copyStateFromOtherSequence(seq0, base);
          const o = await h.controlledEvaluate(
            label.slice(0, -1).map((t) => [t, { generateNext: { probabilities: true } }]),
          );
          for (let j = 1; j < label.length; j++)
            lp += Math.log(o[j - 1].next.probabilities.get(label[j]) ?? 1e-12);
        }
        scores[r + i] = lp;
      }),
    );
  }
  return scores;
}

if (!args.data)
  throw new Error("data=RENDERED.jsonl: a `decisiond render --layout state-first` output");
const rows = readFileSync(args.data, "utf8")
  .trim()
  .split("\n")
  .slice(0, LIMIT)
  .map((l) => JSON.parse(l));
const result = {};
for (const m of MODES) result[m] = { right: 0, ms: [], top: [] };
for (const row of rows) {
  const { chunks, tail } = split(row.branch);
  for (const mode of MODES) {
    const t0 = performance.now();
    if (mode === "full") {
      await seq0.clearHistory();
      await seq0.evaluateWithoutGeneratingNewTokens([...row.prefix, ...chunks.flat()]);
    } else await putBlock(row.prefix, chunks);
    const ms = performance.now() - t0;
    const scores = args.score === "no" ? [0] : await scoreLabels(tail, row.labels);
    const top = scores.indexOf(Math.max(...scores));
    const r = result[mode];
    r.ms.push(ms);
    r.top.push(top);
    if (top === row.gold) r.right++;
  }
}
const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const m of MODES)
  console.log(
    m,
    `accuracy ${result[m].right}/${rows.length}`,
    `median put ${med(result[m].ms).toFixed(0)} ms`,
    `chunks ~${CHUNK}`,
  );
console.log("block eval+save ms", T.eval.toFixed(0), "merge+load ms", T.merge.toFixed(0));
if (MODES.length > 1)
  console.log(
    "agree",
    result[MODES[0]].top.filter((t, i) => t === result[MODES[1]].top[i]).length,
    "/",
    rows.length,
  );
if (args.out)
  writeFileSync(
    args.out,
    JSON.stringify(
      {
        chunk: CHUNK,
        helpers: HELPERS,
        rows: rows.map((r) => ({ id: r.id, gold: r.gold })),
        result,
      },
      null,
      1,
    ),
  );
