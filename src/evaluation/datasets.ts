import { BANKING77_DESCRIPTIONS, drawIntents } from "./banking77.js";
import {
  AG_NEWS_OPTIONS,
  CB_CHOICE,
  CLIMATE_FEVER_CHOICE,
  ENTAILMENT_NOUL,
  RTE_CHOICE,
  SST2_CHOICE,
  SST2_NOUL,
  SST5_LEVELS,
  TREC_OPTIONS,
} from "./dataset-questions.js";
import {
  cleanAgNews,
  detokenizeSst,
  lines,
  parseCsv,
  read,
  sst2Rows,
  superglue,
} from "./dataset-text.js";
import {
  claimState,
  item,
  REQUEST_MODEL,
  type ConvertOptions,
  type DatasetConverter,
} from "./dataset-item.js";
import { LABEL_DATASETS } from "./datasets-labels.js";
import { PAIR_DATASETS } from "./datasets-pairs.js";
import { QA_DATASETS } from "./datasets-qa.js";
import { hash32, selectSplit, type EvalItem } from "./format.js";

export { cleanAgNews, detokenizeSst, parseCsv } from "./dataset-text.js";

/**
 * Converters from the labeled datasets in `../shared/datasets/` (see its SOURCES.md) to the
 * evaluation format. Each converter reads its dataset's files as they are, writes questions the
 * way a user of the API would, and gives every item an id `<dataset>:<source row or id>` (see
 * format.ts for the id grammar and the fit/test split).
 *
 * Items come out in a deterministic pseudo-random order (SHA-256 of `order:<id>`), so the first N
 * lines of a file are a uniform sample of it (several datasets are sorted by label on disk).
 */

export { REQUEST_MODEL, type ConvertOptions, type DatasetConverter } from "./dataset-item.js";

