// Option lines in parallel windows (docs/decisions/112): a prototype of the lever measured there,
// outside the engine. A rendered choice (`decisiond render`, state first) is evaluated two ways
// into sequence 0 before its cue: "full", the prefix and every option line in one causal
// sequence, as the engine does; "block", each window of whole option lines (about `chunk`
// tokens) in a helper sequence holding a copy of the prefix, so it attends to the prefix and
// itself only, then the windows' KV cells merged into one sequence-state file (llama.cpp's
// format, version 3, one stream, F16 keys: anything else throws), each window's keys rotated
// (RoPE, llama.cpp's NORM pairs) from where it was evaluated to its place in the list, and
// loaded into sequence 0. Then the cue, and every label scored by its summed log-probability in
// both cases. Prints accuracy, agreement and the median time to put the list in; with
// `score=no`, times only. Uses node-llama-cpp's private `_copyStateFromOtherSequence`.
//
// Usage: npm run build && node bench/windowed-lead.mjs data=RENDERED.jsonl [limit=40] [chunk=512] [helpers=8]
//          [ctx=4096] [modes=full,block] [score=no] [model=GGUF] [out=RESULT.json]
import { getLlama } from "node-llama-cpp";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { servedModelFile } from "./workload.mjs";
const args = Object.fromEntries(process.argv.slice(2).map((a) => a.split("=")));
const MODEL = args.model ?? (await servedModelFile());
const CHUNK = Number(args.chunk ?? 512),
  HELPERS = Number(args.helpers ?? 8),
  LIMIT = Number(args.limit ?? 40);
const MODES = (args.modes ?? "full,block").split(",");
const ROTATE = args.rotate !== "no";
const llama = await getLlama({ gpu: false });
const model = await llama.loadModel({ modelPath: MODEL });
const md = model.fileInfo.metadata;
const FREQ_BASE = md.llama?.rope?.freq_base ?? 10000;
const N_ROT = md.llama?.rope?.dimension_count ?? 64;
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

// f16 <-> f32
const f16buf = new DataView(new ArrayBuffer(4));
function h2f(h) {
  const s = h & 0x8000,
    e = (h >> 10) & 0x1f,
    m = h & 0x3ff;
  let v;
  if (e === 0) v = m * 2 ** -24;
  else if (e === 31) v = m ? NaN : Infinity;
  else v = (1 + m / 1024) * 2 ** (e - 15);
  return s ? -v : v;
}
function f2h(v) {
  f16buf.setFloat32(0, v);
  const x = f16buf.getUint32(0);
  const s = (x >>> 16) & 0x8000;
  let e = ((x >>> 23) & 0xff) - 127 + 15;
  let m = x & 0x7fffff;
  if (e >= 31) return s | 0x7c00;
  if (e <= 0) {
    if (e < -10) return s;
    m = (m | 0x800000) >> (1 - e);
    return s | ((m + 0x1000) >> 13);
  }
  const r = s | (e << 10) | (m >> 13);
  return m & 0x1000 ? r + 1 : r;
}

