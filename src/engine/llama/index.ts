import {
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type Token as LlamaToken,
} from "node-llama-cpp";
import { basename, join } from "node:path";
import { planDecode, type DecodeLimits, type DecodePlan } from "../decode/index.js";
import { CALL_BUDGET_MS, CallHistory, CallPace, callLimits, type CallLimits } from "./call-pace.js";
import { chatTemplateOf } from "./chat.js";
import { forkLanes } from "./fork-lanes.js";
import { runLanes, type DecodeTally } from "./lanes.js";
import { DEFAULT_PREFIX_CACHE_BYTES, usableLlama, type LlamaEngineOptions } from "./setup.js";
import { commonPrefixLength, PrefixSnapshotCache } from "./prefix-cache.js";
import { runLeadTurn } from "./lead-turn.js";
import { PrefixSequence } from "./prefix-sequence.js";
import { discardWindows, LeadWindowsRunner, ropeShiftOf } from "./windowed-lead.js";
import { SnapshotWriteBehind } from "./write-behind.js";
import {
  countPrefixTurn,
  dropParked,
  runBranchTurn,
  sizeOf,
  takeOverLead,
  workLeft,
  YIELDED,
  type Progress,
} from "./turns.js";
import { TurnQueue } from "../turn-queue.js";
import {
  contextOverflowOf,
  type ChatTemplate,
  type Engine,
  type EngineCounters,
  type ModelInfo,
  type ScoreRequest,
  type ScoreResult,
  type Token,
  type TokenizeOptions,
} from "../types.js";

export { chatTemplateOf } from "./chat.js";
export { evaluateCalls, toLogprobs } from "./lanes.js";
export { DEFAULT_PREFIX_CACHE_BYTES, gpuIsUsable, type LlamaEngineOptions } from "./setup.js";
export { commonPrefixLength };

export { SNAPSHOT_WRITE_DELAY_MS } from "./write-behind.js";

/**
 * In-process llama.cpp through node-llama-cpp, executing each request's decode plan (`planDecode`,
 * engine/decode/). The prefix is evaluated once into sequence 0, followed by the tokens all
 * branches start with. Branches are evaluated on top of it side by side, in the plan's lanes
 * (lanes.ts): sequence 0 runs one lane itself, and up to `parallelBranches − 1` more sequences
 * start as a copy of its KV cells (`llama_memory_seq_cp`, the call node-llama-cpp's own
 * LlamaDecisionContext uses), made once per request. node-llama-cpp batches the branches of all
 * sequences into as few `llama_decode` calls as the batch size allows. A lane's next branch keeps
 * the tokens it shares with the previous one and erases the rest; the tokens of chained-label
 * children are erased after each child; at the end every sequence holds exactly the prefix again.
 *
 * Sequence 0 keeps the last prefix and its lead, so a request whose prefix starts like the previous
 * one only evaluates the tokens that differ, and one with the same prefix and lead (one question
 * asked again of the same state) only its branches (docs/decisions/110); older prefixes and leads
 * come back from the {@link PrefixSnapshotCache}.
 *
 * One request runs at a time, the one with the least work left first, and a long one does not hold
 * the model: between the decode calls of its prefix, its lead and (on one lane) its branches, and
 * between its branches, when a request with less work waits, it parks what it evaluated in the
 * prefix cache, queues again ({@link TurnQueue}) and resumes from there, with the same logits
 * (docs/decisions/103).
 * Without a prefix cache, or room in it, it runs to its end. Calls are paced (call-pace.ts).
 *
 * A lone question's long option list may be cut into windows (`ScoreRequest.windows`), each
 * evaluated seeing the prefix and itself only and then put in place (windowed-lead.ts,
 * docs/decisions/113).
 *
 * Every prefix, lead and branch is cut into decode calls by its own length (kernel-split.ts), and
 * tokens in the KV cache are taken over only as far as they were cut alike, so on the CPU with one
 * sequence a branch's logits are the same to the bit alone, beside other branches, and after any
 * cached prefix.
 */
export class LlamaEngine implements Engine {
  private readonly queue = new TurnQueue();
  /** Whether a running turn with `work` tokens left is to give the model up to one waiting. */
  private readonly giveWay = (work: number): boolean => this.queue.hasShorterThan(work);
  /** Sequence 0 and the prefix it holds. */
  private readonly prefix: PrefixSequence;
  /** The last decode call timed, which sizes the first call of each stretch (call-pace.ts). */
  private readonly history = new CallHistory();
  private closed = false;
  /** The write-behind of sequence 0's prefix after a request. */
  private readonly writeBehind = new SnapshotWriteBehind(this.queue, async () => {
    if (!this.closed) await this.prefix.saveSnapshot();
  });
  readonly counters: EngineCounters = {
    requests: 0,
    prefixTokensEvaluated: 0,
    prefixTokensCached: 0,
    branchTokensEvaluated: 0,
  };