/** The converters of the ten datasets the first adapters were trained on. */
const FIRST_DATASETS: readonly DatasetConverter[] = [
  {
    name: "sst2",
    description: 'SST-2 (GLUE dev): noul "Is the sentiment of the text positive?"',
    convert: (o) =>
      sst2Rows(o.datasetsDir).map(({ row, text, positive }) =>
        item(
          `sst2:${row}`,
          o.model ?? REQUEST_MODEL,
          text,
          { sentiment: SST2_NOUL },
          { sentiment: positive },
        ),
      ),
  },
  {
    name: "sst2-choice",
    description: "SST-2 (GLUE dev): 2-way choice positive/negative",
    convert: (o) =>
      sst2Rows(o.datasetsDir).map(({ row, text, positive }) =>
        item(
          `sst2:${row}#choice`,
          o.model ?? REQUEST_MODEL,
          text,
          { sentiment: SST2_CHOICE },
          {
            sentiment: positive ? "positive" : "negative",
          },
        ),
      ),
  },
  {
    name: "sst5",
    description: "SST-5 fine-grained (dev): score on 5 levels, very negative … very positive",
    convert: (o) =>
      lines(read(o.datasetsDir, "sst5", "stsa.fine.dev")).map((line, row) => {
        const m = /^([0-4]) (.*)$/.exec(line);
        if (!m) throw new Error(`sst5/stsa.fine.dev row ${row + 1}: expected "<0-4> <text>"`);
        return item(
          `sst5:${row}`,
          o.model ?? REQUEST_MODEL,
          detokenizeSst(m[2]!),
          {
            sentiment: {
              type: "score",
              instructions: "How positive is this movie review?",
              criteria: SST5_LEVELS,
            },
          },
          { sentiment: Number(m[1]) },
        );
      }),
  },
  {
    name: "ag_news",
    description:
      "AG News (even test rows): 4-way topic choice World / Sports / Business / Sci/Tech",
    convert: (o) => {
      const classes = Object.keys(AG_NEWS_OPTIONS);
      return parseCsv(read(o.datasetsDir, "ag_news", "dev.csv")).map(
        ([label, title, description], row) => {
          const topic = classes[Number(label) - 1];
          if (topic === undefined || title === undefined || description === undefined)
            throw new Error(
              `ag_news/dev.csv row ${row + 1}: expected "class","title","description"`,
            );
          return item(
            `ag_news:${row}`,
            o.model ?? REQUEST_MODEL,
            `${cleanAgNews(title)}\n${cleanAgNews(description)}`,
            {
              topic: {
                type: "choice",
                instructions: "What is the topic of this news article?",
                criteria: AG_NEWS_OPTIONS,
              },
            },
            { topic },
          );
        },
      );
    },
  },
  {
    name: "banking77",
    description:
      "Banking77 (train): choice among the 77 intents, or --options K of them (gold + K−1 drawn)",
    convert: (o) => {
      const categories = JSON.parse(
        read(o.datasetsDir, "banking77", "categories.json"),
      ) as string[];
      for (const c of categories)
        if (!(c in BANKING77_DESCRIPTIONS))
          throw new Error(`banking77: no description for intent "${c}"`);
      const k = o.options;
      if (k !== undefined && (!Number.isInteger(k) || k < 2 || k > categories.length))
        throw new Error(`--options must be an integer 2..${categories.length}, got ${k}`);
      const rows = parseCsv(read(o.datasetsDir, "banking77", "train.csv")).slice(1);
      return rows.map(([text, category], row) => {
        if (text === undefined || category === undefined || !categories.includes(category))
          throw new Error(`banking77/train.csv row ${row + 2}: expected text,category`);
        const shown =
          k !== undefined && k < categories.length
            ? drawIntents(categories, category, k, hash32(`banking77:${row}`) ^ (o.seed ?? 0))
            : categories;
        const criteria = Object.fromEntries(shown.map((c) => [c, BANKING77_DESCRIPTIONS[c]!]));
        const id =
          k !== undefined && k < categories.length ? `banking77:${row}#k${k}` : `banking77:${row}`;
        return item(
          id,
          o.model ?? REQUEST_MODEL,
          text.trim(),
          {
            intent: {
              type: "choice",
              instructions: "What does this bank customer want?",
              criteria,
            },
          },
          { intent: category },
        );
      });
    },
  },
  {
    name: "boolq",
    description: "BoolQ (dev, even rows): noul, state = passage + question",
    convert: (o) =>
      lines(read(o.datasetsDir, "boolq", "dev.jsonl")).map((line) => {
        const r = JSON.parse(line) as {
          idx: number;
          question: string;
          passage: string;
          label: string | boolean;
        };
        const question = r.question.charAt(0).toUpperCase() + r.question.slice(1) + "?";
        return item(
          `boolq:${r.idx}`,
          o.model ?? REQUEST_MODEL,
          `Passage: ${r.passage}\n\nQuestion: ${question}`,
          {
            answer: {
              type: "noul",
              instructions: "According to the passage, is the answer to the question yes?",
            },
          },
          { answer: r.label === true || r.label === "true" },
        );
      }),
  },
  {
    name: "rte",
    description: "SuperGLUE RTE (validation): noul, does the text imply the claim",
    convert: (o) =>
      superglue(o.datasetsDir, "RTE_val.jsonl").map((r) =>
        item(
          `rte:${r.idx}`,
          o.model ?? REQUEST_MODEL,
          claimState(r.premise, r.hypothesis),
          { entailed: ENTAILMENT_NOUL },
          {
            entailed: r.label === "entailment",
          },
        ),
      ),
  },
  {
    name: "rte-choice",
    description: "SuperGLUE RTE (validation): 2-way choice entailment / not_entailment",
    convert: (o) =>
      superglue(o.datasetsDir, "RTE_val.jsonl").map((r) =>
        item(
          `rte:${r.idx}#choice`,
          o.model ?? REQUEST_MODEL,
          claimState(r.premise, r.hypothesis),
          { entailment: RTE_CHOICE },
          {
            entailment: r.label,
          },
        ),
      ),
  },
  {
    name: "cb",
    description: "SuperGLUE CB (validation): 3-way choice entailment / contradiction / neutral",
    convert: (o) =>
      superglue(o.datasetsDir, "CB_val.jsonl").map((r) =>
        item(
          `cb:${r.idx}`,
          o.model ?? REQUEST_MODEL,
          claimState(r.premise, r.hypothesis),
          { relation: CB_CHOICE },
          {
            relation: r.label,
          },
        ),
      ),
  },
  {
    name: "climate_fever",
    description:
      "CLIMATE-FEVER (even claims): claim vs one evidence sentence, SUPPORTS / REFUTES / NOT_ENOUGH_INFO",
    convert: (o) =>
      lines(read(o.datasetsDir, "climate_fever", "dev.jsonl")).flatMap((line) => {
        const r = JSON.parse(line) as {
          claim_id: string;
          claim: string;
          evidences: { evidence: string; evidence_label: string; article: string }[];
        };
        return r.evidences.map((e, k) =>
          item(
            `climate_fever:${r.claim_id}/${k}`,
            o.model ?? REQUEST_MODEL,
            `Claim: ${r.claim}\n\nEvidence (from the Wikipedia article "${e.article}"): ${e.evidence}`,
            { verdict: CLIMATE_FEVER_CHOICE },
            { verdict: e.evidence_label },
          ),
        );
      }),
  },
  {
    name: "trec",
    description: "TREC question classification (even test rows): 6-way choice of the answer type",
    convert: (o) =>
      lines(read(o.datasetsDir, "trec", "dev.raw")).map((line, row) => {
        const m = /^([A-Z]+):\S+ (.*)$/.exec(line);
        if (!m || !(m[1]! in TREC_OPTIONS))
          throw new Error(`trec/dev.raw row ${row + 1}: expected "COARSE:fine question"`);
        const question = m[2]!.trim().replace(/ \?$/, "?");
        return item(
          `trec:${row}`,
          o.model ?? REQUEST_MODEL,
          question,
          {
            answer_type: {
              type: "choice",
              instructions: "What kind of answer is this question asking for?",
              criteria: TREC_OPTIONS,
            },
          },
          { answer_type: m[1]! },
        );
      }),
  },
  {
    name: "wikiqa",
    description: "WikiQA (test pairs, even questions): noul, does the sentence answer the question",
    convert: (o) =>
      lines(read(o.datasetsDir, "wikiqa", "dev.tsv"))
        .slice(1)
        .map((line, row) => {
          const [qid, question, , title, sid, sentence, label] = line.split("\t");
          if (
            !qid ||
            !question ||
            !sid ||
            sentence === undefined ||
            (label?.trim() !== "0" && label?.trim() !== "1")
          )
            throw new Error(`wikiqa/dev.tsv row ${row + 2}: expected 7 tab-separated columns`);
          return item(
            `wikiqa:${qid}/${sid}`,
            o.model ?? REQUEST_MODEL,
            `Question: ${question.trim()}\n\nSentence (from the Wikipedia article "${title ?? ""}"): ${sentence.trim()}`,
            {
              relevant: {
                type: "noul",
                instructions: "Does the sentence answer the question?",
                criteria: {
                  true: "The sentence answers the question",
                  false: "The sentence does not answer the question",
                },
              },
            },
            { relevant: label.trim() === "1" },
          );
        }),
  },
];

