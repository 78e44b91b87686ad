import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LRUCache } from "lru-cache";
import type { LlamaContextSequence } from "node-llama-cpp";
import { windowsAgree } from "../decode/index.js";
import type { Token } from "../types.js";

/** Options of a {@link PrefixSnapshotCache}. */
export interface PrefixSnapshotCacheOptions {
  /** Most bytes of snapshots kept; the least recently used are dropped beyond it. */
  readonly maxBytes: number;
  /**
   * Folder the snapshot folder is created in. Default `/dev/shm` where it exists (a RAM-backed
   * tmpfs on Linux, so the bound is a bound on memory), otherwise the OS temp folder.
   */
  readonly parentDirectory?: string;
}

/**
 * One cached prefix: its tokens and the snapshot file of the KV cache that evaluated them. The
 * first `prefixLength` tokens are a prefix cut by its own call map; the rest, when there are more,
 * the lead of a request's branches on top of it (kernel-split.ts), which only a request with the
 * same prefix and lead may take over.
 */
interface Snapshot {
  readonly tokens: readonly Token[];
  readonly prefixLength: number;
  /** The windows its lead was evaluated in (decode/lead-windows.ts); `undefined`: none. */
  readonly windows?: readonly number[] | undefined;
  readonly path: string;
  readonly bytes: number;
}

/** What {@link PrefixSnapshotCache.find} returns: the best snapshot and how many tokens it shares. */
export interface SnapshotMatch {
  readonly key: string;
  readonly shared: number;
}

/**
 * An LRU cache of evaluated prefixes, bounded by bytes. Each entry is a snapshot of one KV-cache
 * sequence (llama.cpp's `llama_state_seq_get_data`, through node-llama-cpp's
 * `LlamaContextSequence.saveStateToFile`), holding only the cells of its tokens: about
 * 2 · n_layer · n_embd_kv · 2 bytes per token (f16 K and V), ~23 KB per token for SmolLM2-135M.
 * Loading one back (`loadStateFromFile`) replaces a prefill of those tokens with a copy.
 *
 * Snapshots are files in a private folder (on `/dev/shm` by default, i.e. memory) removed when
 * the cache is closed or the process exits. They are read back only by the process that wrote
 * them, with the same model: llama.cpp does not check that a state matches its model.
 *
 * Besides the LRU it holds **parked** snapshots ({@link park}): what a request that gave the model
 * up needs to go on (docs/decisions/103). They count against the same byte budget but are never
 * evicted, found for another prefix or shared with another request; only their own key loads or
 * deletes them.
 */
export class PrefixSnapshotCache {
  readonly directory: string;
  private readonly entries: LRUCache<string, Snapshot>;
  /** Parked snapshots by key, outside the LRU. */
  private readonly parked = new Map<string, Snapshot>();
  private parkedBytes = 0;
  /** Bytes per token of the last snapshot written: a snapshot that cannot fit is not written. */
  private bytesPerToken: number | undefined;
  private readonly maxBytes: number;
  private counter = 0;
  private readonly removeOnExit = (): void =>
    rmSync(this.directory, { recursive: true, force: true });
  /** Snapshots written, loaded and dropped (evicted, deleted or cleared) since creation. */
  readonly stats = { saved: 0, loaded: 0, dropped: 0 };

  constructor(options: PrefixSnapshotCacheOptions) {
    if (!(options.maxBytes > 0)) throw new RangeError("maxBytes must be positive");
    this.maxBytes = options.maxBytes;
    const parent = options.parentDirectory ?? (existsSync("/dev/shm") ? "/dev/shm" : tmpdir());
    removeOrphanedFolders(parent);
    this.directory = mkdtempSync(join(parent, `${FOLDER_PREFIX}${process.pid}-`));
    process.once("exit", this.removeOnExit);
    this.entries = new LRUCache<string, Snapshot>({
      maxSize: options.maxBytes,
      sizeCalculation: (snapshot) => Math.max(1, snapshot.bytes),
      dispose: (snapshot) => {
        this.stats.dropped++;
        void unlink(snapshot.path).catch(() => undefined);
      },
    });
  }

  /** Number of snapshots held, parked ones included. */
  get size(): number {
    return this.entries.size + this.parked.size;
  }

  /** Bytes of snapshots held, parked ones included: at most the budget. */
  get bytes(): number {
    return this.entries.calculatedSize + this.parkedBytes;
  }

