import type { Command } from "commander";
import { createWriteStream, writeFileSync } from "node:fs";
import { once } from "node:events";
import { toDecisionRequest } from "../decision/from-wire.js";
import { Decider, TUNED_READOUT } from "../decision/decide.js";
import { promptFingerprint } from "../decision/fingerprint.js";
import { hash32, splitOf, type Split } from "../evaluation/format.js";
import { resolveModel } from "../evaluation/model.js";
import { renderPlan } from "../evaluation/render.js";
import { DEFAULT_MODEL } from "../models/catalogue.js";
import { collect, loadItems, openEngine, splitOption } from "./eval-setup.js";
import { oneOf, positiveInt } from "./options.js";

interface RenderFlags {
  data?: string[];
  out: string;
  split: Split | "all";
  model: string;
  contextSize?: number;
  scoreLabels?: "numbers" | "levels";
  layout: "mixed" | "question-first" | "state-first";
}

/** Share of items rendered question first by `--layout mixed` (the rest state first). */
export const QUESTION_FIRST_SHARE = 0.3;

/**
 * Adds `render`: evaluation items (JSONL, see evaluation/format.ts) planned by the server's own
 * Decider with the tuned readout, written as token ids for `training/` (one line per question:
 * prefix, branch, label token sequences, gold label; evaluation/render.ts).
 *
 * @example decisiond render --data fit.jsonl --split fit --out examples.jsonl
 */
export function registerRenderCommand(program: Command): Command {
  return program
    .command("render")
    .description("write training examples as token ids, planned by the server's own prompt code")
    .option("--data <file>", "evaluation JSONL (repeatable)", collect)
    .requiredOption("--out <file>", "output JSONL, one question a line")
    .option(
      "--split <part>",
      "which rows: fit (the default: training never sees test rows), test or all",
      splitOption,
      "fit",
    )
    .option("--model <name|path>", "catalogue model name or path to a GGUF file", DEFAULT_MODEL)
    .option("--context-size <tokens>", "tokens per request (longer items are skipped)", positiveInt)
    .option(
      "--score-labels <style>",
      "score labels to train on: numbers (the tuned readout's) or levels (docs/decisions/074)",
      oneOf<"numbers" | "levels">("numbers", "levels"),
    )
    .option(
      "--layout <layout>",
      "mixed (the default: 30% of the items question first, by a hash of the id, the rest state first; the served adapter reads both), question-first or state-first (docs/decisions/087)",
      oneOf<RenderFlags["layout"]>("mixed", "question-first", "state-first"),
      "mixed",
    )
    .action(async (flags: RenderFlags) => {
      const items = loadItems(flags.data ?? [], flags.split);
      const model = await resolveModel(flags.model);
      const engine = await openEngine(model, flags);
      const deciderFor = (layout: "question-first" | "state-first") =>
        new Decider(engine, {
          ...TUNED_READOUT,
          ...(flags.scoreLabels ? { scoreLabels: flags.scoreLabels } : {}),
          debias: "off",
          layout,
          // Training reads every label to its end, the tokens after its parting one included.
          labelChain: "full",
        });
      const questionFirst = deciderFor("question-first");
      const stateFirst = deciderFor("state-first");
      const out = createWriteStream(flags.out);
      let written = 0;
      let skipped = 0;
      for (const item of items) {
        let lines: string[];
        try {
          const decider =
            flags.layout === "state-first" ||
            (flags.layout === "mixed" &&
              hash32(`layout:${item.id}`) / 2 ** 32 >= QUESTION_FIRST_SHARE)
              ? stateFirst
              : questionFirst;
          const plan = await decider.plan(toDecisionRequest(item.request));
          lines = renderPlan(item, plan).map((e) => JSON.stringify({ ...e, split: splitOf(e.id) }));
        } catch (error) {
          skipped++;
          process.stderr.write(`skipped ${item.id}: ${(error as Error).message}\n`);
          continue;
        }
        for (const line of lines) if (!out.write(line + "\n")) await once(out, "drain");
        written += lines.length;
      }
      out.end();
      await once(out, "finish");
      // The prompt format these examples were rendered in, for the adapter's bundle (run.sh).
      const format = await promptFingerprint({
        ...TUNED_READOUT,
        ...(flags.scoreLabels ? { scoreLabels: flags.scoreLabels } : {}),
      });
      writeFileSync(`${flags.out}.fingerprint`, format + "\n");
      process.stderr.write(
        `decisiond render: ${written} examples from ${items.length - skipped} items (${skipped} skipped) to ${flags.out}\n`,
      );
      await engine.close();
    });
}