  private constructor(
    readonly model: ModelInfo,
    readonly chatTemplate: ChatTemplate,
    private readonly llama: Llama,
    private readonly llamaModel: LlamaModel,
    private readonly context: LlamaContext,
    private readonly prefixSequence: LlamaContextSequence,
    /** What bounds one decode call: the batch size and the call budget (call-pace.ts). */
    private readonly calls: CallLimits,
    private readonly branchSequences: readonly LlamaContextSequence[],
    /** Snapshots of earlier prefixes; `undefined` when turned off. */
    readonly prefixCache: PrefixSnapshotCache | undefined,
    /** Evaluates leads in windows (windowed-lead.ts); `undefined` when the model or cache cannot. */
    private readonly windows: LeadWindowsRunner | undefined,
  ) {
    this.prefix = new PrefixSequence(prefixSequence, calls, this.history, prefixCache);
  }

  /** Loads the model and creates its context. @throws when the file is missing or not a GGUF. */
  static async open(options: LlamaEngineOptions): Promise<LlamaEngine> {
    const llama = await usableLlama(options.gpu ?? "auto");
    const llamaModel = await llama.loadModel({ modelPath: options.modelPath });
    const trainContextSize = llamaModel.trainContextSize;
    const contextSize = options.contextSize ?? Math.min(8192, trainContextSize);
    const parallelBranches = options.parallelBranches ?? (llama.gpu === false ? 1 : 16);
    const calls = callLimits(options.batchSize ?? 1024, options.callBudgetMs ?? CALL_BUDGET_MS);
    const context = await llamaModel.createContext({
      contextSize,
      sequences: Math.max(1, parallelBranches),
      batchSize: calls.batchSize,
      threads: options.threads ?? llama.cpuMathCores,
      ...(options.adapterPath ? { lora: { adapters: [{ filePath: options.adapterPath }] } } : {}),
    });
    const prefixSequence = context.getSequence();
    const branchSequences = Array.from({ length: Math.max(1, parallelBranches) - 1 }, () =>
      context.getSequence(),
    );
    const adapter = options.adapterPath ? basename(options.adapterPath) : options.mergedAdapter;
    const info: ModelInfo = {
      id: options.id ?? basename(options.modelPath).replace(/\.gguf$/i, ""),
      path: options.modelPath,
      contextSize: context.contextSize,
      trainContextSize,
      vision: false,
      ...(adapter ? { adapter } : {}),
    };
    const template = chatTemplateOf(llamaModel);
    const cacheBytes = options.prefixCacheBytes ?? DEFAULT_PREFIX_CACHE_BYTES;
    const prefixCache =
      cacheBytes > 0 ? new PrefixSnapshotCache({ maxBytes: cacheBytes }) : undefined;
    const rotate = ropeShiftOf(llamaModel);
    const scratch = prefixCache && join(prefixCache.directory, "windows.kv");
    // One lane only: a lane copying sequence 0 may have to evaluate the lead itself (fork-lanes.ts).
    const windows =
      rotate && scratch && branchSequences.length === 0
        ? new LeadWindowsRunner(prefixSequence, rotate, scratch)
        : undefined;
    return new LlamaEngine(
      info,
      template,
      llama,
      llamaModel,
      context,
      prefixSequence,
      calls,
      branchSequences,
      prefixCache,
      windows,
    );
  }

  /** How this engine's plans decode (`planDecode`). */
  private get limits(): DecodeLimits {
    return { lanes: this.parallelBranches, batchSize: this.calls.batchSize };
  }

  /** KV-cache sequences branches are spread over (the lanes of a request's branch schedule). */
  get parallelBranches(): number {
    return 1 + this.branchSequences.length;
  }

  async tokenize(text: string, options: TokenizeOptions = {}): Promise<Token[]> {
    options.signal?.throwIfAborted();
    return this.llamaModel.tokenize(text, options.special ?? false);
  }

  async detokenize(tokens: readonly Token[], signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    return this.llamaModel.detokenize(tokens as LlamaToken[], true);
  }

