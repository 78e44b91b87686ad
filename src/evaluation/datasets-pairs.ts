import { claimState, item, REQUEST_MODEL, type DatasetConverter } from "./dataset-item.js";
import { lines, read } from "./dataset-text.js";
import { hash32 } from "./format.js";

/**
 * Converters of the sentence-pair and yes/no datasets (SOURCES.md): paraphrase, similarity and
 * relatedness scales (MRPC, STS-B, SICK), entailment (SICK, AX-b, AX-g, WNLI), word sense (WiC),
 * coreference (WSC), answer checks (MultiRC, MC-TACO) and commonsense assertions (CSQA2).
 */

function jsonLines<T>(dir: string, ...path: string[]): T[] {
  return lines(read(dir, ...path)).map((line) => JSON.parse(line) as T);
}

function pairState(a: string, b: string): string {
  return `Sentence 1: ${a.trim()}\nSentence 2: ${b.trim()}`;
}

/**
 * The six levels of the STS annotation guideline (Agirre et al. 2013, SemEval *SEM shared task,
 * table 1), 0 … 5.
 */
export const STS_LEVELS = [
  "completely different",
  "different, but on the same topic",
  "not equivalent, but share some details",
  "roughly equivalent, some important details differ",
  "mostly equivalent, some minor details differ",
  "equivalent",
];

/** SICK's relatedness, 1 … 5, as five levels. */
export const RELATEDNESS_LEVELS = [
  "unrelated",
  "slightly related",
  "somewhat related",
  "closely related",
  "the same meaning",
];

const ENTAILMENT_NOUL = {
  type: "noul",
  instructions: "Does the text show that the claim is true?",
  criteria: { true: "The text implies the claim", false: "The text does not imply the claim" },
} as const;

/** SICK's 12 tab-separated columns, the header skipped. */
function sickRows(dir: string) {
  return lines(read(dir, "sick", "SICK.txt"))
    .slice(1)
    .map((line) => {
      const c = line.split("\t");
      if (c.length < 5) throw new Error(`sick/SICK.txt: malformed row ${c[0] ?? ""}`);
      return { id: c[0]!, a: c[1]!, b: c[2]!, entailment: c[3]!, relatedness: Number(c[4]) };
    });
}

