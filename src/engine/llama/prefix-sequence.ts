import type { LlamaContextSequence, Token as LlamaToken } from "node-llama-cpp";
import {
  FA_TILE_ROWS,
  prefixCallsFrom,
  prefixTiledEnd,
  windowsAgree,
  type DecodePlan,
  type HeldPrefix,
} from "../decode/index.js";
import { CallPace, type CallHistory, type CallLimits } from "./call-pace.js";
import { commonPrefixLength, type PrefixSnapshotCache } from "./prefix-cache.js";
import type { Token } from "../types.js";

/**
 * Sequence 0 of the in-process engine and the prefix it holds: what it shares with a request's
 * prefix, snapshots of earlier prefixes in and out of the {@link PrefixSnapshotCache}, and the
 * prefix's evaluation one decode call at a time, which may stop between calls and park what it
 * has evaluated (docs/decisions/103).
 */

/**
 * A snapshot is loaded only when it holds at least this many more prefix tokens than sequence 0
 * already shares with the request: loading replaces the whole sequence, so a gain of a few tokens
 * is not worth a copy of all of them.
 */
const MIN_SNAPSHOT_GAIN = 32;

/** What {@link PrefixSequence.evaluate} did. */
export interface PrefixTurn {
  /** Prefix tokens taken over from what the sequence held. */
  readonly cached: number;
  /** Prefix tokens evaluated. */
  readonly evaluated: number;
  /**
   * The prefix cache's key of the part evaluated when it stopped before the end of the prefix,
   * parked there; `undefined` when it went to the end.
   */
  readonly parked: string | undefined;
}

/**
 * A request's lead as its plan evaluates it: its tokens, how many of the first are tiled, and the
 * windows it is evaluated in (decode/lead-windows.ts), if any.
 */
export interface HeldLead {
  readonly tokens: readonly Token[];
  readonly tiled: number;
  readonly windows?: readonly number[] | undefined;
}

export class PrefixSequence {
  /**
   * Length of the prefix whose call map (kernel-split.ts) the sequence's tokens were evaluated by:
   * the number of tokens it holds, or `undefined` when a decode call failed part way and they are
   * not known to follow one map (then none is taken over or saved). A prefix of at least 64 tokens
   * is tiled whole, so the part of it held after each of its calls counts as a prefix of that
   * length evaluated by its own map.
   */
  private mapLength: number | undefined = 0;

  /**
   * Tokens the sequence holds on top of its `mapLength` prefix from the start of a request's lead,
   * evaluated in whole tiled calls ({@link keepLead}); 0 when it holds the prefix alone.
   */
  private leadLength = 0;

  /** The windows the lead held was evaluated in (`leadWindows`); `undefined`: none. */
  private leadWindows: readonly number[] | undefined;

  /**
   * The key of what {@link park} parked from {@link evaluate} while the sequence holds that and
   * nothing else: as long as it is parked, it is not written to the cache a second time.
   */
  private heldPart: string | undefined;

  /**
   * @param sequence - the KV-cache sequence prefixes are evaluated into
   * @param limits - what bounds one decode call (call-pace.ts)
   * @param history - the engine's last timed decode call, which sizes a prefix's first call
   * @param cache - snapshots of earlier prefixes; `undefined` when turned off
   */
  constructor(
    readonly sequence: LlamaContextSequence,
    private readonly limits: CallLimits,
    private readonly history: CallHistory,
    private readonly cache: PrefixSnapshotCache | undefined,
  ) {}