  /**
   * The snapshot sharing the longest start with the prefix `tokens` (at least `minShared` tokens,
   * counted within its own prefix, not its lead), the smaller of two sharing as many, or
   * `undefined`. Does not change recency; {@link load} does.
   */
  find(tokens: readonly Token[], minShared = 1): SnapshotMatch | undefined {
    let best: (SnapshotMatch & { size: number }) | undefined;
    for (const [key, snapshot] of this.entries.entries()) {
      const shared = Math.min(commonPrefixLength(snapshot.tokens, tokens), snapshot.prefixLength);
      const size = snapshot.tokens.length;
      if (shared < minShared || shared < (best?.shared ?? 0)) continue;
      if (!best || shared > best.shared || size < best.size) best = { key, shared, size };
    }
    return best && { key: best.key, shared: best.shared };
  }

  /**
   * The snapshot of exactly `prefix` (ending where it ends) whose lead on top shares the most
   * tokens with `lead` from its start, the smaller of two sharing as many, or `undefined` when
   * none shares any. Does not change recency.
   * @param windows - the windows `lead` is evaluated in: a lead evaluated in others is shared only
   *   as far as their cells agree (`windowsAgree`)
   * @returns its key and the lead tokens it shares
   */
  findLead(
    prefix: readonly Token[],
    lead: readonly Token[],
    windows?: readonly number[],
  ): { key: string; shared: number } | undefined {
    let best: { key: string; shared: number; size: number } | undefined;
    for (const [key, snapshot] of this.entries.entries()) {
      const { tokens, prefixLength } = snapshot;
      if (prefixLength !== prefix.length || tokens.length === prefixLength) continue;
      if (commonPrefixLength(tokens, prefix) < prefixLength) continue;
      const shared = Math.min(
        commonPrefixLength(tokens.slice(prefixLength), lead),
        windowsAgree(snapshot.windows, windows),
      );
      if (shared === 0 || shared < (best?.shared ?? 0)) continue;
      if (!best || shared > best.shared || tokens.length < best.size)
        best = { key, shared, size: tokens.length };
    }
    return best && { key: best.key, shared: best.shared };
  }

  /** How many of a snapshot's tokens are its prefix (the rest a lead); `undefined` when gone. */
  prefixLengthOf(key: string): number | undefined {
    return (this.parked.get(key) ?? this.entries.peek(key))?.prefixLength;
  }

  /** The windows a snapshot's lead was evaluated in; `undefined` when none, or gone. */
  windowsOf(key: string): readonly number[] | undefined {
    return (this.parked.get(key) ?? this.entries.peek(key))?.windows;
  }

  /**
   * Writes a snapshot of `sequence` (all its tokens) into the LRU, unless one of them is held
   * already. A snapshot that does not fit beside the parked ones is not kept; one with a lead
   * replaces any other with a lead after the same prefix.
   * @param prefixLength - how many of the tokens are a prefix (kernel-split.ts); the rest are a
   *   lead on top. Default all of them.
   * @param windows - the windows the lead was evaluated in, if any (decode/lead-windows.ts)
   * @returns the snapshot's key, or `undefined` when the sequence is empty or the snapshot was not
   *   kept
   * @throws what writing the file throws (nothing is left behind)
   */
  async save(
    sequence: LlamaContextSequence,
    prefixLength?: number,
    windows?: readonly number[],
  ): Promise<string | undefined> {
    const tokens = [...sequence.contextTokens] as Token[];
    if (tokens.length === 0) return undefined;
    const key = keyOf(tokens, prefixLength, windows);
    if (this.entries.has(key)) return key;
    const written = await this.writeBesideParked(sequence, tokens, prefixLength);
    if (!written) return undefined;
    const snapshot = windows ? { ...written, windows } : written;
    // One lead kept per prefix: the last (several questions asked of one state would otherwise
    // fill the cache with copies of it).
    if (snapshot.prefixLength < tokens.length) {
      const others = [...this.entries.entries()].filter(
        ([, { tokens: held, prefixLength: length }]) =>
          length === snapshot.prefixLength &&
          held.length > length &&
          commonPrefixLength(held, tokens) >= length,
      );
      for (const [other] of others) this.entries.delete(other);
    }
    this.entries.set(key, snapshot);
    this.fitBudget();
    return key;
  }