export const PAIR_DATASETS: readonly DatasetConverter[] = [
  {
    name: "mrpc",
    description: "MSR Paraphrase (train file): noul, do the two sentences mean the same",
    convert: (o) =>
      lines(read(o.datasetsDir, "mrpc", "msr_paraphrase_train.txt")).map((line, row) => {
        const [label, id1, id2, a, b] = line.replace(/^\uFEFF/, "").split("\t");
        if ((label !== "0" && label !== "1") || a === undefined || b === undefined)
          throw new Error(`mrpc row ${row + 1}: expected Quality, id1, id2, string1, string2`);
        return item(
          `mrpc:${id1}-${id2}`,
          o.model ?? REQUEST_MODEL,
          pairState(a, b),
          {
            paraphrase: {
              type: "noul",
              instructions: "Do the two sentences say the same thing?",
            },
          },
          { paraphrase: label === "1" },
        );
      }),
  },
  {
    name: "stsb",
    description:
      "STS Benchmark (train + dev): score on 6 levels of semantic similarity (0–5, rounded)",
    convert: (o) =>
      ["sts-train.csv", "sts-dev.csv"].flatMap((file) =>
        lines(read(o.datasetsDir, "stsb", file)).map((line, row) => {
          const c = line.split("\t");
          const score = Number(c[4]);
          if (c.length < 7 || !Number.isFinite(score))
            throw new Error(`stsb/${file} row ${row + 1}: expected genre … score, s1, s2`);
          return item(
            `stsb:${file.replace(/\.csv$/, "")}-${row}`,
            o.model ?? REQUEST_MODEL,
            pairState(c[5]!, c[6]!),
            {
              similarity: {
                type: "score",
                instructions: "How similar in meaning are the two sentences?",
                criteria: STS_LEVELS,
              },
            },
            { similarity: Math.round(score) },
          );
        }),
      ),
  },
  {
    name: "sick",
    description: "SICK: score on 5 levels of relatedness (1–5, rounded)",
    convert: (o) =>
      sickRows(o.datasetsDir).map((r) =>
        item(
          `sick:${r.id}`,
          o.model ?? REQUEST_MODEL,
          pairState(r.a, r.b),
          {
            relatedness: {
              type: "score",
              instructions: "How related are the two sentences?",
              criteria: RELATEDNESS_LEVELS,
            },
          },
          { relatedness: Math.min(4, Math.max(0, Math.round(r.relatedness) - 1)) },
        ),
      ),
  },
  {
    name: "sick-entailment",
    description: "SICK: 3-way choice, does sentence 1 entail, contradict or neither sentence 2",
    convert: (o) =>
      sickRows(o.datasetsDir).map((r) =>
        item(
          `sick:${r.id}#entailment`,
          o.model ?? REQUEST_MODEL,
          pairState(r.a, r.b),
          {
            relation: {
              type: "choice",
              instructions: "If sentence 1 is true, what follows for sentence 2?",
              criteria: {
                entailment: "Sentence 2 must be true",
                contradiction: "Sentence 2 must be false",
                neutral: "Sentence 2 may be true or false",
              },
            },
          },
          { relation: r.entailment.toLowerCase() },
        ),
      ),
  },
  {
    name: "wic",
    description: "SuperGLUE WiC (validation): noul, is the word used in the same sense",
    convert: (o) =>
      jsonLines<{
        word: string;
        sentence1: string;
        sentence2: string;
        idx: number;
        label: string | boolean;
      }>(o.datasetsDir, "superglue_more", "WiC", "val.jsonl").map((r) =>
        item(
          `wic:${r.idx}`,
          o.model ?? REQUEST_MODEL,
          { word: r.word, sentence1: r.sentence1, sentence2: r.sentence2 },
          {
            same_sense: {
              type: "noul",
              instructions: "Does the word mean the same thing in both sentences?",
            },
          },
          { same_sense: r.label === true || r.label === "true" },
        ),
      ),
  },
  {
    name: "wsc",
    description: "SuperGLUE WSC (validation): noul, does the pronoun refer to the named phrase",
    convert: (o) =>
      jsonLines<{
        text: string;
        target: { span1_text: string; span2_text: string };
        idx: number;
        label: string | boolean;
      }>(o.datasetsDir, "superglue_more", "WSC", "val.jsonl").map((r) =>
        item(
          `wsc:${r.idx}`,
          o.model ?? REQUEST_MODEL,
          r.text,
          {
            refers: {
              type: "noul",
              instructions: `In the text, does "${r.target.span2_text}" refer to "${r.target.span1_text}"?`,
            },
          },
          { refers: r.label === true || r.label === "true" },
        ),
      ),
  },
  {
    name: "multirc",
    description: "SuperGLUE MultiRC (validation): noul, is the candidate answer correct",
    convert: (o) =>
      jsonLines<{
        idx: number;
        passage: {
          text: string;
          questions: {
            question: string;
            idx: number;
            answers: { text: string; idx: number; label: number }[];
          }[];
        };
      }>(o.datasetsDir, "superglue_more", "MultiRC", "val.jsonl").flatMap((p) =>
        p.passage.questions.flatMap((q) =>
          q.answers.map((a) =>
            item(
              `multirc:${p.idx}/${q.idx}-${a.idx}`,
              o.model ?? REQUEST_MODEL,
              `Passage: ${p.passage.text
                .replace(/<br>/g, " ")
                .replace(/<\/?b>|Sent \d+: /g, "")
                .replace(/\s+/g, " ")
                .trim()}\n\nQuestion: ${q.question}\n\nCandidate answer: ${a.text}`,
              {
                correct: {
                  type: "noul",
                  instructions: "According to the passage, is the candidate answer correct?",
                },
              },
              { correct: a.label === 1 },
            ),
          ),
        ),
      ),
  },
  {
    name: "mctaco",
    description: "MC-TACO (dev): noul, is the candidate answer temporally plausible",
    convert: (o) => {
      const questions = new Map<string, number>();
      return lines(read(o.datasetsDir, "mctaco", "dev_3783.tsv")).map((line, row) => {
        const [sentence, question, answer, label] = line.split("\t");
        if (!sentence || !question || answer === undefined || (label !== "yes" && label !== "no"))
          throw new Error(`mctaco row ${row + 1}: expected sentence, question, answer, yes|no`);
        const key = `${sentence}\u0000${question}`;
        if (!questions.has(key)) questions.set(key, questions.size);
        return item(
          `mctaco:${questions.get(key)}/${row}`,
          o.model ?? REQUEST_MODEL,
          `${sentence}\n\nQuestion: ${question}\nCandidate answer: ${answer}`,
          {
            plausible: {
              type: "noul",
              instructions: "Is the candidate answer plausible?",
            },
          },
          { plausible: label === "yes" },
        );
      });
    },
  },
  {
    name: "commonsenseqa2",
    description: "CommonsenseQA 2.0 (train + dev): noul, is the statement true",
    convert: (o) =>
      ["CSQA2_train.json", "CSQA2_dev.json"].flatMap((file) =>
        jsonLines<{ id: string; question: string; answer: string }>(
          o.datasetsDir,
          "commonsenseqa2",
          file,
        ).map((r) =>
          item(
            `commonsenseqa2:${r.id}`,
            o.model ?? REQUEST_MODEL,
            r.question,
            { true: { type: "noul", instructions: "Is this statement true?" } },
            { true: r.answer === "yes" },
          ),
        ),
      ),
  },
  {
    name: "axb",
    description: "SuperGLUE AX-b (diagnostic): noul, does the text imply the claim",
    convert: (o) =>
      jsonLines<{ idx: string | number; sentence1: string; sentence2: string; label: string }>(
        o.datasetsDir,
        "superglue_more",
        "AX-b",
        "AX-b.jsonl",
      ).map((r) =>
        item(
          `axb:${r.idx}`,
          o.model ?? REQUEST_MODEL,
          claimState(r.sentence1, r.sentence2),
          { entailed: ENTAILMENT_NOUL },
          { entailed: r.label === "entailment" },
        ),
      ),
  },
  {
    name: "axg",
    description: "SuperGLUE AX-g (diagnostic, gender): noul, does the text imply the claim",
    convert: (o) =>
      jsonLines<{ idx: number; premise: string; hypothesis: string; label: string }>(
        o.datasetsDir,
        "superglue_more",
        "AX-g",
        "AX-g.jsonl",
      ).map((r) =>
        item(
          `axg:${r.idx}`,
          o.model ?? REQUEST_MODEL,
          claimState(r.premise, r.hypothesis),
          { entailed: ENTAILMENT_NOUL },
          { entailed: r.label === "entailment" },
        ),
      ),
  },
  {
    name: "wnli",
    description: "GLUE WNLI (all labelled rows): noul, does the second sentence follow",
    convert: (o) =>
      ["train", "dev", "test"].flatMap((part) =>
        lines(read(o.datasetsDir, "wnli", `${part}.tsv`))
          .slice(1)
          .map((line) => {
            const [index, s1, s2, label] = line.split("\t");
            if (!index || !s1 || !s2 || (label?.trim() !== "0" && label?.trim() !== "1"))
              throw new Error(`wnli/${part}.tsv: malformed row ${index ?? ""}`);
            // Grouped by the first sentence: WNLI repeats it with other second sentences.
            return item(
              `wnli:${hash32(s1).toString(16)}/${part}-${index}`,
              o.model ?? REQUEST_MODEL,
              claimState(s1, s2),
              { entailed: ENTAILMENT_NOUL },
              { entailed: label.trim() === "1" },
            );
          }),
      ),
  },
];
