import type { DecisionRequest } from "../../src/decision/types.js";

/**
 * One choice question over three topics with no descriptions, in the Decider's planned shape:
 * the question the engine tests ask of sports text (`prefix-cache`, `engine-cancel`).
 */
export const TOPIC_QUESTIONS: DecisionRequest["questions"] = [
  [
    "topic",
    {
      type: "choice",
      instructions: "What is the topic of the text?",
      options: [
        ["sports", null],
        ["business", null],
        ["technology", null],
      ],
    },
  ],
];
