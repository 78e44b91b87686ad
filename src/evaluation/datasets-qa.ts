import { readdirSync } from "node:fs";
import { join } from "node:path";
import { answerChoice, item, REQUEST_MODEL, type DatasetConverter } from "./dataset-item.js";
import { lines, parseCsv, read } from "./dataset-text.js";

/**
 * Converters of the multiple-choice question-answering datasets (SOURCES.md: arc … winogrande):
 * one choice question over the answer texts per source question, the question (with its context,
 * where it has one) as the state. Ids are `<dataset>:<source id or row>`.
 */

interface LetteredChoices {
  readonly stem: string;
  readonly choices: readonly { readonly text: string; readonly label: string }[];
}

/** ARC, CommonsenseQA and QASC rows: a stem, lettered choices and the gold letter. */
function lettered(
  dataset: string,
  id: string,
  model: string,
  question: LetteredChoices,
  answerKey: string,
  instructions: string,
) {
  const gold = question.choices.findIndex((c) => c.label === answerKey);
  if (gold < 0) throw new Error(`${dataset} ${id}: answer ${answerKey} is not a choice`);
  const q = answerChoice(
    instructions,
    question.choices.map((c) => c.text),
    gold,
  );
  return item(
    `${dataset}:${id}`,
    model,
    question.stem.trim(),
    { answer: q.question },
    {
      answer: q.gold,
    },
  );
}

function jsonLines<T>(dir: string, ...path: string[]): T[] {
  return lines(read(dir, ...path)).map((line) => JSON.parse(line) as T);
}

/** Labels files of PIQA and SIQA: one integer a line. */
function labels(dir: string, ...path: string[]): number[] {
  return lines(read(dir, ...path)).map((l) => Number(l.trim()));
}