  workOf(request: ScoreRequest): number {
    return sizeOf(request, this.prefix, this.limits, this.evaluatesWindows)();
  }

  /** Whether leads are evaluated in windows now (decode/lead-windows.ts); see `Engine`. */
  get evaluatesWindows(): boolean {
    return this.windows?.enabled ?? false;
  }

  score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    if (request.media?.length)
      return Promise.reject(new Error(`model ${this.model.id} does not accept images`));
    const overflow = contextOverflowOf(request, this.model.contextSize);
    if (overflow) return Promise.reject(overflow);
    // A request before the write-behind takes its place (its restore saves a prefix it drops).
    this.writeBehind.cancel();
    return this.takeTurns(request, signal);
  }

  /**
   * Queues `request` for the model until a turn finishes it, ranked by its work left
   * ({@link TurnQueue}): a running turn gives the model up to a request with less.
   */
  private async takeTurns(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    const progress: Progress = { cachedPrefixTokens: undefined, evaluatedTokens: 0 };
    let rank: number | (() => number) = sizeOf(
      request,
      this.prefix,
      this.limits,
      this.evaluatesWindows,
    );
    try {
      for (;;) {
        const turn = await this.queue.run(
          async () => {
            const result = await this.scoreNow(request, progress, signal);
            if (result !== YIELDED && this.prefixCache && !this.closed) this.writeBehind.schedule();
            return result;
          },
          { rank, signal },
        );
        if (turn !== YIELDED) return turn;
        rank = progress.workLeft!;
      }
    } finally {
      // A request that failed (cancelled, past its deadline) leaves nothing parked, and no state
      // of its windows half written.
      dropParked(progress, this.prefixCache);
      await discardWindows(progress.windows);
    }
  }

  /**
   * Resolves once the engine has nothing queued: requests, and the write-behind of the last
   * prefix's snapshot, which is started at once if it was still waiting. For benchmarks and
   * tests, so that background work does not fall into the next measurement.
   */
  async idle(): Promise<void> {
    if (this.writeBehind.pending) this.writeBehind.start();
    await this.queue.idle();
  }

  /**
   * One turn of a request: executes its {@link DecodePlan}, the prefix into sequence 0 from what
   * it holds, the common lead on top, a copy for each further lane, then every lane's branches
   * (lanes.ts). A turn after one that stopped inside the lead or a branch, or between two
   * branches, takes back whole what that one parked, and goes on from there.
   * @param progress - what earlier turns of this request did; updated
   * @returns the result, or {@link YIELDED} when the turn gave the model up part way (its prefix,
   *   or the part evaluated, or the prefix and the lead and the part of a branch evaluated,
   *   parked in the prefix cache)
   */
  private async scoreNow(
    request: ScoreRequest,
    progress: Progress,
    signal?: AbortSignal,
  ): Promise<ScoreResult | typeof YIELDED> {
    if (this.closed) throw new Error("the engine is closed");
    signal?.throwIfAborted();
    const prefix = request.prefix as LlamaToken[];
    const limits = this.limits;
    const tally: DecodeTally = { evaluatedTokens: 0, counters: this.counters };
    // Whether this turn's prefix timed a call, which its lead then goes on from (call-pace.ts).
    const timedBefore = this.history.calls;
    const tookBack =
      progress.parkedWithLead &&
      (await this.prefix.takeBackWithLead(progress.parked!, prefix.length));
    // The prefix and lead a request before left (the same question asked of the same state).
    const windowed = this.evaluatesWindows;
    const counters = this.counters;
    const leadKept = await takeOverLead(request, progress, this.prefix, limits, counters, windowed);
    const held =
      tookBack || leadKept ? undefined : await this.prefix.restore(prefix, progress.parked);
    // What the last turn parked is in sequence 0 now, or of no more use: a later turn parks more,
    // and the write-behind saves the whole prefix.
    dropParked(progress, this.prefixCache, tookBack);
    let plan: DecodePlan;
    if (!held) {
      plan = planDecode(request, { shared: prefix.length, length: prefix.length }, limits);
    } else {
      // Take over only what was cut into calls as this prefix cuts itself (kernel-split.ts).
      plan = planDecode(request, held, limits);
      // An earlier turn of this request came to the prefix too, and gave the model up.
      const contended = progress.cachedPrefixTokens !== undefined;
      const branchWork = workLeft(request, plan.lead.length, prefix.length, progress.scores, false);
      const giveWay = (left: number) => this.giveWay(left + branchWork);
      const turn = await this.prefix.evaluate(prefix, plan, giveWay, contended, signal);
      countPrefixTurn(progress, turn, this.counters);
      if (turn.parked !== undefined) {
        progress.parked = turn.parked;
        progress.workLeft = branchWork + prefix.length - turn.cached - turn.evaluated;
        return YIELDED;
      }
    }
    const lead = request.branches[0]?.tokens.slice(0, plan.lead.length) ?? [];
    // With one lane (the CPU's), a request waiting gets the model between two decode calls of
    // the lead or of a branch, and between two branches.
    const giveWay = plan.lanes.length === 1 && this.prefixCache ? this.giveWay : undefined;
    const park = () => this.prefix.park();
    // Once the request has given the model up (`workLeft` set), in calls a waiting request can
    // see the end of sooner.
    const depth = this.prefixSequence.nextTokenIndex;
    const continues = this.history.calls > timedBefore;
    const contended = progress.workLeft !== undefined;
    const pace = new CallPace(this.calls, contended, this.history, depth, continues);
    const turn = { park, giveWay, ...this.calls, pace, tally, signal };
    let yielded = false;
    try {
      // Tokens every branch starts with are evaluated once, into sequence 0 on top of the prefix:
      // all of them, or what an earlier turn that gave way inside them left.
      const leadFrom = held ? 0 : progress.leadDone;
      if (leadFrom === undefined) progress.leadHeld = plan.lead.length;
      const sequence = this.prefixSequence;
      const windows = this.windows;
      const led =
        leadFrom === undefined ||
        (await runLeadTurn(request, plan, progress, leadFrom, { ...turn, sequence, windows }));
      if ((yielded = led === YIELDED)) return YIELDED;
      const helpers = this.branchSequences;
      const sequences = await forkLanes(sequence, helpers, prefix, lead, plan, tally);
      const scores = await runBranchTurn(request, plan, progress, {
        run: (lanes, mayGiveWay, parkPart) =>
          runLanes(sequences, request.branches, lanes, prefix.length, tally, {
            signal,
            giveWay: mayGiveWay,
            park: parkPart,
            // One lane's branch calls go on at the lead's pace; several lanes' calls are merged
            // (node-llama-cpp), and no lane gives way: the plan's calls.
            ...(plan.lanes.length === 1 ? { pace } : {}),
            keepFirst: prefix.length + lead.length,
            trieTolerance: request.trieTolerance,
          }),
        ...turn,
      });
      progress.evaluatedTokens += tally.evaluatedTokens;
      if ((yielded = scores === YIELDED)) return YIELDED;
      this.counters.requests++;
      return {
        branches: scores,
        evaluatedTokens: progress.evaluatedTokens,
        cachedPrefixTokens: progress.cachedPrefixTokens!,
        ...(progress.leadLayout ? { leadWindows: progress.leadLayout.length } : {}),
        ...(progress.windowsOff !== undefined ? { windowsOff: progress.windowsOff } : {}),
      };
    } finally {
      // Sequence 0 holds exactly the prefix again, and the tiled part of the lead this turn holds
      // (finished or not) for the next request, unless it gave the model up (it parked its own).
      const keep = yielded ? 0 : Math.min(progress.leadHeld ?? 0, plan.lead.tiled);
      const end = prefix.length + keep;
      if (this.prefixSequence.nextTokenIndex > end)
        await this.prefixSequence.eraseContextTokenRanges([
          { start: end, end: this.prefixSequence.nextTokenIndex },
        ]);
      this.prefix.keepLead(keep, progress.leadLayout);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.writeBehind.cancel();
    await this.queue.run(
      async () => {
        this.prefixCache?.close();
        await this.context.dispose();
        await this.llamaModel.dispose();
        await this.llama.dispose();
      },
      { rank: Infinity, interrupts: false },
    );
  }
}

/**
 * Opens an in-process llama.cpp engine. See {@link LlamaEngine}.
 * @throws when the file is missing or not a GGUF; `RangeError` when `batchSize` is below 128 or
 *   `callBudgetMs` not above 0
 * @example
 * ```ts
 * const engine = await openLlamaEngine({ modelPath: "/models/SmolLM2-135M-Instruct.Q4_1.gguf" });
 * const result = await engine.score({ prefix, branches: [{ tokens, candidates: [yes, no] }] });
 * ```
 */
export function openLlamaEngine(options: LlamaEngineOptions): Promise<LlamaEngine> {
  return LlamaEngine.open(options);
}
