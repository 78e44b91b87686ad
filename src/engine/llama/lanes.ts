import type {
  ControlledEvaluateInputItem,
  LlamaContextSequence,
  Token as LlamaToken,
} from "node-llama-cpp";
import { branchCallSizes, type DecodePlan, type PlannedBranch } from "../decode/index.js";
import type { CallPace } from "./call-pace.js";
import type { BranchScore, EngineCounters, ScoreBranch, Token } from "../types.js";
import { isTrie, pathTo, UnreadAllowance, type ReadNode } from "./trie-allowance.js";

/**
 * The branch half of the in-process engine's work: each lane's branches evaluated on its
 * KV-cache sequence in the calls a {@link DecodePlan} names (on one lane, paced: the same cuts of
 * a branch's map, sized by call-pace.ts), and their answer positions read.
 */

/** Tokens one request puts through the model, added to the engine's counters as they go. */
export interface DecodeTally {
  /** Tokens this request evaluated (prefix, lead, branches, children). */
  evaluatedTokens: number;
  readonly counters: EngineCounters;
}

/** Counts `n` branch tokens evaluated (the lead's, a branch's, a child's). */
export function countBranchTokens(tally: DecodeTally, n: number): void {
  tally.evaluatedTokens += n;
  tally.counters.branchTokensEvaluated += n;
}

/**
 * Evaluates `tokens[from…]` into `sequence` without reading logits, one decode call per entry of
 * `calls` (token counts, each at most the context's batch size; see kernel-split.ts). Used by the
 * engine and by the benchmark's floor (bench/run.mjs), so both make the same calls (the engine's
 * paced calls are cut smaller where one would run past the call budget, call-pace.ts).
 * @param signal - checked before each call, so a cancelled request frees the engine after the
 *   call in flight (at most one batch of tokens) rather than after the whole prefix or branch
 * @throws the signal's reason when aborted; the sequence then holds the calls made so far
 */
export async function evaluateCalls(
  sequence: LlamaContextSequence,
  tokens: readonly Token[],
  from: number,
  calls: readonly number[],
  signal?: AbortSignal,
): Promise<void> {
  let at = from;
  for (const size of calls) {
    signal?.throwIfAborted();
    await sequence.evaluateWithoutGeneratingNewTokens(tokens.slice(at, at + size) as LlamaToken[]);
    at += size;
  }
}

/**
 * Full-vocabulary log-probabilities of `candidates` from their raw logits:
 * log p(t) = logit(t) − max − ln W, with W = Σ_v exp(logit(v) − max) over the whole vocabulary
 * (node-llama-cpp's `totalLogitWeight`); the max-logit token must be among `logits` (the engine
 * asks for the greedy sampler's selected token, which is it).
 * @param logits - logit by token, the candidates and the max-logit token among them
 * @returns natural-log probabilities in candidate order (≤ 0)
 * @throws `Error` when a candidate has no logit
 */
export function toLogprobs(
  logits: ReadonlyMap<LlamaToken, number>,
  totalLogitWeight: number,
  candidates: readonly Token[],
): number[] {
  let max = -Infinity;
  for (const value of logits.values()) max = Math.max(max, value);
  const logW = Math.log(totalLogitWeight);
  return candidates.map((token) => {
    const logit = logits.get(token as LlamaToken);
    if (logit === undefined) throw new Error(`no logit for candidate token ${token}`);
    return logit - max - logW;
  });
}

/**
 * The evaluation input of tokens whose last one reads the candidates' logits at the answer
 * position. The greedy sampler (temperature 0) selects the max-logit token, and
 * `includeSelected` returns its logit: the max that `totalLogitWeight` is relative to
 * (`includeMax` cannot be used: node-llama-cpp 3.22 adds the max token only when it is already
 * among the filter's tokens).
 */
function answerInput(
  tokens: readonly Token[],
  candidates: readonly Token[],
): ControlledEvaluateInputItem[] {
  return tokens.map((token, index) =>
    index === tokens.length - 1
      ? [
          token as LlamaToken,
          {
            generateNext: {
              options: { temperature: 0 },
              logits: { filter: { tokens: candidates as LlamaToken[], includeSelected: true } },
              totalLogitWeight: true,
            },
          },
        ]
      : (token as LlamaToken),
  );
}

