import { unlink } from "node:fs/promises";
import type { LlamaContextSequence, LlamaModel, Token as LlamaToken } from "node-llama-cpp";
import type { CallPace } from "./call-pace.js";
import { countBranchTokens, type DecodeTally } from "./lanes.js";
import {
  openStateFile,
  ropeShift,
  StateFormatError,
  type RopeShift,
  type StateFile,
} from "./sequence-state.js";
import { StateWriter } from "./state-writer.js";
import type { Token } from "../types.js";

// Why, and what it costs: docs/decisions/113-option-lines-in-windows.md
/**
 * A lead's windows (decode/lead-windows.ts) in the in-process engine. node-llama-cpp gives each
 * sequence consecutive positions and its own KV stream, so a window cannot be hidden from the
 * next inside one sequence. Each window is evaluated into sequence 0 right after the prefix,
 * its cells saved (llama.cpp's sequence-state file, sequence-state.ts) and erased, and copied at
 * once, its keys turned by RoPE to its place in the list, into one state that holds the prefix and
 * every window (a {@link StateWriter}, a file beside the prefix cache's snapshots, in `/dev/shm`
 * where there is one); that state is loaded back when the last is in, and removed. Between two
 * windows the request may give the model up; the state being written is kept
 * ({@link WindowsDone}) for its next turn, and {@link discardWindows} removes it when the request
 * ends otherwise.
 */

/**
 * How long windows stay off after a run failed, ms, doubled after each failure in a row up to
 * {@link WINDOWS_RETRY_MAX_MS}: a full `/dev/shm` (which node-llama-cpp reports as a plain "Failed
 * to save state to file", or leaves as a file cut short) is often freed again by the prefix
 * cache's evictions or another program's end; a state of another layout fails every time, and
 * costs one window an hour.
 */
export const WINDOWS_RETRY_MS = 60_000;
/** The longest windows stay off after failures in a row, ms. */
export const WINDOWS_RETRY_MAX_MS = 3_600_000;

/** What a request's turns have evaluated of its windows. */
export interface WindowsDone {
  /** How many of the windows, from the first, are in {@link writer}. */
  evaluated: number;
  /**
   * The state file the prefix and those windows are written into, sized for the prefix and every
   * window from the first (about 23 KB a token with SmolLM2-135M); absent before the first.
   */
  writer?: StateWriter;
}

/** Removes what `done` wrote, if anything: for a request that ends between two windows. */
export async function discardWindows(done: WindowsDone | undefined): Promise<void> {
  const writer = done?.writer;
  if (!writer) return;
  delete done.writer;
  done.evaluated = 0;
  await writer.discard();
}

/** How {@link LeadWindowsRunner.run} ended. */
export type WindowsRun =
  /** The sequence holds the prefix and the lead up to the last window's end. */
  | "whole"
  /** It stopped between two windows for a request waiting; the sequence holds the prefix. */
  | "stopped"
  /**
   * The state could not be merged (another file layout, a failed write); the sequence holds the
   * prefix, and the lead is to be evaluated without windows.
   */
  | "failed";

/** What one {@link LeadWindowsRunner.run} works on. */
export interface WindowsTurn {
  readonly prefixLength: number;
  /** The branches' common tokens, the windows among them. */
  readonly lead: readonly Token[];
  /** The windows' ends, lead-relative (`leadWindows`). */
  readonly ends: readonly number[];
  readonly batchSize: number;
  readonly pace: CallPace;
  readonly tally: DecodeTally;
  readonly signal: AbortSignal | undefined;
  /** Whether to stop before the next window, given the window tokens left; absent: never. */
  readonly giveWay: ((windowTokensLeft: number) => boolean) | undefined;
}

/**
 * Evaluates a lead's windows into sequence 0 for the in-process engine, one per engine; made
 * only for a model {@link ropeShiftOf} can turn keys for, on one lane, with a prefix cache.
 * @example
 * ```ts
 * const runner = new LeadWindowsRunner(sequence0, ropeShiftOf(model)!, join(cacheDir, "windows.kv"));
 * const run = await runner.run({ evaluated: 0 }, turn); // "whole" | "stopped" | "failed"
 * ```
 */
