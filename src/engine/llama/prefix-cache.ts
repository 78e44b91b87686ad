import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LRUCache } from "lru-cache";
import type { LlamaContextSequence } from "node-llama-cpp";
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

/** One cached prefix: its tokens and the snapshot file of the KV cache that evaluated them. */
interface Snapshot {
  readonly tokens: readonly Token[];
  readonly path: string;
  readonly bytes: number;
  /** Loaded only by its key, never found for another prefix ({@link PrefixSnapshotCache.save}). */
  readonly private: boolean;
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
 */
export class PrefixSnapshotCache {
  readonly directory: string;
  private readonly entries: LRUCache<string, Snapshot>;
  private counter = 0;
  private readonly removeOnExit = (): void =>
    rmSync(this.directory, { recursive: true, force: true });
  /** Snapshots written, loaded and dropped (evicted, deleted or cleared) since creation. */
  readonly stats = { saved: 0, loaded: 0, dropped: 0 };

  constructor(options: PrefixSnapshotCacheOptions) {
    if (!(options.maxBytes > 0)) throw new RangeError("maxBytes must be positive");
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

  /** Number of snapshots held. */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes of snapshots held. */
  get bytes(): number {
    return this.entries.calculatedSize;
  }

  /**
   * The snapshot sharing the longest token prefix with `tokens` (at least `minShared` tokens), or
   * `undefined`. Does not change recency; {@link load} does.
   */
  find(tokens: readonly Token[], minShared = 1): SnapshotMatch | undefined {
    let best: SnapshotMatch | undefined;
    for (const [key, snapshot] of this.entries.entries()) {
      if (snapshot.private) continue;
      const shared = commonPrefixLength(snapshot.tokens, tokens);
      if (shared >= minShared && shared > (best?.shared ?? 0)) best = { key, shared };
    }
    return best;
  }

  /**
   * Writes a snapshot of `sequence` (all its tokens), unless one of them is held already. A
   * snapshot larger than the whole budget is not kept. A `private` one is never returned by
   * {@link find}, only loaded by its key: a sequence that holds more than a prefix (a request's
   * prefix and the lead of its branches).
   * @returns the snapshot's key, or `undefined` when the sequence is empty or the snapshot was not
   *   kept
   */
  async save(
    sequence: LlamaContextSequence,
    options: { readonly private?: boolean } = {},
  ): Promise<string | undefined> {
    const tokens = [...sequence.contextTokens] as Token[];
    if (tokens.length === 0) return undefined;
    const hidden = options.private ?? false;
    const key = (hidden ? "private:" : "") + keyOf(tokens);
    if (this.entries.has(key)) return key;
    const path = join(this.directory, `${++this.counter}.kv`);
    const { fileSize } = await sequence.saveStateToFile(path);
    this.stats.saved++;
    this.entries.set(key, { tokens, path, bytes: fileSize, private: hidden });
    if (this.entries.has(key)) return key;
    await unlink(path).catch(() => undefined);
    return undefined;
  }

  /**
   * Loads a snapshot into `sequence`, replacing what it held, and marks it recently used.
   * @returns the tokens the sequence now holds, or `undefined` when the snapshot is gone.
   */
  async load(sequence: LlamaContextSequence, key: string): Promise<readonly Token[] | undefined> {
    const snapshot = this.entries.get(key);
    if (!snapshot) return undefined;
    await sequence.loadStateFromFile(snapshot.path, { acceptRisk: true });
    this.stats.loaded++;
    return snapshot.tokens;
  }

  /** Drops one snapshot. */
  delete(key: string): void {
    this.entries.delete(key);
  }

  /** Drops every snapshot and removes the folder. */
  close(): void {
    this.entries.clear();
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

function keyOf(tokens: readonly Token[]): string {
  return createHash("sha256").update(Uint32Array.from(tokens)).digest("hex");
}

/** Length of the longest common prefix of two token arrays. */
export function commonPrefixLength(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