/**
 * The candidates' log-probabilities read at `output[index]` (an input item made by
 * {@link answerInput}).
 * @throws `Error` when llama.cpp returned no logits there
 */
function readAt(
  output: Awaited<ReturnType<LlamaContextSequence["controlledEvaluate"]>>,
  index: number,
  candidates: readonly Token[],
): number[] {
  const next = output[index]?.next;
  if (!next?.logits || next.totalLogitWeight == null)
    throw new Error("llama.cpp returned no logits for the answer position");
  return toLogprobs(next.logits, next.totalLogitWeight, candidates);
}

/**
 * Scores the children of `parent` on top of what `sequence` holds now, each child with its single
 * children in one call ({@link evaluateChain}), erasing each before the next and the last before
 * returning. With an `allowance`, the most probable child first, until the rest may all be left
 * unread (`undefined`); without one, in order.
 * @returns one score per child, in the children's order
 */
async function scoreChildren(
  sequence: LlamaContextSequence,
  parent: ReadNode,
  tally: DecodeTally,
  signal?: AbortSignal,
  allowance?: UnreadAllowance,
): Promise<(BranchScore | undefined)[]> {
  const children = parent.node.children ?? [];
  const end = sequence.nextTokenIndex;
  const paths = children.map((child) => pathTo(child, parent));
  const order = children.map((_, i) => i);
  if (allowance) order.sort((a, b) => paths[b]! - paths[a]!);
  // The probability of reaching the children from each place in `order` on.
  const rest = order.map((i) => Math.exp(paths[i]!));
  for (let k = rest.length - 2; k >= 0; k--) rest[k]! += rest[k + 1]!;
  const scores: (BranchScore | undefined)[] = children.map(() => undefined);
  for (const [k, i] of order.entries()) {
    // The rest, least probable, may all be left unread: stop reading.
    if (allowance?.mayLeave(rest[k]!)) break;
    scores[i] = await evaluateChain(
      sequence,
      chainOf(children[i]!),
      paths[i]!,
      tally,
      signal,
      allowance,
    );
    await sequence.eraseContextTokenRanges([{ start: end, end: sequence.nextTokenIndex }]);
  }
  return scores;
}

/** Most tokens one chain of single children takes in one decode call (labels are ≤ 9 tokens). */
const MAX_CHAIN_TOKENS = 64;

/**
 * A child and the single children below it (a label's tokens after the point where it parts
 * from the others, each node read at its end): the nodes one decode call can evaluate, since
 * each continues the one before. Stops at a node with no child or several, or at
 * {@link MAX_CHAIN_TOKENS}.
 */
function chainOf(child: ScoreBranch): ScoreBranch[] {
  const chain = [child];
  let tokens = child.tokens.length;
  let last = child;
  while (
    last.children?.length === 1 &&
    tokens + last.children[0]!.tokens.length <= MAX_CHAIN_TOKENS
  ) {
    last = last.children[0]!;
    tokens += last.tokens.length;
    chain.push(last);
  }
  return chain;
}

/**
 * Evaluates a chain of children ({@link chainOf}) in one decode call, reading each node's
 * candidates at its last token. Each token attends to the same tokens as when every node was a
 * call of its own, so the reads are the same up to the float rounding of another call shape
 * (docs/SPEED.md, "Label chains in one call"), in one call where there were `chain.length`.
 * Then the last node's own children, each erased after.
 * @param path - the log-probability of reaching the first node (for `allowance`)
 * @returns the first node's score, the others nested as its single children
 * @throws `Error` when a node has no tokens or llama.cpp returns no logits; the signal's
 *   reason when aborted
 */
