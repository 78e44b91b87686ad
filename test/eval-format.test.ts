import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  cleanAgNews,
  convertDataset,
  DATASETS,
  detokenizeSst,
  parseCsv,
} from "../src/evaluation/datasets.js";
import {
  datasetOf,
  EvalFormatError,
  groupOf,
  parseEvalItems,
  parseSplit,
  heldOut,
  splitOf,
  withSplit,
  toJsonl,
  validateItem,
} from "../src/evaluation/format.js";

const GOOD = {
  id: "toy:1",
  request: {
    model: "m",
    state: "text",
    questions: {
      c: { type: "choice", criteria: { a: null, b: "B" } },
      n: { type: "noul", instructions: "Is it?" },
      s: { type: "score", criteria: ["low", "high"] },
    },
  },
  expected: { c: "b", n: false, s: 1 },
};

describe("evaluation format", () => {
  it("accepts a valid item and round-trips through JSONL", () => {
    const items = parseEvalItems(JSON.stringify(GOOD) + "\n\n");
    expect(items).toHaveLength(1);
    expect(parseEvalItems(toJsonl(items))).toEqual(items);
  });

  it("rejects bad items with a reason", () => {
    expect(validateItem({ ...GOOD, id: "" })).toMatch(/id/);
    expect(validateItem({ ...GOOD, request: { ...GOOD.request, questions: {} } })).toMatch(
      /request/,
    );
    expect(validateItem({ ...GOOD, expected: { ...GOOD.expected, c: "z" } })).toMatch(/option ids/);
    expect(validateItem({ ...GOOD, expected: { ...GOOD.expected, n: "yes" } })).toMatch(
      /true or false/,
    );
    expect(validateItem({ ...GOOD, expected: { ...GOOD.expected, s: 2 } })).toMatch(/0\.\.1/);
    expect(validateItem({ ...GOOD, expected: { c: "b", n: false } })).toMatch(
      /no answer for question "s"/,
    );
    expect(validateItem({ ...GOOD, expected: { ...GOOD.expected, x: 1 } })).toMatch(
      /names no question/,
    );
  });

  it("names the file and line of a bad line, and refuses repeated ids", () => {
    expect(() => parseEvalItems(`${JSON.stringify(GOOD)}\n{oops`, "f.jsonl")).toThrow(
      /f\.jsonl:2: not JSON/,
    );
    expect(() => parseEvalItems(`${JSON.stringify(GOOD)}\n${JSON.stringify(GOOD)}`)).toThrow(
      EvalFormatError,
    );
  });

  it("derives group, dataset and split from the id", () => {
    expect(groupOf("wikiqa:Q1/D1-3")).toBe("wikiqa:Q1");
    expect(groupOf("sst2:5#choice")).toBe("sst2:5");
    expect(datasetOf("sst2:5#choice")).toBe("sst2#choice");
    expect(datasetOf("banking77:9#k10")).toBe("banking77#k10");
    expect(datasetOf("climate_fever:12/3")).toBe("climate_fever");
    // Members and variants of a group share its split.
    expect(splitOf("wikiqa:Q1/D1-3")).toBe(splitOf("wikiqa:Q1/D1-0"));
    expect(splitOf("sst2:5#choice")).toBe(splitOf("sst2:5"));
    // Stable across machines (SHA-256), and about half of the ids in each part.
    expect(splitOf("sst2:0")).toBe(splitOf("sst2:0"));
    const fit = Array.from({ length: 2000 }, (_, i) => splitOf(`x:${i}`)).filter(
      (s) => s === "fit",
    ).length;
    expect(fit).toBeGreaterThan(900);
    expect(fit).toBeLessThan(1100);
    expect(parseSplit("train")).toBe("fit");
    expect(parseSplit("dev")).toBe("test");
    expect(() => parseSplit("heldout")).toThrow();
  });
});