/** Every converter, by dataset name: the first ten, then the 29 of issue 48. */
export const DATASETS: readonly DatasetConverter[] = [
  ...FIRST_DATASETS,
  ...QA_DATASETS,
  ...PAIR_DATASETS,
  ...LABEL_DATASETS,
];

/** The converter of a dataset name. @throws {@link Error} naming the known datasets. */
export function findDataset(name: string): DatasetConverter {
  const converter = DATASETS.find((d) => d.name === name);
  if (!converter)
    throw new Error(`unknown dataset "${name}"; known: ${DATASETS.map((d) => d.name).join(", ")}`);
  return converter;
}

/**
 * Converts a dataset: all rows, then the split, the pseudo-random order and the limit.
 *
 * @param name - a name from {@link DATASETS}, e.g. `banking77`
 * @returns the items in hashed order: the first N are a uniform sample of the split
 * @throws {@link Error} for an unknown name, or when the dataset's files are missing or malformed.
 * @example
 * ```ts
 * const items = convertDataset("sst2", { datasetsDir: "../shared/datasets", split: "test", limit: 100 });
 * // → items[0].id "sst2:…", items[0].request a POST /v1/systemone body
 * ```
 */
export function convertDataset(name: string, options: ConvertOptions): EvalItem[] {
  const all = findDataset(name).convert(options);
  const order = new Map(all.map((it) => [it.id, hash32(`order:${it.id}`)]));
  const chosen = selectSplit(all, options.split ?? "all").sort(
    (a, b) => order.get(a.id)! - order.get(b.id)! || (a.id < b.id ? -1 : 1),
  );
  return options.limit !== undefined ? chosen.slice(0, options.limit) : chosen;
}