export const QA_DATASETS: readonly DatasetConverter[] = [
  {
    name: "arc",
    description:
      "AI2 ARC Challenge + Easy (dev): choice among the answer texts of a science question",
    convert: (o) =>
      ["ARC-Challenge-Dev.jsonl", "ARC-Easy-Dev.jsonl"].flatMap((file) =>
        jsonLines<{ id: string; question: LetteredChoices; answerKey: string }>(
          o.datasetsDir,
          "arc",
          file,
        ).map((r) =>
          lettered(
            "arc",
            r.id,
            o.model ?? REQUEST_MODEL,
            r.question,
            r.answerKey,
            "Which answer to this science question is correct?",
          ),
        ),
      ),
  },
  {
    name: "openbookqa",
    description: "OpenBookQA Main (train + dev): choice among 4 answer texts (elementary science)",
    convert: (o) =>
      ["train.tsv", "dev.tsv"].flatMap((file) =>
        lines(read(o.datasetsDir, "openbookqa", file))
          .slice(1)
          .map((line) => {
            const [id, stem, choices, , key] = line.split("\t");
            const parts = (choices ?? "").split(/\s*\(([A-D])\)\s*/).slice(1);
            const options: { label: string; text: string }[] = [];
            for (let i = 0; i + 1 < parts.length; i += 2)
              options.push({ label: parts[i]!, text: parts[i + 1]! });
            if (!id || !stem || options.length < 2 || !key)
              throw new Error(`openbookqa/${file}: malformed row ${id ?? ""}`);
            return lettered(
              "openbookqa",
              id,
              o.model ?? REQUEST_MODEL,
              { stem, choices: options },
              key.trim(),
              "Which answer completes the statement correctly?",
            );
          }),
      ),
  },
  {
    name: "qasc",
    description: "QASC (dev): choice among 8 answer texts (science, two-fact reasoning)",
    convert: (o) =>
      jsonLines<{ id: string; question: LetteredChoices; answerKey: string }>(
        o.datasetsDir,
        "qasc",
        "dev.jsonl",
      ).map((r) =>
        lettered(
          "qasc",
          r.id,
          o.model ?? REQUEST_MODEL,
          r.question,
          r.answerKey,
          "What is the correct answer to the question?",
        ),
      ),
  },
  {
    name: "commonsenseqa",
    description: "CommonsenseQA (train + dev): choice among 5 answer texts (commonsense)",
    convert: (o) =>
      ["train.jsonl", "valid.jsonl"].flatMap((file) =>
        jsonLines<{ id: string; question: LetteredChoices; answerKey: string }>(
          o.datasetsDir,
          "commonsenseqa",
          file,
        ).map((r) =>
          lettered(
            "commonsenseqa",
            r.id,
            o.model ?? REQUEST_MODEL,
            r.question,
            r.answerKey,
            "Which answer makes the most sense?",
          ),
        ),
      ),
  },
  {
    name: "mmlu",
    description: "MMLU (dev + test, 57 subjects): choice among 4 answer texts (academic knowledge)",
    convert: (o) =>
      ["dev", "test"].flatMap((part) =>
        mmluFiles(o.datasetsDir, part).flatMap((file) =>
          parseCsv(read(o.datasetsDir, "mmlu", part, file))
            .slice(1)
            .map(([question, a, b, c, d, answer], row) => {
              const subject = file.replace(/_(dev|test)\.csv$/, "");
              if (question === undefined || d === undefined || answer === undefined)
                throw new Error(`mmlu/${part}/${file} row ${row + 2}: expected 6 columns`);
              const q = answerChoice(
                `Which answer is correct? (Subject: ${subject.replaceAll("_", " ")})`,
                [a!, b!, c!, d],
                Number(answer),
              );
              return item(
                `mmlu:${subject}-${part}-${row}`,
                o.model ?? REQUEST_MODEL,
                question.trim(),
                { answer: q.question },
                { answer: q.gold },
              );
            }),
        ),
      ),
  },
  {
    name: "cosmosqa",
    description: "Cosmos QA (valid): choice among 4 answers about an everyday narrative",
    convert: (o) =>
      parseCsv(read(o.datasetsDir, "cosmosqa", "valid.csv"))
        .slice(1)
        .map(([id, context, question, a0, a1, a2, a3, label], row) => {
          if (!id || !context || !question || a3 === undefined || label === undefined)
            throw new Error(`cosmosqa/valid.csv row ${row + 2}: expected 8 columns`);
          const q = answerChoice(question.trim(), [a0!, a1!, a2!, a3], Number(label));
          return item(
            `cosmosqa:${row}`,
            o.model ?? REQUEST_MODEL,
            context.trim(),
            { answer: q.question },
            { answer: q.gold },
          );
        }),
  },
  {
    name: "dream",
    description: "DREAM (train + dev): choice among 3 answers about a dialogue",
    convert: (o) =>
      ["train.json", "dev.json"].flatMap((file) =>
        (
          JSON.parse(read(o.datasetsDir, "dream", file)) as [
            string[],
            { question: string; choice: string[]; answer: string }[],
            string,
          ][]
        ).flatMap(([turns, questions, id]) =>
          questions.map((question, k) => {
            const gold = question.choice.indexOf(question.answer);
            const q = answerChoice(question.question, question.choice, gold);
            return item(
              `dream:${id}/${k}`,
              o.model ?? REQUEST_MODEL,
              turns.join("\n"),
              { answer: q.question },
              { answer: q.gold },
            );
          }),
        ),
      ),
  },
  {
    name: "siqa",
    description: "Social IQa (dev): choice among 3 answers about a social situation",
    convert: (o) => {
      const gold = labels(o.datasetsDir, "siqa", "dev-labels.lst");
      return jsonLines<{
        context: string;
        question: string;
        answerA: string;
        answerB: string;
        answerC: string;
      }>(o.datasetsDir, "siqa", "dev.jsonl").map((r, row) => {
        const q = answerChoice(r.question, [r.answerA, r.answerB, r.answerC], gold[row]! - 1);
        return item(
          `siqa:${row}`,
          o.model ?? REQUEST_MODEL,
          r.context,
          { answer: q.question },
          {
            answer: q.gold,
          },
        );
      });
    },
  },
  {
    name: "piqa",
    description: "PIQA (dev): 2-way choice, which solution reaches the goal",
    convert: (o) => {
      const gold = labels(o.datasetsDir, "piqa", "dev-labels.lst");
      return jsonLines<{ id: string; goal: string; sol1: string; sol2: string }>(
        o.datasetsDir,
        "piqa",
        "dev.jsonl",
      ).map((r, row) => {
        const q = answerChoice("Which solution reaches the goal?", [r.sol1, r.sol2], gold[row]!);
        return item(
          `piqa:${r.id}`,
          o.model ?? REQUEST_MODEL,
          `Goal: ${r.goal.trim()}`,
          {
            solution: q.question,
          },
          { solution: q.gold },
        );
      });
    },
  },
  {
    name: "winogrande",
    description: "WinoGrande (dev): 2-way choice, who or what fills the blank",
    convert: (o) =>
      jsonLines<{ context_options: [string, string]; continuation: string; gold: number }>(
        o.datasetsDir,
        "winogrande",
        "winogrande.jsonl",
      ).map((r, row) => {
        const [a, b] = r.context_options;
        let k = 0;
        while (k < a.length && a[k] === b[k]) k++;
        const cut = a.lastIndexOf(" ", k) + 1;
        const options = [a.slice(cut).trim(), b.slice(cut).trim()];
        const sentence = `${a.slice(0, cut)}_ ${r.continuation}`.replace(/\s+/g, " ").trim();
        const q = answerChoice("Who or what does the blank (_) stand for?", options, r.gold);
        return item(
          `winogrande:${row}`,
          o.model ?? REQUEST_MODEL,
          sentence,
          { blank: q.question },
          {
            blank: q.gold,
          },
        );
      }),
  },
  {
    name: "copa",
    description: "SuperGLUE COPA (validation): 2-way choice of the cause or the effect",
    convert: (o) =>
      jsonLines<{
        premise: string;
        choice1: string;
        choice2: string;
        question: string;
        label: number;
        idx: number;
      }>(o.datasetsDir, "superglue_more", "COPA", "val.jsonl").map((r) => {
        const q = answerChoice(
          r.question === "cause" ? "What was the cause of this?" : "What happened as a result?",
          [r.choice1, r.choice2],
          r.label,
        );
        return item(
          `copa:${r.idx}`,
          o.model ?? REQUEST_MODEL,
          r.premise,
          { answer: q.question },
          {
            answer: q.gold,
          },
        );
      }),
  },
  {
    name: "pubmedqa",
    description: "PubMedQA labelled (PQA-L): 3-way choice yes / no / maybe from an abstract",
    convert: (o) =>
      jsonLines<{ context: string; continuation: string }>(
        o.datasetsDir,
        "pubmedqa",
        "pubmed_qa_labeled.jsonl",
      ).map((r, row) => {
        const cut = r.context.search(/\nA\. yes\n/);
        const state = (cut < 0 ? r.context : r.context.slice(0, cut))
          .replace(/^Context: /, "")
          .trim();
        const answer = r.continuation.trim();
        if (!["yes", "no", "maybe"].includes(answer))
          throw new Error(`pubmedqa row ${row + 1}: answer "${answer}" is not yes, no or maybe`);
        return item(
          `pubmedqa:${row}`,
          o.model ?? REQUEST_MODEL,
          state,
          {
            answer: {
              type: "choice",
              instructions: "What does the abstract answer to the question?",
              criteria: {
                yes: "The results say yes",
                no: "The results say no",
                maybe: "The results are inconclusive",
              },
            },
          },
          { answer },
        );
      }),
  },
];

/** The per-subject CSV files of one MMLU part, by name. */
function mmluFiles(dir: string, part: string): string[] {
  return readdirSync(join(dir, "mmlu", part))
    .filter((f) => f.endsWith(".csv"))
    .sort();
}
