import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { openLlamaEngine } from "../src/engine/llama/index.js";
import { Decider, TUNED_READOUT } from "../src/decision/decide.js";

/**
 * The decision-tuning pipeline end to end on a tiny generated model (training/tiny_model.py: the
 * default model's tokenizer, 2 random blocks): evaluation items -> `decisiond render` -> a few
 * LoRA steps (training/train.py) -> GGUF adapter (training/export_gguf.py, llama.cpp's converter)
 * -> loaded by the engine -> the label probabilities move. The first run creates the
 * training environment (training/setup.sh: PyTorch, transformers, peft; a few minutes).
 */

const root = join(import.meta.dirname, "..");
let work: string;
let python: string;

/**
 * Runs a command to completion and returns its stdout. Asynchronous: a synchronous child (the
 * environment set-up takes minutes) would block the test worker past vitest's RPC timeout.
 * @throws the child's error, with its stderr, when it exits non-zero.
 */
async function run(file: string, args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(file, args, {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/**
 * Renders `rows` (evaluation items) on the tiny model with `decisiond render` and marks every
 * example fit, as train.py accepts only fit rows.
 * @returns the token file's path and its lines, as rendered
 */
async function renderFit(
  rows: readonly unknown[],
  name: string,
): Promise<{ tokens: string; lines: string[] }> {
  const data = join(work, `${name}.jsonl`);
  writeFileSync(data, rows.map((i) => JSON.stringify(i)).join("\n") + "\n");
  const tokens = join(work, `${name}.tokens.jsonl`);
  const tiny = join(work, "tiny.gguf");
  await run("node", [
    "dist/cli/main.js",
    ...["render", "--model", tiny, "--data", data, "--split", "all", "--out", tokens],
  ]);
  const lines = readFileSync(tokens, "utf8").trim().split("\n");
  writeFileSync(
    tokens,
    lines.map((l) => JSON.stringify({ ...JSON.parse(l), split: "fit" })).join("\n") + "\n",
  );
  return { tokens, lines };
}

const items = [
  {
    id: "sst2:9001",
    state: "a warm, funny and wonderfully acted film",
    expected: true,
  },
  {
    id: "sst2:9003",
    state: "dull, lifeless and far too long",
    expected: false,
  },
].map((row) => ({
  id: row.id,
  request: {
    model: "decisiond-1.0-experimental",
    state: row.state,
    questions: {
      positive: { type: "noul", instructions: "Is the sentiment of the text positive?" },
      tone: {
        type: "choice",
        instructions: "What is the tone?",
        criteria: { upbeat: "Likes it", gloomy: "Dislikes it" },
      },
    },
  },
  expected: { positive: row.expected, tone: row.expected ? "upbeat" : "gloomy" },
}));

describe("training smoke test (tiny model)", () => {
  beforeAll(async () => {
    python = (await run("bash", ["training/setup.sh"])).trim().split("\n").at(-1)!;
    work = mkdtempSync(join(tmpdir(), "decisiond-train-"));
    const source = inject("modelPath");
    await run(python, [
      "training/tiny_model.py",
      "--source",
      source,
      "--out",
      join(work, "tiny.gguf"),
    ]);
  }, 1_200_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("renders, trains, exports and serves an adapter that changes the answers", async () => {
    const tiny = join(work, "tiny.gguf");
    const data = join(work, "items.jsonl");
    writeFileSync(data, items.map((i) => JSON.stringify(i)).join("\n") + "\n");
    // Render refuses test rows by default: these ids hash to the fit split (format.ts splitOf).
    const tokens = join(work, "tokens.jsonl");
    await run("node", [
      "dist/cli/main.js",
      "render",
      "--model",
      tiny,
      "--data",
      data,
      "--split",
      "all",
      "--out",
      tokens,
    ]);
    const lines = readFileSync(tokens, "utf8")
      .trim()
      .split("\n")
      .map(
        (l) =>
          JSON.parse(l) as { question: string; split: string; labels: number[][]; gold: number },
      );
    expect(lines).toHaveLength(4);
    expect(lines.every((l) => l.labels.length === 2 && (l.gold === 0 || l.gold === 1))).toBe(true);
    // train.py trains on fit rows only; mark these as fit for the smoke run.
    writeFileSync(
      tokens,
      lines.map((l) => JSON.stringify({ ...l, split: "fit" })).join("\n") + "\n",
    );

    const adapterDir = join(work, "adapter");
    await run(python, [
      "training/train.py",
      "--model",
      tiny,
      "--data",
      tokens,
      "--out",
      adapterDir,
      "--epochs",
      "4",
      "--max-steps",
      "4",
      "--lr",
      "0.05",
      "--threads",
      "1",
      // LoRA on the top block only, as the full run does: the later steps reuse the cached
      // output of the frozen block below (train.py LowerCache).
      "--layers",
      "1",
    ]);
    const summary = JSON.parse(readFileSync(join(adapterDir, "summary.json"), "utf8")) as {
      steps: number;
    };
    expect(summary.steps).toBe(4);
    const adapter = join(work, "tiny.decision.gguf");
    await run(python, ["training/export_gguf.py", "--adapter", adapterDir, "--out", adapter]);
    expect(existsSync(adapter)).toBe(true);

    const request = {
      state: items[0]!.request.state,
      questions: [
        [
          "positive",
          { type: "noul" as const, instructions: "Is the sentiment of the text positive?" },
        ],
      ] as const,
    };
    const answer = async (adapterPath?: string, state: unknown = request.state) => {
      const engine = await openLlamaEngine({
        modelPath: tiny,
        ...(adapterPath ? { adapterPath } : {}),
      });
      try {
        const decider = new Decider(engine, { ...TUNED_READOUT });
        const result = await decider.decide({
          state: state as typeof request.state,
          questions: request.questions,
        });
        const a = result.answers.positive!;
        return a.type === "noul" ? a.noul : NaN;
      } finally {
        await engine.close();
      }
    };
    const base = await answer();
    const tuned = await answer(adapter);
    expect(Math.abs(tuned - base)).toBeGreaterThan(1e-3);

    // An adapter merged with itself (training/merge_adapters.py, weights summing to 1) is the same
    // update, re-factored by the SVD: it answers as the adapter does, not as the base.
    const merged = join(work, "tiny.merged.gguf");
    await run(python, [
      "training/merge_adapters.py",
      ...["--adapter", adapter, "--adapter", adapter, "--adapter", adapter],
      ...["--weights", "0.5,0.25,0.25", "--out", merged],
    ]);
    expect(Math.abs((await answer(merged)) - tuned)).toBeLessThan(Math.abs(tuned - base) / 10);

    // Training continued from the GGUF adapter (train.py --init-adapter, q and k un-permuted back
    // to Hugging Face's order) for no step and exported again is the same adapter.
    const continuedDir = join(work, "continued");
    await run(python, [
      "training/train.py",
      ...["--model", tiny, "--data", tokens, "--out", continuedDir, "--minutes", "0"],
      ...["--threads", "1", "--layers", "1", "--init-adapter", adapter],
    ]);
    // Every LoRA weight is the trained one, to the f16 rounding of the GGUF file.
    await run(python, [
      "-c",
      "import sys, numpy as np; from safetensors.numpy import load_file as f; " +
        "a, b = f(sys.argv[1]), f(sys.argv[2]); assert set(a) == set(b); " +
        "bad = [k for k in a if not np.allclose(a[k].astype('f4'), b[k].astype('f4'), rtol=1e-3, atol=1e-4)]; " +
        "assert not bad, bad",
      join(adapterDir, "adapter_model.safetensors"),
      join(continuedDir, "adapter_model.safetensors"),
    ]);
    const continued = join(work, "tiny.continued.gguf");
    await run(python, ["training/export_gguf.py", "--adapter", continuedDir, "--out", continued]);
    expect(Math.abs((await answer(continued)) - tuned)).toBeLessThan(Math.abs(tuned - base) / 10);

    // Anchored replay (continuation_mix.py --anchor) is learned from the answers of the adapter
    // the run starts from, not from its labels: the same steps on flipped labels move the answer
    // when they are labels, and leave it where it was when they are anchored. The yes/no
    // questions only: their labels are one token each, so an anchored one has no gold term left
    // (a longer label's single-candidate nodes keep theirs, train.py step_loss).
    const flipped = lines
      .filter((l) => l.question === "positive")
      .map((l) => ({ ...l, split: "fit", gold: 1 - l.gold }));
    expect(flipped.every((l) => l.labels.every((label) => label.length === 1))).toBe(true);
    const flippedFile = join(work, "flipped.tokens.jsonl");
    writeFileSync(flippedFile, flipped.map((l) => JSON.stringify(l)).join("\n") + "\n");
    const focusFile = join(work, "focus.tokens.jsonl");
    writeFileSync(focusFile, JSON.stringify(flipped[0]) + "\n");
    const anchoredFile = join(work, "anchored.tokens.jsonl");
    await run(python, [
      "training/continuation_mix.py",
      ...["--tokens", flippedFile, "--focus", focusFile, "--replay", "100", "--anchor"],
      ...["--out", anchoredFile],
    ]);
    const mix = readFileSync(anchoredFile, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: string; anchor?: boolean });
    expect(mix).toHaveLength(3); // the focus question, then both as replay
    expect(mix.filter((l) => l.anchor === true)).toHaveLength(2);
    const anchoredOnly = join(work, "anchored-only.tokens.jsonl");
    writeFileSync(
      anchoredOnly,
      mix
        .filter((l) => l.anchor)
        .map((l) => JSON.stringify(l))
        .join("\n") + "\n",
    );
    const continueOn = async (name: string, file: string): Promise<number> => {
      const dir = join(work, name);
      await run(python, [
        "training/train.py",
        ...["--model", tiny, "--data", file, "--out", dir, "--epochs", "4", "--max-steps", "4"],
        ...["--lr", "0.05", "--threads", "1", "--layers", "1", "--init-adapter", adapter],
      ]);
      const out = join(work, `tiny.${name}.gguf`);
      await run(python, ["training/export_gguf.py", "--adapter", dir, "--out", out]);
      return answer(out);
    };
    const relearned = await continueOn("flipped", flippedFile);
    const anchored = await continueOn("anchored", anchoredOnly);
    expect(Math.abs(relearned - tuned)).toBeGreaterThan(1e-3);
    expect(Math.abs(anchored - tuned)).toBeLessThan(Math.abs(relearned - tuned) / 10);

    // Note twins (note_twins.py, continuation_mix.py --twins, train.py take_twin_teachers): each
    // question as it is and with a note naming an answer appended to its state; the noted twin
    // is learned from the starting adapter's answer to the clean one, so the answer with the note
    // comes closer to the answer without it.
    const mixFile = join(work, "twins-mix.jsonl");
    writeFileSync(
      mixFile,
      items
        .map((i) => ({
          ...i,
          request: { ...i.request, questions: { positive: i.request.questions.positive } },
          expected: { positive: i.expected.positive },
        }))
        .map((i) => JSON.stringify(i))
        .join("\n") + "\n",
    );
    const twinsFile = join(work, "twins.jsonl");
    await run(python, ["training/note_twins.py", "--mix", mixFile, "--out", twinsFile, "--n", "2"]);
    const twins = readFileSync(twinsFile, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: string; twin?: string; request: { state: unknown } });
    expect(twins.map((t) => t.id).sort()).toEqual([
      "sst2:9001",
      "sst2:9001~note",
      "sst2:9003",
      "sst2:9003~note",
    ]);
    const noted = twins.find((t) => t.id === "sst2:9001~note")!;
    expect(noted.twin).toBe("sst2:9001");
    expect(noted.request.state).not.toEqual(items[0]!.request.state);
    const { tokens: twinTokens } = await renderFit(twins, "twins");
    const twinMix = join(work, "twins-mix.tokens.jsonl");
    await run(python, [
      "training/continuation_mix.py",
      ...["--tokens", twinTokens, "--twins", twinTokens, "--replay", "0", "--out", twinMix],
    ]);
    const marked = readFileSync(twinMix, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: string; anchor?: boolean; twin?: string });
    expect(marked).toHaveLength(4);
    expect(marked.every((l) => l.anchor === true)).toBe(true);
    expect(marked.filter((l) => l.twin).map((l) => `${l.twin}~note` === l.id)).toEqual([
      true,
      true,
    ]);
    const gap = async (adapterPath: string) =>
      Math.abs((await answer(adapterPath, noted.request.state)) - (await answer(adapterPath)));
    const before = await gap(adapter);
    await continueOn("twins", twinMix); // writes tiny.twins.gguf
    const after = await gap(join(work, "tiny.twins.gguf"));
    expect(before).toBeGreaterThan(1e-4);
    expect(after).toBeLessThan(before / 2);
  }, 900_000);

  it("trains a plan's runs side by side, each without its datasets (gpu_runs.py)", async () => {
    const tiny = join(work, "tiny.gguf");
    // The same rows under a second dataset name, so one run can leave that dataset out.
    const rows = [...items, ...items.map((i) => ({ ...i, id: i.id.replace("sst2:", "mood:") }))];
    const { tokens } = await renderFit(rows, "two-datasets");
    const plan = join(work, "plan.json");
    writeFileSync(
      plan,
      JSON.stringify([
        { name: "all", exclude: [], init: null, lr: 0.05 },
        { name: "without-mood", exclude: ["mood"], init: null, lr: 0.05 },
        { name: "rank-8", exclude: [], init: null, lr: 0.05, args: "--rank 8 --alpha 16" },
      ]),
    );
    const out = join(work, "runs");
    const log = await run(python, [
      "training/gpu_runs.py",
      ...["--model", tiny, "--data", tokens, "--plan", plan, "--out", out],
      ...["--device", "cpu", "--max-steps", "2", "--train-args", "--layers 1 --batch-tokens 4096"],
    ]);
    expect(log).toContain('gpu_runs: {"all": 8, "without-mood": 4, "rank-8": 8}');
    for (const [name, examples, rank] of [
      ["all", 8, 16],
      ["without-mood", 4, 16],
      ["rank-8", 8, 8],
    ] as const) {
      const summary = JSON.parse(
        readFileSync(join(out, name, "adapter", "summary.json"), "utf8"),
      ) as { examples: number; steps: number; lr: number; rank: number };
      expect(summary).toMatchObject({ examples, lr: 0.05, rank });
      expect(summary.steps).toBeGreaterThan(0);
      expect(existsSync(join(out, name, "adapter", "adapter_model.safetensors"))).toBe(true);
    }
  }, 600_000);

  it("carries a sparse base: unused embedding rows zeroed, the vocabulary term over the rest", async () => {
    const tiny = join(work, "tiny.gguf");
    const { tokens, lines } = await renderFit(items, "sparse");
    const used = new Set<number>();
    for (const l of lines) {
      const e = JSON.parse(l) as { prefix: number[]; branch: number[]; labels: number[][] };
      for (const t of [...e.prefix, ...e.branch, ...e.labels.flat()]) used.add(t);
    }
    const sparse = join(work, "sparse.gguf");
    const rows = join(work, "rows.json");
    await run(python, [
      "training/sparse_base.py",
      ...["--model", tiny, "--data", tokens, "--out", sparse, "--rows", rows],
    ]);
    expect(JSON.parse(readFileSync(rows, "utf8"))).toEqual([...used].sort((a, b) => a - b));
    // Every kept row is the base's own, every other row is zero, and nothing else changed.
    const check = await run(python, [
      "-c",
      [
        "import sys, json, numpy as np",
        "from gguf import GGUFReader",
        "a, b = GGUFReader(sys.argv[1]), GGUFReader(sys.argv[2])",
        "keep = json.load(open(sys.argv[3]))",
        "ea = next(t for t in a.tensors if t.name == 'token_embd.weight').data",
        "eb = next(t for t in b.tensors if t.name == 'token_embd.weight').data",
        "drop = np.ones(len(ea), bool); drop[keep] = False",
        "same = all(np.array_equal(x.data, y.data) for x, y in zip(a.tensors, b.tensors) if x.name != 'token_embd.weight')",
        "print(json.dumps([bool(np.array_equal(ea[keep], eb[keep])), bool((eb[drop] == 0).all()), int(drop.sum()), same]))",
      ].join("\n"),
      ...[tiny, sparse, rows],
    ]);
    const [keptSame, droppedZero, dropped, restSame] = JSON.parse(check.trim()) as [
      boolean,
      boolean,
      number,
      boolean,
    ];
    expect({ keptSame, droppedZero, restSame }).toEqual({
      keptSame: true,
      droppedZero: true,
      restSame: true,
    });
    expect(dropped).toBeGreaterThan(0);
    const out = join(work, "sparse-adapter");
    const log = await run(python, [
      "training/train.py",
      ...["--model", sparse, "--data", tokens, "--out", out, "--vocab-rows", rows],
      ...["--max-steps", "2", "--lr", "0.05", "--threads", "1", "--layers", "1"],
    ]);
    expect(log).toContain(`vocab-rows: the full-vocabulary term over ${used.size} tokens`);
    const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as {
      steps: number;
      final_loss_smoothed: number;
    };
    expect(summary.steps).toBe(2);
    expect(Number.isFinite(summary.final_loss_smoothed)).toBe(true);
    // The same run on the whole base: the rows zeroed are the rows the term leaves out, so the
    // sparse base trains as the base does.
    const whole = join(work, "whole-adapter");
    await run(python, [
      "training/train.py",
      ...["--model", tiny, "--data", tokens, "--out", whole, "--vocab-rows", rows],
      ...["--max-steps", "2", "--lr", "0.05", "--threads", "1", "--layers", "1"],
    ]);
    const wholeSummary = JSON.parse(readFileSync(join(whole, "summary.json"), "utf8")) as {
      final_loss_smoothed: number;
    };
    expect(summary.final_loss_smoothed).toBeCloseTo(wholeSummary.final_loss_smoothed, 5);
    // Rows from another render are refused before any step, not met as an index error later.
    const fewer = join(work, "fewer-rows.json");
    writeFileSync(fewer, JSON.stringify([...used].slice(0, 1)));
    await expect(
      run(python, [
        "training/train.py",
        ...[
          "--model",
          sparse,
          "--data",
          tokens,
          "--out",
          join(work, "refused"),
          "--vocab-rows",
          fewer,
        ],
        ...["--max-steps", "1", "--threads", "1", "--layers", "1"],
      ]),
    ).rejects.toThrow(/lacks tokens of example sst2:/);
  }, 600_000);
});
