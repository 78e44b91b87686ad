import {
  getLlama,
  LlamaLogLevel,
  LlamaText,
  resolveChatWrapper,
  SpecialToken,
  SpecialTokensText,
  type ChatHistoryItem,
  type ControlledEvaluateInputItem,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type Token as LlamaToken,
} from "node-llama-cpp";
import { basename } from "node:path";
import { branchCallSizes, leadCallSizes, scheduleBranches } from "./branch-schedule.js";
import { prefixCallSizes, prefixResumeAfter } from "./kernel-split.js";
import { commonPrefixLength, PrefixSnapshotCache } from "./prefix-cache.js";
import {
  contextOverflowOf,
  type BranchScore,
  type ChatMessage,
  type ChatTemplate,
  type Engine,
  type EngineCounters,
  type ModelInfo,
  type ScoreBranch,
  type ScoreRequest,
  type ScoreResult,
  type Token,
  type TokenizeOptions,
} from "./types.js";

/**
 * Whether a llama.cpp GPU backend has a device to run on: a GPU backend (`gpu` not `false`) with
 * at least one device and some VRAM. node-llama-cpp reports `gpu: "vulkan"` on a CPU-only machine
 * with a Vulkan loader installed (Debian's mesa-vulkan-drivers, common on desktops) though it
 * finds no device (or only a software rasterizer without VRAM), and the engine then sized itself
 * for a GPU: 16 branch sequences, 3.1–3.3 GiB at idle for a 98 MB model (issue 31, item 4).
 * @param found - what the backend reports: `gpu`, its device names, its VRAM total in bytes.
 * @example gpuIsUsable({ gpu: "vulkan", devices: [], vramTotal: 0 }) // → false
 */
export function gpuIsUsable(found: {
  gpu: string | false;
  devices: readonly string[];
  vramTotal: number;
}): boolean {
  return found.gpu !== false && found.devices.length > 0 && found.vramTotal > 0;
}

/**
 * The llama.cpp binding to use: with `"auto"`, node-llama-cpp's choice when its GPU backend has a
 * usable device ({@link gpuIsUsable}), else the CPU build. Why: docs/decisions/037-cpu-when-no-gpu.md
 */
async function usableLlama(gpu: "auto" | false): Promise<Llama> {
  const llama = await getLlama({ gpu, logLevel: LlamaLogLevel.error });
  if (llama.gpu === false) return llama;
  const [devices, vram] = await Promise.all([llama.getGpuDeviceNames(), llama.getVramState()]);
  if (gpuIsUsable({ gpu: llama.gpu, devices, vramTotal: vram.total })) return llama;
  await llama.dispose();
  return getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
}

/** Options of {@link openLlamaEngine}. */
export interface LlamaEngineOptions {
  /** Absolute path of a GGUF file. */
  readonly modelPath: string;
  /** Model id reported in {@link ModelInfo.id}; defaults to the file name without `.gguf`. */
  readonly id?: string;
  /**
   * Tokens per KV-cache sequence, i.e. the most one request (prefix + longest branch) may use.
   * Default: the smaller of 8192 and the model's training context (a 255-option choice with
   * descriptions needs about 4.5k tokens).
   */
  readonly contextSize?: number;
  /**
   * Branches evaluated side by side (one KV-cache sequence each, sequence 0 included), so their tokens go
   * through the model in few `llama_decode` calls. Default: 16 (the most questions one request
   * may carry) with a GPU; 1 on a CPU. Measured on the 2-core x86 here with SmolLM2-135M
   * (`npm run bench -- --states S --questions Q --options K --systems a,b --runs 2..5
   * --parallel N`, 2026-11-23, (b) medians): 64-token state × 4 questions × 2 options 644 ms
   * with 1 sequence against 852 ms with 4; 2048 × 4 × 8 9.3 s against 11.5 s; 2048 × 16 × 8
   * 13.7 s against 14.7 s; 512 × 4/16 × 8 level (2.8/4.7 s against 2.8/4.6 s). One lane reuses
   * the starts consecutive branches share (see {@link scheduleBranches}); more lanes each
   * evaluate them again, start with a copy of a whole KV stream (node-llama-cpp gives every
   * sequence its own context of cells, ~190 MB at 8192 tokens, copied at the next decode). The
   * prefix snapshot took ~25 ms against ~4.5 ms in those runs, but that was this VM (fresh pages
   * of a growing cache fault on the host; see bench/run.mjs, "Steady state"): once the cache is
   * full, 4 sequences write it in 4–9 ms too.
   * Before branches shared their starts, 4 had won on the CPU (bench/parallel.mjs).
   */
  readonly parallelBranches?: number;
  /**
   * Absolute path of a GGUF LoRA adapter applied on top of the model at scale 1 (a
   * decision-tuned adapter, docs/TRAINING.md). Default: none.
   */
  readonly adapterPath?: string;
  /** CPU threads for evaluation. Default: llama.cpp's count of math cores (physical cores). */
  readonly threads?: number;
  /** Largest number of tokens one decode call takes, at least 128. Default 1024. */
  readonly batchSize?: number;
  /** `"auto"` offloads to a GPU when one is usable; `false` forces the CPU. Default `"auto"`. */
  readonly gpu?: "auto" | false;
  /**
   * Bytes of evaluated-prefix snapshots kept for reuse (an LRU, see {@link PrefixSnapshotCache});
   * 0 turns the cache off (sequence 0 still keeps the last prefix). Default 512 MiB.
   */
  readonly prefixCacheBytes?: number;
}