export class LeadWindowsRunner {
  /**
   * Until when windows are not tried (ms, on `now`'s clock), after {@link failures} runs failed
   * in a row ({@link WINDOWS_RETRY_MS}); the engine is as fast as before without them.
   */
  private offUntil = -Infinity;
  /** Runs failed since the last whole one. */
  private failures = 0;
  /** Merged states made so far, to name their files. */
  private merges = 0;

  /**
   * @param sequence - sequence 0
   * @param rotate - the model's key rotation ({@link ropeShiftOf})
   * @param file - a scratch file path, written and removed by each run; the merged states are
   *   written beside it (`<file>.<n>`)
   * @param now - the clock, ms
   */
  constructor(
    private readonly sequence: LlamaContextSequence,
    private readonly rotate: RopeShift,
    private readonly file: string,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Whether requests' windows are evaluated as windows (false for a while after a run failed). */
  get enabled(): boolean {
    return this.now() >= this.offUntil;
  }

  /** How long until windows are tried again, ms: 0 while on. */
  get offMs(): number {
    return Math.max(0, this.offUntil - this.now());
  }

  /**
   * Evaluates the windows `done` does not hold yet, one decode call or more each, right after the
   * prefix in sequence 0 (which is first cut back to the prefix), then puts them all in place.
   * @param done - updated with each window evaluated; after "whole" and "failed" it holds no
   *   file, after "stopped" and a throw it may: the caller removes it ({@link discardWindows})
   *   when the request ends before its windows are loaded
   * @returns how it ended ({@link WindowsRun})
   * @throws the signal's reason when aborted (checked before each decode call); what failed, when
   *   the sequence no longer holds the prefix after it
   */
  async run(done: WindowsDone, turn: WindowsTurn): Promise<WindowsRun> {
    const { prefixLength, lead, ends, tally, signal } = turn;
    await this.cutBackTo(prefixLength);
    const started = done.evaluated;
    // The merged state's cells: the prefix's and the lead's up to the last window's end.
    const cells = prefixLength + ends.at(-1)!;
    try {
      for (let k = started; k < ends.length; k++) {
        const start = k === 0 ? 0 : ends[k - 1]!;
        if (k > started && turn.giveWay?.(ends.at(-1)! - start)) return "stopped";
        signal?.throwIfAborted();
        const size = ends[k]! - start;
        for (const [from, calls] of windowCalls(size, Math.max(turn.pace.tokens, 128))) {
          if (from > 0) signal?.throwIfAborted();
          const tokens = lead.slice(start + from, start + from + calls) as LlamaToken[];
          const depth = prefixLength + from + calls;
          await turn.pace.time(calls, depth, () =>
            this.sequence.evaluateWithoutGeneratingNewTokens(tokens),
          );
          countBranchTokens(tally, calls);
        }
        const state = await this.saved();
        try {
          if (!done.writer) {
            const prefix = this.sequence.contextTokens.slice(0, prefixLength);
            if (prefix.length !== prefixLength)
              throw new StateFormatError(`${prefix.length} prefix tokens of ${prefixLength}`);
            const tokens = [...prefix, ...lead.slice(0, ends.at(-1))];
            const path = `${this.file}.${++this.merges}`;
            done.writer = await StateWriter.create(path, state, tokens, this.rotate);
            await done.writer.place(state, 0, prefixLength, 0, 0);
          }
          const at = prefixLength + start;
          await done.writer.place(state, prefixLength, prefixLength + size, at, start);
        } finally {
          await state.close();
        }
        done.evaluated++;
        await this.cutBackTo(prefixLength);
      }
      await this.load(done, cells);
      this.failures = 0;
      return "whole";
    } catch (error) {
      if (signal?.aborted) throw error;
      const off = WINDOWS_RETRY_MS * 2 ** this.failures++;
      this.offUntil = this.now() + Math.min(WINDOWS_RETRY_MAX_MS, off);
      await discardWindows(done);
      await this.cutBackTo(prefixLength);
      // A load that failed part way may leave the sequence without its prefix: that fails the turn.
      if (this.sequence.nextTokenIndex !== prefixLength) throw error;
      return "failed";
    }
  }

  /** Saves sequence 0's state and opens it; its file is removed at once (the handle keeps it). */
  private async saved(): Promise<StateFile> {
    try {
      await this.sequence.saveStateToFile(this.file);
      return await openStateFile(this.file);
    } finally {
      await unlink(this.file).catch(() => undefined);
    }
  }

  /**
   * Loads the state holding the prefix and every window, `cells` of them, into sequence 0, and
   * removes its file.
   */
  private async load(done: WindowsDone, cells: number) {
    const writer = done.writer!;
    try {
      await writer.finish();
      // llama.cpp aborts the process on a state that ends early: read its layout back first.
      const merged = await openStateFile(writer.path);
      await merged.close();
      if (merged.positions.length !== cells)
        throw new StateFormatError("the merged state lost cells");
      await this.sequence.loadStateFromFile(writer.path, { acceptRisk: true });
    } finally {
      await discardWindows(done);
    }
    if (this.sequence.nextTokenIndex !== cells)
      throw new StateFormatError(`${this.sequence.nextTokenIndex} tokens loaded of ${cells}`);
  }

  /** Erases what sequence 0 holds past its first `length` tokens. */
  private async cutBackTo(length: number): Promise<void> {
    const end = this.sequence.nextTokenIndex;
    if (end > length) await this.sequence.eraseContextTokenRanges([{ start: length, end }]);
  }
}

/**
 * The decode calls of a window of `size` tokens (at least 64): `[offset, tokens]` pairs, as few as
 * `maxTokens` allows, of about equal size, each at least 64 (the tiled kernel, kernel-split.ts).
 */
function windowCalls(size: number, maxTokens: number): [number, number][] {
  const count = Math.ceil(size / maxTokens);
  const calls: [number, number][] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    const tokens = Math.floor(size / count) + (i < size % count ? 1 : 0);
    calls.push([at, tokens]);
    at += tokens;
  }
  return calls;
}

