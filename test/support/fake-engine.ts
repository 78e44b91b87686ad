import type {
  BranchScore,
  Engine,
  ScoreBranch,
  ScoreRequest,
  ScoreResult,
  Token,
} from "../../src/engine/types.js";

/**
 * A stand-in engine for tests of the decision pipeline without a model: a word-level tokenizer
 * (a chat tag `<…>` is one token, a word with its leading spaces is one token, ids handed out in
 * first-seen order), a chat template of tags, and a score that is a fixed function of the
 * tokens, so a test can predict every number.
 */

/** The pieces {@link FakeEngine.tokenize} cuts text into. */
const PIECES = /<[^>]*>|\s*[^\s<]+|\s+/g;

/** A deterministic log-probability for a candidate after `tokens` (≤ 0). */
export function fakeLogprob(tokens: readonly Token[], candidate: Token): number {
  const last = tokens.at(-1) ?? 0;
  return -0.25 - ((candidate * 7 + last * 3) % 11) / 4;
}

export class FakeEngine implements Engine {
  readonly model;
  readonly counters = {
    requests: 0,
    prefixTokensEvaluated: 0,
    prefixTokensCached: 0,
    branchTokensEvaluated: 0,
  };
  /** Token id of each piece, in first-seen order from 1. */
  readonly vocabulary = new Map<string, Token>();
  /** The score requests received, in order. */
  readonly requests: ScoreRequest[] = [];
  readonly chatTemplate = {
    name: "fake",
    render: async (messages: readonly { role: string; content: string }[]) =>
      messages.map((m) => `<${m.role}>${m.content}</${m.role}>`).join("") + "<assistant>",
  };

  constructor(contextSize = 100_000) {
    this.model = {
      id: "fake",
      path: "fake",
      contextSize,
      trainContextSize: contextSize,
      vision: false,
    };
  }

  async tokenize(text: string): Promise<Token[]> {
    return (text.match(PIECES) ?? []).map((piece) => {
      let id = this.vocabulary.get(piece);
      if (id === undefined) this.vocabulary.set(piece, (id = this.vocabulary.size + 1));
      return id;
    });
  }

  async detokenize(tokens: readonly Token[]): Promise<string> {
    const pieces = [...this.vocabulary.keys()];
    return tokens.map((t) => pieces[t - 1] ?? "").join("");
  }

  async score(request: ScoreRequest): Promise<ScoreResult> {
    this.requests.push(request);
    this.counters.requests++;
    const read = (before: readonly Token[], branch: ScoreBranch): BranchScore => {
      const tokens = [...before, ...branch.tokens];
      const logprobs = branch.candidates.map((c) => fakeLogprob(tokens, c));
      return branch.children
        ? { logprobs, children: branch.children.map((child) => read(tokens, child)) }
        : { logprobs };
    };
    return {
      branches: request.branches.map((b) => read(request.prefix, b)),
      evaluatedTokens: request.prefix.length,
      cachedPrefixTokens: 0,
    };
  }

  async close(): Promise<void> {}
}