/** Default of {@link LlamaEngineOptions.prefixCacheBytes}: 512 MiB. */
export const DEFAULT_PREFIX_CACHE_BYTES = 512 * 1024 * 1024;

/**
 * A snapshot is loaded only when it holds at least this many more prefix tokens than sequence 0
 * already shares with the request: loading replaces the whole sequence, so a gain of a few tokens
 * is not worth a copy of all of them.
 */
const MIN_SNAPSHOT_GAIN = 32;

/**
 * Milliseconds after a request before the engine writes the snapshot of the prefix it just read
 * (write-behind), unless another request comes first. Long enough for the answer to leave over
 * HTTP (well under 2 ms here) before the write takes a core: on a 2-core machine a write started
 * at once shares the cores with the response and the client's wake-up.
 */
export const SNAPSHOT_WRITE_DELAY_MS = 10;

/** A promise chain that runs one task at a time: one llama.cpp context serves one request at a time. */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/** node-llama-cpp's sequence with the KV-copy method its own LlamaDecisionContext uses. */
type CopyableSequence = LlamaContextSequence & {
  _copyStateFromOtherSequence(
    other: LlamaContextSequence,
    upToTokenIndex: number,
  ): Promise<boolean>;
};

/**
 * In-process llama.cpp through node-llama-cpp. The prefix is evaluated once into sequence 0,
 * followed by the tokens all branches start with. Branches are evaluated on top of it side by
 * side, in the lanes of a {@link scheduleBranches} schedule: sequence 0 runs one lane itself, and
 * up to `parallelBranches − 1` more sequences start as a copy of its KV cells
 * (`llama_memory_seq_cp`, the call node-llama-cpp's own LlamaDecisionContext uses), made once per
 * request. node-llama-cpp batches the branches of all sequences into as few `llama_decode` calls
 * as the batch size allows. A lane's next branch keeps the tokens it shares with the previous one
 * and erases the rest; the tokens of chained-label children are erased after each child; at the
 * end every sequence holds exactly the prefix again.
 *
 * Sequence 0 keeps the last prefix, so a request whose prefix starts like the previous one only
 * evaluates the tokens that differ; older prefixes come back from the {@link PrefixSnapshotCache}.
 *
 * Every prefix, lead and branch is cut into decode calls by its own length (kernel-split.ts), and
 * tokens in the KV cache are taken over only as far as they were cut alike, so on the CPU with one
 * sequence a branch's logits are the same to the bit alone, beside other branches, and after any
 * cached prefix.
 */
