import type { ScoreBranch } from "../types.js";

/**
 * What a branch's label trie may leave unread (`ScoreRequest.trieTolerance`), as lanes.ts reads
 * its children: the bound's bookkeeping, and the probability of reaching a node.
 */

// Why children may be left unread: docs/decisions/108-children-left-unread-within-a-bound.md
/**
 * What one branch's trie may leave unread (`ScoreRequest.trieTolerance`): the probability of the
 * label ends read so far, and of the children left unread.
 */
export class UnreadAllowance {
  private read = 0;
  private unread = 0;

  constructor(private readonly tolerance: number) {}

  /**
   * Counts the candidates of `node` that end a label (those no child starts with), read with
   * `logprobs` at a node reached with log-probability `path`.
   */
  readEnds(node: ScoreBranch, logprobs: readonly number[], path: number): void {
    const inner = new Set(node.children?.map((child) => child.tokens[0]));
    node.candidates.forEach((token, i) => {
      if (!inner.has(token)) this.read += Math.exp(path + logprobs[i]!);
    });
  }

  /**
   * Whether children reached with probability `mass` in all may be left unread; counted as
   * unread when they may.
   */
  mayLeave(mass: number): boolean {
    if (this.unread + mass > this.tolerance * this.read) return false;
    this.unread += mass;
    return true;
  }
}

/** Whether every child below `node` starts with one of its parent's candidates (a label trie). */
export function isTrie(node: ScoreBranch): boolean {
  return (node.children ?? []).every(
    (child) => node.candidates.includes(child.tokens[0]!) && isTrie(child),
  );
}

/** A node's score, and the log-probability of reaching it (0 at a branch's answer position). */
export interface ReadNode {
  readonly node: ScoreBranch;
  readonly logprobs: readonly number[];
  readonly path: number;
}

/**
 * The log-probability of reaching `child` of `parent`: the parent's, and that of the candidate
 * the child starts with.
 */
export function pathTo(child: ScoreBranch, parent: ReadNode): number {
  return parent.path + parent.logprobs[parent.node.candidates.indexOf(child.tokens[0]!)]!;
}