/**
 * The key rotation of `model` when its windows can be merged: a LLaMA-architecture GGUF with plain
 * RoPE (adjacent pairs, every dimension of a head, no scaling and no `rope_freqs` factors, which
 * Llama 3.1 and later carry); `undefined` otherwise (Gemma's local and global layers, scaled or
 * partial RoPE, or tensors not read), and then no request is evaluated in windows.
 */
export function ropeShiftOf(model: Pick<LlamaModel, "fileInfo">): RopeShift | undefined {
  const metadata = model.fileInfo.metadata as unknown as Record<string, unknown>;
  const general = metadata.general as { architecture?: string } | undefined;
  if (general?.architecture !== "llama") return undefined;
  const tensors = model.fileInfo.fullTensorInfo ?? model.fileInfo.tensorInfo;
  if (!tensors || tensors.some((tensor) => tensor.name.startsWith("rope_freqs"))) return undefined;
  const llama = metadata.llama as
    | {
        embedding_length?: number;
        rope?: { freq_base?: number; dimension_count?: number; scaling?: { type?: string } };
        attention?: { head_count?: number; key_length?: number };
      }
    | undefined;
  const heads = llama?.attention?.head_count;
  const width = llama?.embedding_length;
  if (!heads || !width) return undefined;
  const headDims = llama.attention?.key_length ?? width / heads;
  const ropeDims = llama.rope?.dimension_count ?? headDims;
  const scaling = llama.rope?.scaling?.type;
  if (ropeDims !== headDims || ropeDims % 2 !== 0 || (scaling && scaling !== "none"))
    return undefined;
  return ropeShift({ base: llama.rope?.freq_base ?? 10000, ropeDims, headDims });
}