export class LlamaEngine implements Engine {
  private readonly queue = new SerialQueue();
  private closed = false;
  /**
   * Length of the prefix whose call map (kernel-split.ts) sequence 0's tokens were evaluated by:
   * the number of tokens it holds, or `undefined` when an evaluation broke off and they are not
   * known to follow one map (then none is taken over or saved).
   */
  private prefixMapLength: number | undefined = 0;
  /** The pending write-behind of sequence 0's prefix (see {@link scheduleSnapshotWrite}). */
  private snapshotTimer: ReturnType<typeof setTimeout> | undefined;
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
    /** Largest number of tokens one decode call takes. */
    private readonly batchSize: number,
    private readonly branchSequences: readonly LlamaContextSequence[],
    /** Snapshots of earlier prefixes; `undefined` when turned off. */
    readonly prefixCache: PrefixSnapshotCache | undefined,
  ) {}

  /** Loads the model and creates its context. @throws when the file is missing or not a GGUF. */
  static async open(options: LlamaEngineOptions): Promise<LlamaEngine> {
    const llama = await usableLlama(options.gpu ?? "auto");
    const llamaModel = await llama.loadModel({ modelPath: options.modelPath });
    const trainContextSize = llamaModel.trainContextSize;
    const contextSize = options.contextSize ?? Math.min(8192, trainContextSize);
    const parallelBranches = options.parallelBranches ?? (llama.gpu === false ? 1 : 16);
    const batchSize = options.batchSize ?? 1024;
    if (!(batchSize >= 128)) throw new RangeError("batchSize must be at least 128");
    const context = await llamaModel.createContext({
      contextSize,
      sequences: Math.max(1, parallelBranches),
      batchSize,
      threads: options.threads ?? llama.cpuMathCores,
      ...(options.adapterPath ? { lora: { adapters: [{ filePath: options.adapterPath }] } } : {}),
    });
    const prefixSequence = context.getSequence();
    const branchSequences = Array.from({ length: Math.max(1, parallelBranches) - 1 }, () =>
      context.getSequence(),
    );
    const info: ModelInfo = {
      id: options.id ?? basename(options.modelPath).replace(/\.gguf$/i, ""),
      path: options.modelPath,
      contextSize: context.contextSize,
      trainContextSize,
      vision: false,
      ...(options.adapterPath ? { adapter: basename(options.adapterPath) } : {}),
    };
    const template = chatTemplateOf(llamaModel);
    const cacheBytes = options.prefixCacheBytes ?? DEFAULT_PREFIX_CACHE_BYTES;
    const prefixCache =
      cacheBytes > 0 ? new PrefixSnapshotCache({ maxBytes: cacheBytes }) : undefined;
    return new LlamaEngine(
      info,
      template,
      llama,
      llamaModel,
      context,
      prefixSequence,
      batchSize,
      branchSequences,
      prefixCache,
    );
  }

  /** KV-cache sequences branches are spread over (the lanes of a request's branch schedule). */
  get parallelBranches(): number {
    return 1 + this.branchSequences.length;
  }

  async tokenize(text: string, options: TokenizeOptions = {}): Promise<Token[]> {
    options.signal?.throwIfAborted();
    return this.llamaModel.tokenize(text, options.special ?? false) as Token[];
  }

  async detokenize(tokens: readonly Token[], signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    return this.llamaModel.detokenize(tokens as LlamaToken[], true);
  }

  score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    if (request.media?.length)
      return Promise.reject(new Error(`model ${this.model.id} does not accept images`));
    const overflow = contextOverflowOf(request, this.model.contextSize);
    if (overflow) return Promise.reject(overflow);
    // A request that comes before the write-behind takes its place: its restorePrefix writes
    // the snapshot only if it drops the prefix.
    this.cancelSnapshotWrite();
    return this.queue.run(async () => {
      const result = await this.scoreNow(request, signal);
      this.scheduleSnapshotWrite();
      return result;
    });
  }

  /**
   * Resolves once the engine has nothing queued: requests, and the write-behind of the last
   * prefix's snapshot, which is started at once if it was still waiting. For benchmarks and
   * tests, so that background work does not fall into the next measurement.
   */
  async idle(): Promise<void> {
    if (this.snapshotTimer !== undefined) this.startSnapshotWrite();
    await this.queue.run(async () => undefined);
  }

  /**
   * Write-behind: {@link SNAPSHOT_WRITE_DELAY_MS} after a request, sequence 0's prefix is saved
   * to the prefix cache, so the next request with another state does not wait for that write
   * (which {@link restorePrefix} would otherwise do first). With SmolLM2-135M on the 2-core x86
   * here (2026-11-24, medians of 12) the write takes 3.9 / 8.3 / 20.8 ms for a 64 / 512 /
   * 2048-token state. A request arriving sooner cancels it and writes inline as before.
   */
  private scheduleSnapshotWrite(): void {
    if (!this.prefixCache || this.closed) return;
    this.cancelSnapshotWrite();
    this.snapshotTimer = setTimeout(() => this.startSnapshotWrite(), SNAPSHOT_WRITE_DELAY_MS);
    this.snapshotTimer.unref();
  }

  /** Drops the waiting timer and queues the write-behind now. */
  private startSnapshotWrite(): void {
    this.cancelSnapshotWrite();
    void this.queue.run(() => this.writeSnapshot());
  }

  private cancelSnapshotWrite(): void {
    if (this.snapshotTimer === undefined) return;
    clearTimeout(this.snapshotTimer);
    this.snapshotTimer = undefined;
  }

  /** Saves sequence 0's tokens to the prefix cache (nothing if already there); never throws. */
  private async writeSnapshot(): Promise<void> {
    if (this.closed || !this.prefixCache) return;
    if (this.prefixMapLength !== this.prefixSequence.contextTokens.length) return;
    try {
      await this.prefixCache.save(this.prefixSequence);
    } catch {
      // A snapshot that cannot be written is not cached; the next request works without it.
    }
  }

  private async scoreNow(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    if (this.closed) throw new Error("the engine is closed");
    signal?.throwIfAborted();
    const prefix = request.prefix as LlamaToken[];
    const common = await this.restorePrefix(prefix);
    // Take over only what was cut into calls as this prefix cuts itself (kernel-split.ts).
    const held = this.prefixMapLength;
    const resume = held === undefined ? 0 : prefixResumeAfter(common, held, prefix.length);
    await this.prefixSequence.adaptStateToTokens(prefix.slice(0, resume), false);
    const cachedPrefixTokens = this.prefixSequence.nextTokenIndex;
    if (cachedPrefixTokens < prefix.length) {
      this.prefixMapLength = undefined;
      await evaluateCalls(
        this.prefixSequence,
        prefix,
        cachedPrefixTokens,
        prefixCallSizes(cachedPrefixTokens, prefix.length, this.batchSize),
      );
    }
    this.prefixMapLength = prefix.length;
    let evaluatedTokens = prefix.length - cachedPrefixTokens;
    this.counters.prefixTokensEvaluated += prefix.length - cachedPrefixTokens;
    this.counters.prefixTokensCached += cachedPrefixTokens;

    // Tokens every branch starts with are evaluated once, into sequence 0 on top of the prefix
    // (the common lead of the schedule), and each lane then runs its branches in token order, a
    // branch starting from what it shares with the lane's previous one (see branch-schedule.ts).
    const schedule = scheduleBranches(request.branches, 1 + this.branchSequences.length);
    const lead = (request.branches[0]?.tokens.slice(0, schedule.lead) ?? []) as LlamaToken[];
    const base = prefix.length + lead.length;
    if (lead.length > 0) {
      await evaluateCalls(
        this.prefixSequence,
        lead,
        0,
        leadCallSizes(request.branches, lead.length, this.batchSize),
      );
      evaluatedTokens += lead.length;
      this.counters.branchTokensEvaluated += lead.length;
    }

    // Sequence 0 holds the prefix (and lead) and runs lane 0; the other lanes' sequences get a
    // copy of its KV cache, once per request and before any branch runs (with node-llama-cpp's
    // non-unified KV cache, llama.cpp copies a whole stream of cells per copy, whatever the
    // prefix length).
    const helpers = this.branchSequences.slice(0, schedule.lanes.length - 1);
    const baseTokens = [...prefix, ...lead];
    for (const sequence of helpers) {
      const copied = await (sequence as CopyableSequence)._copyStateFromOtherSequence(
        this.prefixSequence,
        base,
      );
      if (!copied) {
        // The KV copy is not possible on every backend; fall back to evaluating the prefix and
        // the lead, cut into calls as sequence 0 cut them.
        await sequence.clearHistory();
        await evaluateCalls(sequence, prefix, 0, prefixCallSizes(0, prefix.length, this.batchSize));
        await evaluateCalls(
          sequence,
          lead,
          0,
          leadCallSizes(request.branches, lead.length, this.batchSize),
        );
        evaluatedTokens += baseTokens.length;
        this.counters.prefixTokensEvaluated += baseTokens.length;
      }
    }
    const sequences = [this.prefixSequence, ...helpers];

    /**
     * Evaluates `branch.tokens` from `skip` on, reads the answer position, then its children.
     * A branch goes through the calls its schedule gives (`calls`; all but the last without
     * logits); a child, one call.
     */
    const evaluate = async (
      sequence: LlamaContextSequence,
      branch: ScoreBranch,
      skip: number,
      calls: readonly number[] = [branch.tokens.length - skip],
    ): Promise<BranchScore> => {
      signal?.throwIfAborted();
      if (branch.tokens.length === 0) throw new Error("a branch must have at least one token");
      const start = sequence.nextTokenIndex;
      const before = branch.tokens.length - skip - calls.at(-1)!;
      if (calls.length > 1) {
        await evaluateCalls(sequence, branch.tokens, skip, calls.slice(0, -1));
        evaluatedTokens += before;
        this.counters.branchTokensEvaluated += before;
      }
      const tokens = branch.tokens.slice(skip + before);
      const input: ControlledEvaluateInputItem[] = tokens.map((token, index) =>
        index === tokens.length - 1
          ? [
              token as LlamaToken,
              {
                generateNext: {
                  // The greedy sampler (temperature 0) selects the max-logit token, and
                  // `includeSelected` returns its logit: the max that `totalLogitWeight` is
                  // relative to. (`includeMax` cannot be used: node-llama-cpp 3.22 adds the max
                  // token only when it is already among the filter's tokens.)
                  options: { temperature: 0 },
                  logits: {
                    filter: { tokens: branch.candidates as LlamaToken[], includeSelected: true },
                  },
                  totalLogitWeight: true,
                },
              },
            ]
          : (token as LlamaToken),
      );
      const output = await sequence.controlledEvaluate(input);
      evaluatedTokens += tokens.length;
      this.counters.branchTokensEvaluated += tokens.length;
      const next = output[output.length - 1]?.next;
      if (!next?.logits || next.totalLogitWeight == null)
        throw new Error("llama.cpp returned no logits for the answer position");
      const logprobs = toLogprobs(next.logits, next.totalLogitWeight, branch.candidates);
      const children: BranchScore[] = [];
      for (const child of branch.children ?? []) {
        children.push(await evaluate(sequence, child, 0));
        await sequence.eraseContextTokenRanges([
          { start: start + branch.tokens.length - skip, end: sequence.nextTokenIndex },
        ]);
      }
      return branch.children ? { logprobs, children } : { logprobs };
    };

    // allSettled, not all: every lane must be done with its sequence before the next request
    // (queued behind this one) may use the sequences, even when one branch failed or aborted.
    // A lane stops at its first failure, and the others stop at their next branch.
    const scores: BranchScore[] = new Array(request.branches.length);
    let failed = false;
    const settled = await Promise.allSettled(
      schedule.lanes.map(async (run, lane) => {
        const sequence = sequences[lane]!;
        try {
          for (const { index, shared } of run) {
            if (failed) return;
            // Keep the tokens this branch shares with the lane's previous one, drop the rest.
            if (sequence.nextTokenIndex > prefix.length + shared)
              await sequence.eraseContextTokenRanges([
                { start: prefix.length + shared, end: sequence.nextTokenIndex },
              ]);
            const branch = request.branches[index]!;
            const calls = branchCallSizes(branch, shared, this.batchSize);
            scores[index] = await evaluate(sequence, branch, shared, calls);
          }
        } catch (error) {
          failed = true;
          throw error;
        } finally {
          // Every sequence holds exactly the prefix again (sequence 0 drops the lead too).
          if (sequence.nextTokenIndex > prefix.length)
            await sequence.eraseContextTokenRanges([
              { start: prefix.length, end: sequence.nextTokenIndex },
            ]);
        }
      }),
    );
    const rejected = settled.find((s) => s.status === "rejected");
    if (rejected) throw (rejected as PromiseRejectedResult).reason;
    this.counters.requests++;
    return { branches: scores, evaluatedTokens, cachedPrefixTokens };
  }

  /**
   * Puts the best available start of `prefix` into sequence 0: what sequence 0 already shares
   * with it, or a snapshot from the prefix cache sharing more. Before sequence 0 drops tokens it
   * holds, they are saved to the cache.
   * @returns how many tokens of `prefix` sequence 0 now holds.
   */
  private async restorePrefix(prefix: readonly LlamaToken[]): Promise<number> {
    const sequence = this.prefixSequence;
    const shared = commonPrefixLength(sequence.contextTokens, prefix);
    const cache = this.prefixCache;
    if (!cache) return shared;
    if (
      shared < sequence.contextTokens.length &&
      this.prefixMapLength === sequence.contextTokens.length
    )
      await cache.save(sequence);
    const match = cache.find(prefix, shared + MIN_SNAPSHOT_GAIN);
    if (!match) return shared;
    try {
      // A snapshot holds a whole prefix evaluated by its own call map.
      const tokens = await cache.load(sequence, match.key);
      if (!tokens) return shared;
      this.prefixMapLength = tokens.length;
      return commonPrefixLength(tokens, prefix);
    } catch {
      // A snapshot that cannot be read back is dropped; the sequence is evaluated from scratch.
      cache.delete(match.key);
      this.prefixMapLength = undefined;
      return 0;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.cancelSnapshotWrite();
    await this.queue.run(async () => {
      this.prefixCache?.close();
      await this.context.dispose();
      await this.llamaModel.dispose();
      await this.llama.dispose();
    });
  }
}