/** Parses a sequence-state file: tokens, and the one stream's cells (pos, K/V rows per layer). */
function parse(buf) {
  let o = 0;
  const u32 = () => {
    const v = buf.readUInt32LE(o);
    o += 4;
    return v;
  };
  const i32 = () => {
    const v = buf.readInt32LE(o);
    o += 4;
    return v;
  };
  const magic = u32(),
    version = u32();
  if (version !== 3) throw new Error("state version " + version);
  const n = u32();
  const tokens = [];
  for (let i = 0; i < n; i++) tokens.push(i32());
  const nStream = u32();
  let found;
  for (let s = 0; s < nStream; s++) {
    const count = u32();
    if (count === 0) continue;
    if (found) throw new Error("two streams");
    const pos = [];
    for (let i = 0; i < count; i++) {
      pos.push(i32());
      const ns = u32();
      if (ns !== 1) throw new Error("n_seq_id");
      i32();
    }
    const vTrans = u32(),
      nLayer = u32();
    if (vTrans) throw new Error("v_trans");
    // Every layer's keys, then every layer's values: each a type, a row size and one row a cell.
    const [k, v] = [[], []];
    for (const rows of [k, v])
      for (let l = 0; l < nLayer; l++) {
        const type = i32();
        const row = Number(buf.readBigUInt64LE(o));
        o += 8;
        rows.push({ type, row, data: buf.subarray(o, o + row * count) });
        o += row * count;
      }
    found = { s, count, pos, k, v, nLayer };
  }
  if (o !== buf.length) throw new Error(`trailing ${buf.length - o}`);
  return { magic, version, tokens, nStream, ...found };
}
/** Writes a state with the given cells: [{pos, from: parsed, index, delta}]. */
function write(header, tokens, cells, stream) {
  const { magic, version, nStream, nLayer, k: k0, v: v0 } = header;
  const parts = [];
  const u32 = (v) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    parts.push(b);
  };
  const i32 = (v) => {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    parts.push(b);
  };
  u32(magic);
  u32(version);
  u32(tokens.length);
  for (const t of tokens) i32(t);
  u32(nStream);
  for (let s = 0; s < nStream; s++) {
    if (s !== stream) {
      u32(0);
      continue;
    }
    u32(cells.length);
    for (const c of cells) {
      i32(c.pos);
      u32(1);
      i32(0);
    }
    u32(0);
    u32(nLayer);
    for (const [which, src] of [
      ["k", k0],
      ["v", v0],
    ])
      for (let l = 0; l < nLayer; l++) {
        const { type, row } = src[l];
        i32(type);
        const b = Buffer.alloc(8);
        b.writeBigUInt64LE(BigInt(row));
        parts.push(b);
        const out = Buffer.alloc(row * cells.length);
        cells.forEach((c, i) => {
          const r = c.from[which][l].data.subarray(c.index * row, (c.index + 1) * row);
          if (which === "k" && c.delta && ROTATE)
            rotateRow(r, out.subarray(i * row, (i + 1) * row), c.delta, type);
          else r.copy(out, i * row);
        });
        parts.push(out);
      }
  }
  return Buffer.concat(parts);
}
// llama.cpp NORM rope: pairs (2i, 2i+1) within each head, theta_i = pos * base^(-2i/n_rot).
const theta = Float64Array.from({ length: N_ROT / 2 }, (_, i) => FREQ_BASE ** ((-2 * i) / N_ROT));
const H2F = Float32Array.from({ length: 65536 }, (_, h) => h2f(h));
const F32 = new Float32Array(1),
  U32 = new Uint32Array(F32.buffer);
function f2hFast(v) {
  F32[0] = v;
  const x = U32[0];
  const s = (x >>> 16) & 0x8000;
  const e = ((x >>> 23) & 0xff) - 112;
  const m = x & 0x7fffff;
  if (e <= 0 || e >= 31) return f2h(v);
  const r = s | (e << 10) | (m >> 13);
  return m & 0x1000 ? r + 1 : r;
}
function rotateRow(src, dst, delta, type) {
  if (type !== 1) throw new Error("K type " + type); // GGML_TYPE_F16
  const n = src.length / 2;
  const cs =
    ROT.get(delta) ??
    ROT.set(
      delta,
      Float64Array.from({ length: N_ROT }, (_, j) =>
        j % 2 ? Math.sin(delta * theta[j >> 1]) : Math.cos(delta * theta[j >> 1]),
      ),
    ).get(delta);
  for (let j = 0; j < n; j += 2) {
    const i = j % N_ROT;
    const c = cs[i],
      s = cs[i + 1];
    const x0 = H2F[src[2 * j] | (src[2 * j + 1] << 8)],
      x1 = H2F[src[2 * j + 2] | (src[2 * j + 3] << 8)];
    const y0 = f2hFast(x0 * c - x1 * s),
      y1 = f2hFast(x0 * s + x1 * c);
    dst[2 * j] = y0 & 255;
    dst[2 * j + 1] = y0 >> 8;
    dst[2 * j + 2] = y1 & 255;
    dst[2 * j + 3] = y1 >> 8;
  }
}
const ROT = new Map();

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
  const cells = [];
  let header;
  const tokens = [...prefix];
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
      const st = parse(readFileSync(path));
      header ??= st;
      if (r === 0 && i === 0)
        st.pos.forEach((p, index) => {
          if (p < P) cells.push({ pos: p, from: st, index, delta: 0 });
        });
      st.pos.forEach((p, index) => {
        if (p >= P) cells.push({ pos: p + (offset - P), from: st, index, delta: offset - P });
      });
      tokens.push(...round[i]);
      offset += round[i].length;
    }
  }
  T.eval += performance.now() - T0;
  const T1 = performance.now();
  cells.sort((a, b) => a.pos - b.pos);
  const merged = write(header, tokens, cells, header.s);
  writeFileSync(`${dir}/merged.bin`, merged);
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