async function evaluateChain(
  sequence: LlamaContextSequence,
  chain: readonly ScoreBranch[],
  path: number,
  tally: DecodeTally,
  signal?: AbortSignal,
  allowance?: UnreadAllowance,
): Promise<BranchScore> {
  signal?.throwIfAborted();
  const input: ControlledEvaluateInputItem[] = [];
  const reads: number[] = [];
  for (const node of chain) {
    if (node.tokens.length === 0) throw new Error("a branch must have at least one token");
    input.push(...answerInput(node.tokens, node.candidates));
    reads.push(input.length - 1);
  }
  const output = await sequence.controlledEvaluate(input);
  countBranchTokens(tally, input.length);
  const logprobs = chain.map((node, k) => readAt(output, reads[k]!, node.candidates));
  let at = path;
  const paths = chain.map((node, k) => {
    if (k > 0) at = pathTo(node, { node: chain[k - 1]!, logprobs: logprobs[k - 1]!, path: at });
    allowance?.readEnds(node, logprobs[k]!, at);
    return at;
  });
  const last = chain.at(-1)!;
  let score: BranchScore = last.children
    ? {
        logprobs: logprobs.at(-1)!,
        children: await scoreChildren(
          sequence,
          { node: last, logprobs: logprobs.at(-1)!, path: paths.at(-1)! },
          tally,
          signal,
          allowance,
        ),
      }
    : { logprobs: logprobs.at(-1)! };
  for (let k = chain.length - 2; k >= 0; k--) score = { logprobs: logprobs[k]!, children: [score] };
  return score;
}

/** How {@link evaluateBranch} cuts a branch's decode calls, where it may stop, what it counts. */
interface BranchRun {
  /** The planned calls from the branch's start point (all but the last without logits). */
  readonly planned: readonly number[];
  /** Sets the size of each call instead of the plan (call-pace.ts), and times it. */
  readonly pace?: CallPace | undefined;
  /**
   * Asked between two decode calls of the branch with the branch tokens the sequence holds:
   * `true` when the lane parked them to give the model up, and stops there.
   */
  readonly stop?: ((done: number) => Promise<boolean>) | undefined;
  readonly tally: DecodeTally;
  readonly signal?: AbortSignal | undefined;
  /** `ScoreRequest.trieTolerance` (0: every child read). */
  readonly tolerance: number;
}

/** What {@link evaluateBranch} returns when it stopped inside the branch. */
const STOPPED = Symbol("stopped");

/**
 * Evaluates `branch.tokens` from `skip` on, reads the answer position, then its children, each
 * with its single children in one call ({@link evaluateChain}) on top of the branch and erased
 * after. With a pace, each call takes what the pace allows of the rest, cut by the branch's own
 * map (kernel-split.ts), so on the CPU with one sequence its logits are the same to the bit as
 * with the planned calls.
 * @returns the candidates' log-probabilities, and the children's; {@link STOPPED} when `stop`
 *   said so between two calls (the sequence then holds the branch tokens evaluated so far)
 * @throws `Error` when the branch has no tokens or llama.cpp returns no logits; the signal's
 *   reason when aborted
 */
async function evaluateBranch(
  sequence: LlamaContextSequence,
  branch: ScoreBranch,
  skip: number,
  run: BranchRun,
): Promise<BranchScore | typeof STOPPED> {
  if (branch.tokens.length === 0) throw new Error("a branch must have at least one token");
  const { planned, pace, stop, tally, signal, tolerance } = run;
  let at = skip;
  // Every call but the last, which reads the answer position.
  for (let k = 0; ; k++) {
    const next = pace ? branchCallSizes(branch, at, pace.tokens) : planned.slice(k);
    if (k > 0 && (await stop?.(at))) return STOPPED;
    signal?.throwIfAborted();
    if (next.length <= 1) break;
    const [from, size] = [at, next[0]!];
    const evaluate = () => evaluateCalls(sequence, branch.tokens, from, [size]);
    const depth = sequence.nextTokenIndex + size;
    await (pace ? pace.time(size, depth, evaluate) : evaluate());
    countBranchTokens(tally, size);
    at += size;
  }
  const tokens = branch.tokens.slice(at);
  const output = await sequence.controlledEvaluate(answerInput(tokens, branch.candidates));
  countBranchTokens(tally, tokens.length);
  const logprobs = readAt(output, output.length - 1, branch.candidates);
  if (!branch.children) return { logprobs };
  const allowance = tolerance > 0 && isTrie(branch) ? new UnreadAllowance(tolerance) : undefined;
  allowance?.readEnds(branch, logprobs, 0);
  const root = { node: branch, logprobs, path: 0 };
  return { logprobs, children: await scoreChildren(sequence, root, tally, signal, allowance) };
}

