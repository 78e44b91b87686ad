import { readFileSync } from "node:fs";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { promptFingerprint } from "../src/decision/fingerprint.js";
import { TUNED_READOUT } from "../src/decision/options.js";
import { readAdapterBundle } from "../src/models/bundle.js";
import { serveOptions, toServeConfig, type ServeFlags } from "../src/cli/serve-config.js";

/**
 * The model bundle: the shipped adapter records the fingerprint of the prompt format it was
 * trained on, and the prompt code must still render that format. Editing the prompt code (the
 * system message, the state block, a question type's lines, the layout, the labels) without
 * retraining the adapter, or without re-fingerprinting it on purpose, fails here.
 */
describe("the prompt format fingerprint", () => {
  it("the shipped adapter was trained on the format this code renders", async () => {
    const bundle = readAdapterBundle("adapters/smollm2-135m-instruct.decision.gguf");
    expect(bundle?.promptFingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(await promptFingerprint(TUNED_READOUT)).toBe(bundle!.promptFingerprint);
  });

  it("is stable, and moves with every prompt setting", async () => {
    const base = await promptFingerprint(TUNED_READOUT);
    expect(await promptFingerprint({ ...TUNED_READOUT })).toBe(base);
    // Both layouts are in every format: the setting chooses which one is served.
    for (const layout of ["state-first", "question-first"] as const)
      expect(await promptFingerprint({ ...TUNED_READOUT, layout })).toBe(base);
    const changed = [
      { ...TUNED_READOUT, questionContrast: true },
      { ...TUNED_READOUT, systemMessage: `${TUNED_READOUT.systemMessage} ` },
      { ...TUNED_READOUT, scoreLabels: "levels" as const },
      { ...TUNED_READOUT, labels: "fixed" as const },
      { ...TUNED_READOUT, maxWordLabelTokens: 12 },
    ];
    const prints = await Promise.all(changed.map((s) => promptFingerprint(s)));
    expect(new Set([base, ...prints]).size).toBe(changed.length + 1);
  });

  it("the bundle reader takes the summary beside the adapter", () => {
    const summary = JSON.parse(
      readFileSync("adapters/smollm2-135m-instruct.decision.json", "utf8"),
    ) as { promptFingerprint?: string };
    expect(readAdapterBundle("adapters/smollm2-135m-instruct.decision.gguf")).toEqual({
      promptFingerprint: summary.promptFingerprint,
    });
    expect(readAdapterBundle("adapters/no-such.gguf")).toBeUndefined();
  });
});

/** The readout `decisiond serve` would start with, from its flags and `DECISIOND_*` variables. */
function serveReadout(argv: string[], env: Record<string, string> = {}) {
  const command = new Command().exitOverride().configureOutput({ writeErr: () => {} });
  for (const option of serveOptions()) command.addOption(option);
  const names = ["DECISIOND_LAYOUT", "DECISIOND_TRIE_TOLERANCE"];
  const before = names.map((name) => process.env[name]);
  for (const name of names)
    if (env[name] === undefined) delete process.env[name];
    else process.env[name] = env[name];
  try {
    command.parse(argv, { from: "user" });
  } finally {
    names.forEach((name, i) => {
      if (before[i] === undefined) delete process.env[name];
      else process.env[name] = before[i];
    });
  }
  return toServeConfig(command.opts<ServeFlags>(), {}).service.readout ?? {};
}

describe("serve --layout (docs/decisions/087)", () => {
  const readout = serveReadout;

  it("leaves the tuned readout's state-first layout unless asked", () => {
    expect(TUNED_READOUT.layout).toBe("state-first");
    expect(readout([]).layout).toBeUndefined();
    expect({ ...TUNED_READOUT, ...readout([]) }.layout).toBe("state-first");
  });

  it("serves a lone question first when the flag or its variable says so", () => {
    expect(readout(["--layout", "question-first"]).layout).toBe("question-first");
    expect(readout([], { DECISIOND_LAYOUT: "question-first" }).layout).toBe("question-first");
    expect(() => readout(["--layout", "sideways"])).toThrow(/state-first, question-first/);
  });
});

describe("serve --trie-tolerance (docs/decisions/108)", () => {
  it("leaves the Decider's tolerance unless asked, and takes the flag or its variable", () => {
    expect(serveReadout([]).trieTolerance).toBeUndefined();
    expect(serveReadout(["--trie-tolerance", "0"]).trieTolerance).toBe(0);
    expect(serveReadout([], { DECISIOND_TRIE_TOLERANCE: "0.01" }).trieTolerance).toBe(0.01);
  });

  it("refuses what is not a tolerance, naming the flag", () => {
    for (const value of ["-0.1", "1", "lots", ""])
      expect(() => serveReadout(["--trie-tolerance", value])).toThrow(
        /--trie-tolerance.*expected a number from 0/,
      );
  });
});