describe("dataset text helpers", () => {
  it("parses CSV with quotes, doubled quotes and quoted newlines", () => {
    expect(parseCsv('text,category\n"a, b",x\n"say ""hi""\nthere",y\nplain,z')).toEqual([
      ["text", "category"],
      ["a, b", "x"],
      ['say "hi"\nthere', "y"],
      ["plain", "z"],
    ]);
  });

  it("detokenizes SST text", () => {
    expect(detokenizeSst("it 's a charming -lrb- and often affecting -rrb- journey . ")).toBe(
      "it's a charming (and often affecting) journey.",
    );
    expect(detokenizeSst("does n't work , really")).toBe("doesn't work, really");
  });

  it("cleans AG News escapes", () => {
    expect(cleanAgNews("Bush #39;s plan\\\\more")).toBe("Bush's plan more");
    expect(cleanAgNews("quot;Hi quot; said Netscape  #038; Google")).toBe(
      '"Hi " said Netscape & Google',
    );
  });
});

const DATASETS_DIR = fileURLToPath(new URL("../../shared/datasets", import.meta.url));

describe.skipIf(!existsSync(DATASETS_DIR))("converters on ../shared/datasets", () => {
  for (const { name } of DATASETS) {
    it(`${name}: valid items with unique ids, both splits present`, () => {
      const items = convertDataset(name, {
        datasetsDir: DATASETS_DIR,
        ...(name === "banking77" ? { options: 8 } : {}),
      });
      expect(items.length).toBeGreaterThan(50);
      expect(new Set(items.map((i) => i.id)).size).toBe(items.length);
      for (const item of items.slice(0, 200))
        expect(validateItem(JSON.parse(JSON.stringify(item)))).toEqual(item);
      const fit = items.filter((i) => splitOf(i.id) === "fit").length;
      expect(fit / items.length).toBeGreaterThan(0.35);
      expect(fit / items.length).toBeLessThan(0.65);
    });
  }

  it("writes one split, in a stable order, with a limit", () => {
    const a = convertDataset("trec", { datasetsDir: DATASETS_DIR, split: "test", limit: 10 });
    const b = convertDataset("trec", { datasetsDir: DATASETS_DIR, split: "test", limit: 10 });
    expect(a).toEqual(b);
    expect(a).toHaveLength(10);
    expect(a.every((i) => splitOf(i.id) === "test")).toBe(true);
  });

  it("banking77 --options K keeps the gold option among K", () => {
    const items = convertDataset("banking77", { datasetsDir: DATASETS_DIR, options: 5, limit: 50 });
    for (const item of items) {
      const q = item.request.questions.intent!;
      expect(q.type).toBe("choice");
      const ids = q.type === "choice" ? Object.keys(q.criteria) : [];
      expect(ids).toHaveLength(5);
      expect(ids).toContain(item.expected.intent);
      expect(item.id).toMatch(/#k5$/);
    }
    const gold = new Set(
      items.map((i) =>
        Object.keys((i.request.questions.intent as { criteria: object }).criteria).indexOf(
          i.expected.intent as string,
        ),
      ),
    );
    expect(gold.size).toBeGreaterThan(2); // the gold option is not always in the same place
  });
});

describe("held-back rows", () => {
  it("hold back about 15% of the groups, whole, whatever the split", () => {
    const ids = Array.from({ length: 4000 }, (_, i) => `d:${i}`);
    const share = ids.filter(heldOut).length / ids.length;
    expect(share).toBeGreaterThan(0.12);
    expect(share).toBeLessThan(0.18);
    for (const id of ids.slice(0, 200)) {
      expect(heldOut(`${id}/3#choice`)).toBe(heldOut(id));
      expect(
        withSplit({
          id,
          request: { model: "m", state: "s", questions: {} },
          expected: {},
        } as never),
      ).toMatchObject({
        split: splitOf(id),
        holdout: heldOut(id),
      });
    }
  });
});