  /**
   * Puts the best available start of `prefix` into the sequence: what it already shares with it,
   * the part of it the request parked in an earlier turn, or a snapshot from the prefix cache
   * sharing more. Before the sequence drops tokens it holds, they are saved to the cache.
   * @param parked - the key of the part of `prefix` this request parked ({@link evaluate}), if any
   * @returns what the sequence now holds of `prefix`, as `planDecode` takes it; never throws for
   *   the cache (a snapshot that cannot be written or read back is done without)
   */
  async restore(prefix: readonly Token[], parked?: string): Promise<HeldPrefix> {
    const sequence = this.sequence;
    // What the sequence shares with `prefix` within its own prefix (not into a lead on top).
    const shared = Math.min(
      commonPrefixLength(sequence.contextTokens, prefix),
      this.mapLength ?? 0,
    );
    const held = (count: number): HeldPrefix => ({ shared: count, length: this.mapLength });
    const cache = this.cache;
    if (!cache) return held(shared);
    // Saved before its prefix is cut; a lead alone on top is not written for it (the write-behind
    // wrote it when there was time).
    if (this.mapLength !== undefined && shared < this.mapLength) await this.saveSnapshot();
    this.heldPart = undefined;
    const own = parked === undefined ? undefined : cache.parkedTokens(parked);
    const ownShared = own ? commonPrefixLength(own, prefix) : 0;
    const found = cache.find(prefix, Math.max(shared, ownShared) + MIN_SNAPSHOT_GAIN);
    const key = found?.key ?? (ownShared >= shared + MIN_SNAPSHOT_GAIN ? parked : undefined);
    // A snapshot holds a whole prefix evaluated by its own call map, and maybe a lead on top.
    const prefixLength = key === undefined ? undefined : cache.prefixLengthOf(key);
    if (key === undefined || prefixLength === undefined) return held(shared);
    const tokens = await this.load(key, { save: false, drop: true });
    if (tokens === undefined) return held(shared);
    if (tokens === null) return held(0);
    this.mapLength = prefixLength;
    this.leadLength = tokens.length - prefixLength;
    this.leadWindows = cache.windowsOf(key);
    return held(Math.min(commonPrefixLength(tokens, prefix), prefixLength));
  }

  /**
   * Replaces what the sequence holds with the snapshot `key` of the prefix cache.
   * @param options - `save`: what the sequence held is saved to the cache first ({@link
   *   saveSnapshot}); `drop`: a snapshot that cannot be read back is deleted from the cache (a
   *   cached one; a parked one is its request's)
   * @returns the snapshot's tokens (the caller sets what of them is prefix and lead); `undefined`
   *   when it was gone (the sequence is as it was); `null` when it could not be read back (the
   *   sequence holds nothing usable, {@link forget}); never throws
   */
  private async load(
    key: string,
    options: { readonly save: boolean; readonly drop: boolean },
  ): Promise<readonly Token[] | undefined | null> {
    const cache = this.cache!;
    if (options.save) await this.saveSnapshot();
    this.heldPart = undefined;
    try {
      return await cache.load(this.sequence, key);
    } catch {
      if (options.drop) cache.delete(key);
      this.forget();
      return null;
    }
  }

  /**
   * Puts `prefix` and as much of `lead` on top as an earlier request left in the sequence or in a
   * snapshot of the prefix cache ({@link keepLead}: a lead it finished, or the part of one it was
   * cancelled inside), so that the request evaluates only the rest. Lead tokens were evaluated in
   * tiled calls, each row the same whatever else its call held, so any start of them may be taken
   * over as long as the rest of the lead is none or at least one tiled call (kernel-split.ts).
   * Tokens held past what is taken over are erased; what the sequence held is saved to the cache
   * first when a snapshot replaces it, as {@link restore} does.
   * @returns the lead tokens the sequence holds now on top of `prefix`, at least 64 (0: none, and
   *   then the sequence is as it was); never throws for the cache
   */
  async takeOverLead(prefix: readonly Token[], lead: HeldLead): Promise<number> {
    let taken = this.leadHeldNow(prefix, lead);
    const found = this.cache?.findLead(prefix, lead.tokens, lead.windows);
    const fromCache = found ? usableLead(found.shared, lead) : 0;
    if (found && fromCache >= FA_TILE_ROWS && fromCache >= taken + MIN_SNAPSHOT_GAIN) {
      const windows = this.cache!.windowsOf(found.key);
      const tokens = await this.load(found.key, { save: true, drop: true });
      if (!tokens) return 0;
      this.mapLength = prefix.length;
      this.leadLength = tokens.length - prefix.length;
      this.leadWindows = windows;
      taken = fromCache;
    }
    // Less than a tiled call's worth is not worth dropping the rest of the lead held for.
    if (taken < FA_TILE_ROWS) return 0;
    const end = prefix.length + taken;
    if (this.sequence.nextTokenIndex > end)
      await this.sequence.eraseContextTokenRanges([
        { start: end, end: this.sequence.nextTokenIndex },
      ]);
    this.leadLength = taken;
    this.leadWindows = lead.windows;
    return taken;
  }