  /**
   * Parks a snapshot of `sequence` for the request that holds it: pinned until {@link delete}d,
   * loaded only by the key returned, and counted against the budget, the LRU's least recently used
   * snapshots giving way to it. A snapshot that cannot fit beside the other parked ones is not
   * written (or, once written, not kept).
   * @returns its key, or `undefined` when the sequence is empty or it was not kept
   * @throws what writing the file throws (nothing is left behind)
   */
  async park(sequence: LlamaContextSequence): Promise<string | undefined> {
    const tokens = [...sequence.contextTokens] as Token[];
    if (tokens.length === 0) return undefined;
    const snapshot = await this.writeBesideParked(sequence, tokens);
    if (!snapshot) return undefined;
    const key = `parked:${this.counter}`;
    this.parked.set(key, snapshot);
    this.parkedBytes += snapshot.bytes;
    this.fitBudget();
    return key;
  }

  /** The tokens of a parked snapshot, or `undefined` when there is none by that key. */
  parkedTokens(key: string): readonly Token[] | undefined {
    return this.parked.get(key)?.tokens;
  }

  /**
   * Loads a snapshot (of the LRU or parked) into `sequence`, replacing what it held, and marks an
   * LRU one recently used.
   * @returns the tokens the sequence now holds, or `undefined` when the snapshot is gone.
   * @throws what reading the file throws
   */
  async load(sequence: LlamaContextSequence, key: string): Promise<readonly Token[] | undefined> {
    const snapshot = this.parked.get(key) ?? this.entries.get(key);
    if (!snapshot) return undefined;
    await sequence.loadStateFromFile(snapshot.path, { acceptRisk: true });
    this.stats.loaded++;
    return snapshot.tokens;
  }

  /** Drops one snapshot, parked or not. */
  delete(key: string): void {
    const parked = this.parked.get(key);
    if (!parked) {
      this.entries.delete(key);
      return;
    }
    this.parked.delete(key);
    this.parkedBytes -= parked.bytes;
    this.stats.dropped++;
    void unlink(parked.path).catch(() => undefined);
  }

  /**
   * Writes the snapshot file of `tokens` if it fits beside the parked snapshots: not at all when
   * the bytes per token of the last write say it cannot, and removed again when it turns out not
   * to (parked ones may also have come meanwhile). A file part-written by a failure is removed.
   * @returns the snapshot, or `undefined` when it does not fit
   * @throws what writing the file throws
   */
  private async writeBesideParked(
    sequence: LlamaContextSequence,
    tokens: Token[],
    prefixLength = tokens.length,
  ): Promise<Snapshot | undefined> {
    const room = () => this.maxBytes - this.parkedBytes;
    if ((this.bytesPerToken ?? 0) * tokens.length > room()) return undefined;
    const path = join(this.directory, `${++this.counter}.kv`);
    let bytes: number;
    try {
      ({ fileSize: bytes } = await sequence.saveStateToFile(path));
    } catch (error) {
      await unlink(path).catch(() => undefined);
      throw error;
    }
    this.stats.saved++;
    this.bytesPerToken = bytes / tokens.length;
    if (bytes <= room()) return { tokens, prefixLength, path, bytes };
    await unlink(path).catch(() => undefined);
    return undefined;
  }

  /** Evicts the LRU's least recently used snapshots until they fit beside the parked ones. */
  private fitBudget(): void {
    while (this.entries.size > 0 && this.bytes > this.maxBytes) this.entries.pop();
  }

  /** Drops every snapshot and removes the folder. */
  close(): void {
    this.entries.clear();
    for (const key of [...this.parked.keys()]) this.delete(key);
    process.off("exit", this.removeOnExit);
    this.removeOnExit();
  }
}

/** Snapshot folders are named `decisiond-prefixes-<pid>-<random>`. */
const FOLDER_PREFIX = "decisiond-prefixes-";

/**
 * Removes the snapshot folders of processes that no longer run (killed before they could clean
 * up, e.g. by SIGKILL), so their memory on /dev/shm is given back. A folder whose pid belongs to a
 * running process is left alone, even if that process is not decisiond.
 */
export function removeOrphanedFolders(parent: string): void {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(/^decisiond-prefixes-(\d+)-/.exec(name)?.[1]);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || isRunning(pid)) continue;
    rmSync(join(parent, name), { recursive: true, force: true });
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * A snapshot's key: its tokens' hash, where its prefix ends when a lead is on top, and the
 * windows the lead was evaluated in.
 */
function keyOf(
  tokens: readonly Token[],
  prefixLength = tokens.length,
  windows?: readonly number[],
): string {
  const hash = createHash("sha256").update(Uint32Array.from(tokens)).digest("hex");
  const key = prefixLength === tokens.length ? hash : `${hash}:${prefixLength}`;
  return windows ? `${key}:${windows.join(",")}` : key;
}

/** Length of the longest common prefix of two token arrays. */
export function commonPrefixLength(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