/**
 * Evaluates `tokens[from…]` into `sequence` without reading logits, one decode call per entry of
 * `calls` (token counts, each at most the context's batch size; see kernel-split.ts). Used by the
 * engine and by the benchmark's floor (bench/run.mjs), so both make the same calls.
 */
export async function evaluateCalls(
  sequence: LlamaContextSequence,
  tokens: readonly Token[],
  from: number,
  calls: readonly number[],
): Promise<void> {
  let at = from;
  for (const size of calls) {
    await sequence.evaluateWithoutGeneratingNewTokens(tokens.slice(at, at + size) as LlamaToken[]);
    at += size;
  }
}

/** Opens an in-process llama.cpp engine. See {@link LlamaEngine}. */
export function openLlamaEngine(options: LlamaEngineOptions): Promise<LlamaEngine> {
  return LlamaEngine.open(options);
}

export { commonPrefixLength };

/**
 * Full-vocabulary log-probabilities of `candidates` from their raw logits.
 * log p(t) = logit(t) − max − ln W, with W = Σ_v exp(logit(v) − max) over the whole vocabulary
 * (node-llama-cpp's `totalLogitWeight`); the max-logit token must be among `logits` (the engine
 * asks for the greedy sampler's selected token, which is it).
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
 * The model's chat template through node-llama-cpp's chat wrapper for it (resolved from the GGUF
 * metadata). Special tokens become their text; a BOS token is written only when the model asks
 * for one (`tokenizer.ggml.add_bos_token`), which avoids a doubled `<|im_start|>` on ChatML models
 * whose BOS is `<|im_start|>`.
 */
