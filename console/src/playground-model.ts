import { MAX_QUESTIONS, MAX_SCORE_LEVELS } from "../../src/protocol/limits.js";

/**
 * The playground's questions as edited (drafts), and the request body of POST /v1/systemone they
 * make. The server validates the body; here only what a JSON object cannot carry is checked
 * (two questions or options with one id would silently become one).
 */

export type QuestionType = "choice" | "noul" | "score";

export interface OptionDraft {
  uid: number;
  id: string;
  description: string;
}

export interface QuestionDraft {
  uid: number;
  id: string;
  type: QuestionType;
  instructions: string;
  /** choice: option id → description (empty: the id describes itself). */
  options: OptionDraft[];
  /** score: level descriptions, index = value. */
  levels: { uid: number; text: string }[];
  /** noul: optional descriptions of the two sides. */
  trueText: string;
  falseText: string;
}

let nextUid = 1;
/** A fresh key for a list item. */
export const uid = () => nextUid++;

/** Most questions per request, and most levels of a score (the API's limits). */
export { MAX_QUESTIONS, MAX_SCORE_LEVELS as MAX_LEVELS };

export function newQuestion(type: QuestionType, index: number): QuestionDraft {
  return {
    uid: uid(),
    id: `q${index}`,
    type,
    instructions: "",
    options: [
      { uid: uid(), id: "yes", description: "" },
      { uid: uid(), id: "no", description: "" },
    ],
    levels: [
      { uid: uid(), text: "low" },
      { uid: uid(), text: "medium" },
      { uid: uid(), text: "high" },
    ],
    trueText: "",
    falseText: "",
  };
}

/** The README's example: a support ticket and one question of each type. */
export const EXAMPLE_STATE = JSON.stringify(
  {
    channel: "email",
    message:
      "I was charged twice for my March invoice and the refund still has not arrived. Fix this today!",
  },
  null,
  2,
);

export function exampleQuestions(): QuestionDraft[] {
  return [
    {
      ...newQuestion("noul", 1),
      id: "refund",
      instructions: "Is the customer asking for money back?",
    },
    {
      ...newQuestion("choice", 2),
      id: "team",
      instructions: "Which team should handle this ticket?",
      options: [
        { uid: uid(), id: "billing", description: "Payments, invoices, refunds" },
        { uid: uid(), id: "technical", description: "Bugs, outages" },
        { uid: uid(), id: "sales", description: "" },
      ],
    },
    {
      ...newQuestion("score", 3),
      id: "anger",
      instructions: "How frustrated is the customer?",
      levels: [
        { uid: uid(), text: "calm" },
        { uid: uid(), text: "frustrated" },
        { uid: uid(), text: "very angry" },
      ],
    },
  ];
}

/** A problem found before sending, with the question it is about. */
export interface DraftProblem {
  question: number | undefined;
  message: string;
}

/** The questions object of a request, or the problems that prevent one. */
export function questionsBody(
  drafts: QuestionDraft[],
): { questions: Record<string, unknown> } | { problems: DraftProblem[] } {
  const problems: DraftProblem[] = [];
  const seen = new Set<string>();
  drafts.forEach((q, i) => {
    const id = q.id.trim();
    if (id === "") problems.push({ question: i, message: `question ${i + 1} needs an id` });
    else if (seen.has(id))
      problems.push({ question: i, message: `two questions are called "${id}"` });
    seen.add(id);
    if (q.type === "choice") {
      const ids = new Set<string>();
      for (const o of q.options) {
        const oid = o.id.trim();
        if (oid !== "" && ids.has(oid))
          problems.push({ question: i, message: `"${id}" has two options called "${oid}"` });
        ids.add(oid);
      }
    }
  });
  if (drafts.length === 0) problems.push({ question: undefined, message: "add a question" });
  if (problems.length > 0) return { problems };
  const questions: Record<string, unknown> = {};
  for (const q of drafts) {
    const question: Record<string, unknown> = { type: q.type };
    if (q.instructions.trim() !== "") question.instructions = q.instructions.trim();
    if (q.type === "choice")
      question.criteria = Object.fromEntries(
        q.options.map((o) => [
          o.id.trim(),
          o.description.trim() === "" ? null : o.description.trim(),
        ]),
      );
    if (q.type === "score") question.criteria = q.levels.map((l) => l.text.trim());
    if (q.type === "noul" && (q.trueText.trim() !== "" || q.falseText.trim() !== "")) {
      const criteria: Record<string, string> = {};
      if (q.trueText.trim() !== "") criteria.true = q.trueText.trim();
      if (q.falseText.trim() !== "") criteria.false = q.falseText.trim();
      question.criteria = criteria;
    }
    questions[q.id.trim()] = question;
  }
  return { questions };
}

/** The state as JSON, or the parse error. */
export function parseState(text: string): { state: unknown } | { error: string } {
  if (text.trim() === "") return { error: "the state is empty: write any JSON value" };
  try {
    return { state: JSON.parse(text) as unknown };
  } catch (e) {
    return { error: `the state is not valid JSON: ${(e as Error).message}` };
  }
}
