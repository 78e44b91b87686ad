import type { Question as WireQuestion } from "../../protocol/schemas.js";
import { scoreLabels } from "../labels.js";
import { expectation, scoreConfidence } from "../math.js";
import { inlineQuestion, renderText } from "../prompt.js";
import type { ScoreAnswer, ScoreQuestion, TextValue } from "../types.js";
import { identityOrder, instructionsOf, type QuestionType, wireBase } from "./question-type.js";

/**
 * `score`: place the state on the caller's ordered scale. Asked with one `0 = level` line per
 * level and answered with the level number (fixed labels, the default), or, with
 * `scoreLabels: "levels"`, asked with its {@link levelTexts} inline and answered with one after
 * the `Answer:` cue. Levels keep the scale's order. Its answer is the expected level with the
 * probabilities and the legend by level.
 */
export const score: QuestionType<
  ScoreQuestion,
  ScoreAnswer,
  Extract<WireQuestion, { type: "score" }>
> = {
  name: "score",

  fromWire: (wire) => ({ type: "score", ...instructionsOf(wire), levels: wire.criteria }),
  toWire: (question) => ({ ...wireBase(question), criteria: question.levels }),

  labelCount: (question) => question.levels.length,
  fixedLabels: (question) => scoreLabels(question.levels.length),
  canonicalOrder: (question) => identityOrder(question.levels.length),
  debiased: false,
  contrasted: false,

  // A level's label is indexed by level: the scale is shown in its own order.
  lines: (question, labels, order) =>
    order.map((level) => {
      const description = question.levels[level];
      return description == null
        ? `${labels[level]}`
        : `${labels[level]} = ${renderText(description)}`;
    }),
  // What level labels gain and lose with the shipped adapter: docs/decisions/074-score-level-labels.md
  words: {
    texts: (question, settings) =>
      settings.scoreLabels === "levels" ? levelTexts(question) : undefined,
    render: renderInline,
  },

  bucket: (n) => (n <= 3 ? "2-3" : n <= 5 ? "4-5" : "6-10"),
  answer(question, probabilities) {
    const record: Record<string, number> = {};
    // The level as the request gave it (structured text stays structured, as the official
    // clients type it); an undescribed (null) level as "", since the clients want no null here.
    const legend: Record<string, TextValue> = {};
    question.levels.forEach((level, i) => {
      record[String(i)] = probabilities[i]!;
      legend[String(i)] = level ?? "";
    });
    return {
      type: "score",
      score: expectation(probabilities),
      legend,
      probabilities: record,
      confidence: scoreConfidence(probabilities),
    };
  },
};

/**
 * The texts a score's levels are named by when answered with word labels: each level trimmed,
 * lowest first.
 * @returns undefined when a level is not a string, is empty or repeats another (such a scale is
 *   answered with its level numbers)
 */
export function levelTexts(question: ScoreQuestion): string[] | undefined {
  const levels = question.levels.map((level) => (typeof level === "string" ? level.trim() : ""));
  if (levels.some((level) => level === "") || new Set(levels).size !== levels.length)
    return undefined;
  return levels;
}

/**
 * A score answered with its own level texts (word labels, `scoreLabels: "levels"`): the question
 * with the {@link levelTexts} inline in the scale's order, lowest first, e.g.
 * `How frustrated is the customer? calm, frustrated or very angry?`, as a choice is asked, so the
 * model names a level rather than pointing at its number. Only called for scales that have level
 * texts (the planner chooses word labels from them).
 */
function renderInline(question: ScoreQuestion): string {
  return inlineQuestion(question.instructions, levelTexts(question) ?? []);
}
