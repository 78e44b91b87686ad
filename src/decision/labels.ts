import type { ScoreBranch, Token } from "../engine/types.js";

/**
 * Option labels: the short strings the model answers with at the answer position. Each label is
 * tokenized as it appears after the answer cue; labels whose token sequences share a first token
 * form a trie, and the probability of a multi-token label is the chain P(t₁)·P(t₂|t₁)·…, read
 * from child branches: to its last token (`labelChain: "full"`) or to the token where it parts
 * from the other labels ({@link toPartingTokens}, the default). Fixed-width labels are
 * prefix-free as strings, so no label's token sequence can be a proper prefix of another's and
 * the chain needs no end-of-label token.
 */

/** Letters used as single-character labels for up to 26 options. */
const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";

/**
 * Labels for a choice of `n` options: "A".."Z" for n ≤ 26, otherwise zero-padded numbers
 * "01".."n" (width = digits of n), e.g. "001".."255".
 */
export function choiceLabels(n: number): string[] {
  if (n <= LETTERS.length) return [...LETTERS.slice(0, n)];
  const width = String(n).length;
  return Array.from({ length: n }, (_, i) => String(i + 1).padStart(width, "0"));
}

/** Labels of an n-level score: the level values "0".."n−1" (n ≤ 10 gives single digits). */
export function scoreLabels(n: number): string[] {
  const width = String(n - 1).length;
  return Array.from({ length: n }, (_, i) => String(i).padStart(width, "0"));
}

/** Labels of a noul question, "true" side first. */
export const NOUL_LABELS = ["Yes", "No"] as const;

/** A trie node over label token sequences. */
export interface LabelTrie {
  /** Distinct next tokens, in first-seen order. */
  readonly tokens: Token[];
  /** For each entry of `tokens`: the label index ending there, or a deeper node. */
  readonly next: (number | LabelTrie)[];
}

/**
 * Builds the trie of label token sequences.
 * @throws `Error` when a label has no tokens, two labels tokenize the same, or one is a proper
 *   prefix of another (the labels would be ambiguous).
 */
export function buildLabelTrie(sequences: readonly (readonly Token[])[]): LabelTrie {
  const root: LabelTrie = { tokens: [], next: [] };
  sequences.forEach((sequence, labelIndex) => {
    if (sequence.length === 0) throw new Error(`label ${labelIndex} has no tokens`);
    let node = root;
    sequence.forEach((token, depth) => {
      const last = depth === sequence.length - 1;
      let at = node.tokens.indexOf(token);
      if (at < 0) {
        node.tokens.push(token);
        node.next.push(last ? labelIndex : { tokens: [], next: [] });
        at = node.tokens.length - 1;
      } else if (last || typeof node.next[at] === "number") {
        throw new Error(`label ${labelIndex}'s tokens collide with another label's`);
      }
      const child = node.next[at]!;
      if (typeof child !== "number") node = child;
    });
  });
  return root;
}

// Why a label is read only to its parting token: docs/decisions/101-labels-read-to-their-parting-token.md
/**
 * The trie cut at each label's parting token: every subtree that holds one label becomes that
 * label, so a label is read up to the token where it parts from every other label of the
 * question (P(t₁)·…·P(t_k), t_k its parting token) and not past it. Its remaining tokens are the
 * only way to finish what the model has begun; reading them costs a decode position each.
 * @returns a new trie; `trie` is unchanged
 * @example
 * ```ts
 * toPartingTokens(buildLabelTrie([[5, 6, 7], [5, 8, 9]])); // → { tokens: [5], next: [{ tokens: [6, 8], next: [0, 1] }] }
 * ```
 */
export function toPartingTokens(trie: LabelTrie): LabelTrie {
  const only = (node: LabelTrie): number | undefined => {
    if (node.next.length !== 1) return undefined;
    const next = node.next[0]!;
    return typeof next === "number" ? next : only(next);
  };
  return {
    tokens: trie.tokens,
    next: trie.next.map((next) =>
      typeof next === "number" ? next : (only(next) ?? toPartingTokens(next)),
    ),
  };
}

/**
 * The engine branch that reads a trie: `tokens` are evaluated, the trie's first tokens are the
 * candidates, and every inner node becomes a child branch of one token.
 */
export function trieBranch(tokens: readonly Token[], trie: LabelTrie): ScoreBranch {
  const children: ScoreBranch[] = [];
  trie.next.forEach((next, i) => {
    if (typeof next !== "number") children.push(trieBranch([trie.tokens[i]!], next));
  });
  return children.length > 0
    ? { tokens, candidates: trie.tokens, children }
    : { tokens, candidates: trie.tokens };
}

/** Answer positions a trie reads (the branch itself plus one per inner node). */
export function triePositions(trie: LabelTrie): number {
  let count = 1;
  for (const next of trie.next) if (typeof next !== "number") count += triePositions(next);
  return count;
}

/** The label indices a trie node leads to. */
function labelsUnder(node: LabelTrie): number[] {
  return node.next.flatMap((next) => (typeof next === "number" ? [next] : labelsUnder(next)));
}

/** A node's score as {@link readTrie} reads it (the engine's `BranchScore`). */
interface NodeScore {
  readonly logprobs: readonly number[];
  /** One per inner entry of the node, in order; `undefined` for a child the engine left unread. */
  readonly children?: readonly (NodeScore | undefined)[];
}

/**
 * Label log-probabilities from the engine's answer for a {@link trieBranch}: for each label, the
 * sum of the log-probabilities along its token path in the trie (to the parting token in a
 * {@link toPartingTokens} trie, else to its end). A child the engine left unread
 * (`ScoreRequest.trieTolerance`) passes the probability of reaching it to its labels in equal
 * parts: their sum, which it bounds from above, is what is not known of them.
 * @param score - the candidate log-probabilities at the root, in `trie.tokens` order, and the
 *   children's scores in the order of the node's inner entries
 */
export function readTrie(trie: LabelTrie, score: NodeScore, labelCount: number): number[] {
  const out = new Array<number>(labelCount).fill(-Infinity);
  const walk = (node: LabelTrie, at: NodeScore, base: number) => {
    let child = 0;
    node.next.forEach((next, i) => {
      const lp = base + at.logprobs[i]!;
      if (typeof next === "number") out[next] = lp;
      else {
        const below = at.children![child++];
        if (below) walk(next, below, lp);
        else {
          const labels = labelsUnder(next);
          for (const label of labels) out[label] = lp - Math.log(labels.length);
        }
      }
    });
  };
  walk(trie, score, 0);
  return out;
}