  /**
   * How many tokens of `lead` {@link takeOverLead} would take over now, from the sequence or the
   * cache. An estimate for ranking (the sequence may change first).
   */
  leadHeld(prefix: readonly Token[], lead: HeldLead): number {
    const found = this.cache?.findLead(prefix, lead.tokens, lead.windows);
    const fromCache = found ? usableLead(found.shared, lead) : 0;
    const held = Math.max(this.leadHeldNow(prefix, lead), fromCache);
    return held >= FA_TILE_ROWS ? held : 0;
  }

  /**
   * Lead tokens the sequence holds now on top of exactly `prefix` that may be taken over: as far
   * as they are `lead`'s and were evaluated in windows that agree with its own.
   */
  private leadHeldNow(prefix: readonly Token[], lead: HeldLead): number {
    const tokens = this.sequence.contextTokens;
    if (this.mapLength !== prefix.length || this.leadLength === 0) return 0;
    if (commonPrefixLength(tokens, prefix) < prefix.length) return 0;
    const held = tokens.slice(prefix.length, prefix.length + this.leadLength);
    const shared = commonPrefixLength(held, lead.tokens);
    return usableLead(Math.min(shared, windowsAgree(this.leadWindows, lead.windows)), lead);
  }

  /**
   * Notes that the sequence holds the prefix it last evaluated or took over and, on top,
   * `leadLength` tokens of a request's lead evaluated in whole tiled calls (0 for none): the
   * lead of a request that finished, or the part of it a cancelled one evaluated, kept for the
   * next request ({@link takeOverLead}); {@link saveSnapshot} saves them together.
   * @param windows - the windows that lead was evaluated in (decode/lead-windows.ts), if any
   */
  keepLead(leadLength: number, windows?: readonly number[]): void {
    const { mapLength } = this;
    const holds =
      mapLength !== undefined && mapLength + leadLength === this.sequence.nextTokenIndex;
    this.leadLength = holds ? leadLength : 0;
    this.leadWindows = this.leadLength > 0 ? windows : undefined;
  }

  /** Forgets what the sequence holds after a failed load: nothing of it is taken over or saved. */
  private forget(): void {
    this.mapLength = undefined;
    this.leadLength = 0;
    this.leadWindows = undefined;
  }

  /**
   * How many tokens of `prefix` a turn would take over now: what the sequence shares with it, or
   * the best snapshot in the cache. An estimate for ranking (the sequence may change first).
   */
  sharedNow(prefix: readonly Token[]): number {
    const held = commonPrefixLength(this.sequence.contextTokens, prefix);
    return Math.max(held, this.cache?.find(prefix, held + 1)?.shared ?? 0);
  }

  /**
   * Evaluates `prefix` into the sequence from the plan's resume point, one decode call at a time,
   * each of at most what its {@link CallPace} allows (the first as the engine's last timed call
   * says, call-pace.ts; then what fits in the call budget at the last call's rate). Between
   * calls, when `giveWay(tokens of the prefix left)` says a request with less work waits, it
   * parks the part evaluated so far in the prefix cache ({@link park}) and stops; the request's
   * next turn takes that part over ({@link restore} with its key). Where it cannot park, it goes
   * on to the end.
   * Every call of a prefix of at least 64 tokens is tiled (kernel-split.ts), so the part is the
   * same to the bit as a whole prefix of its length, however the calls were cut.
   * @param contended - whether the request gave the model up before: then the calls take at most
   *   `CONTENDED_CALL_TOKENS` tokens (call-pace.ts)
   * @param signal - checked between decode calls; an aborted prefix leaves the calls made so far
   *   in the sequence, which the next request may take over
   * @throws the signal's reason when aborted
   */
  async evaluate(
    prefix: readonly Token[],
    plan: DecodePlan,
    giveWay: (prefixLeft: number) => boolean,
    contended: boolean,
    signal?: AbortSignal,
  ): Promise<PrefixTurn> {
    const { resume } = plan.prefix;
    await this.sequence.adaptStateToTokens(prefix.slice(0, resume) as LlamaToken[], false);
    this.leadLength = 0;
    const cached = this.sequence.nextTokenIndex;
    let at = cached;
    const tiled = prefixTiledEnd(prefix.length) === prefix.length;
    // A part that could not be parked (no room) is not written again at every call.
    let mayPark = tiled;
    const pace = new CallPace(this.limits, contended, this.history, cached);
    // From what the sequence kept (the plan's resume point, or what else it kept), call by call.
    for (let index = 0; at < prefix.length; index++) {
      if (index > 0 && mayPark && giveWay(prefix.length - at)) {
        const parked = await this.park();
        this.heldPart = parked;
        if (parked) return { cached, evaluated: at - cached, parked };
        mayPark = false;
      }
      signal?.throwIfAborted();
      this.mapLength = undefined;
      const size = prefixCallsFrom(at, prefix.length, pace.tokens)[0]!;
      const tokens = prefix.slice(at, at + size) as LlamaToken[];
      await pace.time(size, at + size, () =>
        this.sequence.evaluateWithoutGeneratingNewTokens(tokens),
      );
      at += size;
      if (tiled) this.mapLength = at;
    }
    this.mapLength = prefix.length;
    return { cached, evaluated: at - cached, parked: undefined };
  }