export function chatTemplateOf(model: LlamaModel): ChatTemplate {
  const wrapper = resolveChatWrapper(model);
  const bos = model.tokens.bosString;
  const addBos = model.tokens.shouldPrependBosToken;
  return {
    name: wrapper.wrapperName,
    async render(messages: readonly ChatMessage[]): Promise<string> {
      const chatHistory: ChatHistoryItem[] = messages.map((message) =>
        message.role === "system"
          ? { type: "system", text: message.content }
          : message.role === "user"
            ? { type: "user", text: message.content }
            : { type: "model", response: [message.content] },
      );
      chatHistory.push({ type: "model", response: [] });
      const { contextText } = wrapper.generateContextState({ chatHistory });
      return llamaTextToString(contextText, {
        BOS: addBos ? (bos ?? "") : "",
        EOS: model.tokens.eosString ?? "",
        EOT: model.tokens.eotString ?? "",
        NL: model.tokens.nlString ?? "\n",
      });
    },
  };
}

function llamaTextToString(text: LlamaText, specials: Record<string, string>): string {
  let out = "";
  for (const value of text.values) {
    if (typeof value === "string") out += value;
    else if (value instanceof SpecialTokensText) out += value.value;
    else if (value instanceof SpecialToken) out += specials[value.value] ?? "";
  }
  return out;
}