/** A branch a lane stopped inside: its index, and its tokens the sequence holds. */
export interface BranchPart {
  readonly index: number;
  readonly done: number;
}

/** Options of {@link runLanes}. */
export interface LaneOptions {
  readonly signal?: AbortSignal;
  /**
   * Asked before each branch but a lane's first, with the lane's branches left (`done` 0), and
   * between two decode calls of a branch, with the branch first and its tokens the sequence holds
   * (`done`): `true` stops the lane there (the engine passes it with one lane, to give the model
   * up to a request waiting with less work).
   */
  readonly giveWay?: (rest: readonly PlannedBranch[], done: number) => boolean;
  /**
   * Parks what sequence 0 holds when its lane stops inside a branch; `false` when it could not,
   * and then the lane goes on to its end. Without it, a lane stops only between branches.
   */
  readonly park?: (part: BranchPart) => Promise<boolean>;
  /**
   * The pace of lane 0's branch calls (call-pace.ts), for a plan of one lane; default, and on
   * every other lane, the plan's calls.
   */
  readonly pace?: CallPace;
  /**
   * Tokens sequence 0 keeps at the end. Default the prefix; the prefix and the lead when the
   * engine may park them.
   */
  readonly keepFirst?: number;
  /** `ScoreRequest.trieTolerance`. Default 0: every child read. */
  readonly trieTolerance?: number;
}

/**
 * Runs every lane of a plan side by side, lane i on `sequences[i]`, each holding the prefix and
 * the lead: a lane's branch keeps the tokens it shares with the lane's previous one and erases
 * the rest. Every lane is done with its sequence before this settles, even when one failed (the
 * next request may use the sequences); a lane stops at its first failure, the others at their
 * next branch. At the end every sequence holds exactly the prefix again (sequence 0
 * `keepFirst` tokens).
 * @param prefixLength - tokens of the prefix, which every sequence keeps
 * @returns the score of every branch, in request order; a hole for each branch not run
 * @throws the first lane's failure; the signal's reason when aborted
 */
export async function runLanes(
  sequences: readonly LlamaContextSequence[],
  branches: readonly ScoreBranch[],
  lanes: DecodePlan["lanes"],
  prefixLength: number,
  tally: DecodeTally,
  options: LaneOptions = {},
): Promise<(BranchScore | undefined)[]> {
  const { signal, giveWay, park, keepFirst = prefixLength, trieTolerance = 0 } = options;
  const scores = new Array<BranchScore | undefined>(branches.length);
  let failed = false;
  const settled = await Promise.allSettled(
    lanes.map(async (run, lane) => {
      const sequence = sequences[lane]!;
      const pace = lane === 0 ? options.pace : undefined;
      // Stops inside a branch, once one could not be parked, are not tried again.
      let mayPark = park !== undefined;
      try {
        for (const [k, { index, shared, calls }] of run.entries()) {
          if (failed || (k > 0 && giveWay?.(run.slice(k), 0))) return;
          // Keep the tokens this branch shares with the lane's previous one, drop the rest.
          if (sequence.nextTokenIndex > prefixLength + shared)
            await sequence.eraseContextTokenRanges([
              { start: prefixLength + shared, end: sequence.nextTokenIndex },
            ]);
          const stop = async (done: number) => {
            if (!mayPark || !giveWay?.(run.slice(k), done)) return false;
            mayPark = await park!({ index, done });
            return mayPark;
          };
          const how = { planned: calls, pace, stop, tally, signal, tolerance: trieTolerance };
          const score = await evaluateBranch(sequence, branches[index]!, shared, how);
          if (score === STOPPED) return;
          scores[index] = score;
        }
      } catch (error) {
        failed = true;
        throw error;
      } finally {
        // Every sequence holds exactly the prefix again (sequence 0 what it is to keep).
        const keep = lane === 0 ? keepFirst : prefixLength;
        if (sequence.nextTokenIndex > keep)
          await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
      }
    }),
  );
  const rejected = settled.find((s) => s.status === "rejected");
  if (rejected) throw rejected.reason;
  return scores;
}