  /**
   * Saves the sequence's tokens to the prefix cache (nothing if already there): a prefix after a
   * request, or what a request parks to give the model up (the prefix, or the part of it evaluated
   * so far) and take over in its next turn. Never throws.
   * @returns the snapshot's key, `undefined` when none was kept (no cache, or one over its budget)
   */
  async saveSnapshot(): Promise<string | undefined> {
    const parked = this.heldPart !== undefined && this.cache?.parkedTokens(this.heldPart);
    if (!this.cache || !this.isWhole() || parked) return undefined;
    try {
      const windows = this.leadLength > 0 ? this.leadWindows : undefined;
      return await this.cache.save(this.sequence, this.mapLength, windows);
    } catch {
      // A snapshot that cannot be written is not cached; the next request works without it.
      return undefined;
    }
  }

  /**
   * Parks what the sequence holds now in the prefix cache, pinned for this request
   * ({@link PrefixSnapshotCache.park}): the part of a prefix evaluated so far, or a prefix and the
   * lead of its branches on top, or the lead (or part of it) and the part of a branch evaluated
   * (these went through their own call maps, so no other prefix may take them over).
   * @returns its key, `undefined` when it was not kept (no cache, no room beside the other parked
   *   snapshots, a failed write): then the request goes on; never throws
   */
  async park(): Promise<string | undefined> {
    if (!this.cache || this.mapLength === undefined) return undefined;
    try {
      return await this.cache.park(this.sequence);
    } catch {
      return undefined;
    }
  }

  /**
   * Loads what {@link park} parked after the prefix: a prefix of `prefixLength` tokens with a
   * lead, or part of one, on top, or the lead and part of a branch. What the sequence held is
   * saved to the cache first, as {@link restore} does.
   * @returns whether the sequence holds them now; never throws (a snapshot that cannot be read
   *   back leaves the sequence to be evaluated from scratch)
   */
  async takeBackWithLead(key: string, prefixLength: number): Promise<boolean> {
    if (!this.cache || !(await this.load(key, { save: true, drop: false }))) return false;
    this.mapLength = prefixLength;
    this.leadLength = 0;
    return true;
  }

  /**
   * Whether the sequence holds tokens evaluated by one prefix's call map, all of them, and maybe
   * lead tokens on top ({@link keepLead}).
   */
  private isWhole(): boolean {
    return (
      this.mapLength !== undefined &&
      this.mapLength + this.leadLength === this.sequence.contextTokens.length
    );
  }
}

/**
 * Of `shared` tiled tokens held that a lead starts with (evaluated in windows that agree with its
 * own), how many it may take over: as many as its own first `tiled` tokens (the rows it too
 * evaluates tiled), or fewer, so that the tiled rest is none or at least one tiled call
 * (kernel-split.ts); for a lead in windows, all its windows or nothing (a window is evaluated
 * whole, windowed-lead.ts).
 */
function usableLead(shared: number, lead: HeldLead): number {
  const { tiled, windows } = lead;
  let taken = Math.min(shared, tiled);
  const rest = tiled - taken;
  if (rest > 0 && rest < FA_TILE_ROWS) taken = Math.max(0, tiled - FA_TILE_ROWS);
  return windows && taken < windows.at(-1)! ? 0 : taken;
}
