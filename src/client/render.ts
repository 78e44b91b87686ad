import type { Answer, DecideResponse } from "./client.js";

/** A probability or confidence with two decimals. */
export function formatProbability(p: number): string {
  return p.toFixed(2);
}

/**
 * The short form of an answer's value: the choice's option id; `true`/`false` with P(true) for a
 * noul; the expected score with the most probable level for a score.
 */
export function formatAnswerValue(answer: Answer): string {
  switch (answer.type) {
    case "choice":
      return answer.choice;
    case "noul":
      return `${answer.noul >= 0.5 ? "true" : "false"} (P(true) ${formatProbability(answer.noul)})`;
    case "score": {
      const mode = mostProbable(answer.probabilities);
      const level = mode === undefined ? undefined : answer.legend[mode];
      const label =
        typeof level === "string" || level === undefined ? level : JSON.stringify(level);
      return `${answer.score.toFixed(2)} of 0–${Object.keys(answer.probabilities).length - 1}${
        mode === undefined ? "" : `, most likely ${mode}${label ? ` "${label}"` : ""}`
      }`;
    }
  }
}

/** An answer's confidence, or `undefined` for a noul (which has none: P(true) says it all). */
export function answerConfidence(answer: Answer): number | undefined {
  return answer.type === "noul" ? undefined : answer.confidence;
}

/**
 * The `n` most probable labels of an answer, best first: option ids (choice), `true`/`false`
 * (noul), level numbers "0".."n−1" (score).
 */
export function topProbabilities(answer: Answer, n = 3): [label: string, probability: number][] {
  const entries: [string, number][] =
    answer.type === "noul"
      ? [
          ["true", answer.noul],
          ["false", 1 - answer.noul],
        ]
      : Object.entries(answer.probabilities);
  return entries.sort((a, b) => b[1] - a[1]).slice(0, n);
}

/**
 * One line per question: `id (type): value — confidence c`, in the response's order. Used as the
 * text rendering of the MCP tool's result.
 */
export function renderAnswerLines(response: DecideResponse): string[] {
  return Object.entries(response.answers).map(([id, answer]) => {
    const confidence = answerConfidence(answer);
    return `${id} (${answer.type}): ${formatAnswerValue(answer)}${
      confidence === undefined ? "" : ` — confidence ${formatProbability(confidence)}`
    }`;
  });
}

function mostProbable(probabilities: Record<string, number>): string | undefined {
  let best: string | undefined;
  for (const [key, p] of Object.entries(probabilities))
    if (best === undefined || p > probabilities[best]!) best = key;
  return best;
}
