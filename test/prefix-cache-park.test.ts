import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LlamaContextSequence } from "node-llama-cpp";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PrefixSnapshotCache } from "../src/engine/llama/prefix-cache.js";

/**
 * What a request parks to give the model up (docs/decisions/103) is pinned in the prefix cache
 * until that request takes it back or fails: no other snapshot evicts it, so a long request is
 * never sent back to the start of its prefix by the requests it gave way to.
 */

const BYTES_PER_TOKEN = 100;

/** The part of a KV-cache sequence the cache uses: its tokens, written as 100 bytes a token. */
class FakeSequence {
  contextTokens: number[] = [];
  failWrites = false;
  async saveStateToFile(path: string): Promise<{ fileSize: number }> {
    writeFileSync(path, JSON.stringify(this.contextTokens).padEnd(this.bytes(), " "));
    if (this.failWrites) throw new Error("ENOSPC: no space left on device");
    return { fileSize: this.bytes() };
  }
  async loadStateFromFile(path: string): Promise<void> {
    this.contextTokens = JSON.parse(readFileSync(path, "utf8")) as number[];
  }
  holding(from: number, count: number): LlamaContextSequence {
    this.contextTokens = tokens(from, count);
    return this as unknown as LlamaContextSequence;
  }
  private bytes(): number {
    return this.contextTokens.length * BYTES_PER_TOKEN;
  }
}

/** `count` tokens from `from` on. */
function tokens(from: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => from + i);
}

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** A cache of `tokens` tokens' worth of bytes, in a folder of its own. */
function cacheOf(tokens: number): PrefixSnapshotCache {
  const parentDirectory = mkdtempSync(join(tmpdir(), "park-test-"));
  folders.push(parentDirectory);
  return new PrefixSnapshotCache({ maxBytes: tokens * BYTES_PER_TOKEN, parentDirectory });
}

describe("parked snapshots", () => {
  it("are not evicted by later snapshots, which evict each other instead", async () => {
    const cache = cacheOf(1_000);
    const sequence = new FakeSequence();
    const parked = await cache.park(sequence.holding(0, 600));
    expect(parked).toBeDefined();
    // Three prefixes of 300 tokens: one fits beside the parked part at a time.
    for (const from of [10_000, 20_000, 30_000]) await cache.save(sequence.holding(from, 300));
    expect(cache.bytes).toBe(900 * BYTES_PER_TOKEN);
    expect(cache.find(tokens(30_000, 300))?.shared).toBe(300);
    expect(cache.find(tokens(10_000, 300))).toBeUndefined();
    expect(await cache.load(sequence.holding(0, 0), parked!)).toHaveLength(600);
    expect(sequence.contextTokens[599]).toBe(599);
    cache.close();
  });

  it("are loaded only by their key, never found for another prefix", async () => {
    const cache = cacheOf(1_000);
    const sequence = new FakeSequence();
    const parked = await cache.park(sequence.holding(0, 200));
    expect(cache.find(tokens(0, 500))).toBeUndefined();
    expect(cache.parkedTokens(parked!)).toHaveLength(200);
    // The same tokens parked by two requests are two snapshots: neither drops the other's.
    const again = await cache.park(sequence.holding(0, 200));
    expect(again).not.toBe(parked);
    cache.delete(parked!);
    expect(cache.parkedTokens(again!)).toHaveLength(200);
    expect(cache.parkedTokens(parked!)).toBeUndefined();
    cache.close();
  });

  it("are refused when they do not fit beside the others, and then not written again", async () => {
    const cache = cacheOf(1_000);
    const sequence = new FakeSequence();
    expect(await cache.park(sequence.holding(0, 700))).toBeDefined();
    expect(await cache.park(sequence.holding(5_000, 400))).toBeUndefined();
    const written = cache.stats.saved;
    // Bytes per token are known now: a part that cannot fit is not written at all.
    expect(await cache.park(sequence.holding(9_000, 400))).toBeUndefined();
    expect(await cache.save(sequence.holding(9_000, 1_200))).toBeUndefined();
    expect(cache.stats.saved).toBe(written);
    expect(readdirSync(cache.directory)).toHaveLength(1);
    expect(cache.bytes).toBe(700 * BYTES_PER_TOKEN);
    cache.close();
  });

  it("keep a snapshot that cannot fit beside them from evicting the others", async () => {
    const cache = cacheOf(1_000);
    const sequence = new FakeSequence();
    await cache.park(sequence.holding(0, 500));
    await cache.save(sequence.holding(10_000, 300));
    // 600 tokens never fit beside the 500 parked: refused, and the 300 stay.
    expect(await cache.save(sequence.holding(20_000, 600))).toBeUndefined();
    expect(cache.find(tokens(10_000, 300))?.shared).toBe(300);
    expect(cache.bytes).toBe(800 * BYTES_PER_TOKEN);
    cache.close();
  });

  it("leave no file behind when a write fails, or when they are deleted or closed", async () => {
    const cache = cacheOf(1_000);
    const sequence = new FakeSequence();
    sequence.failWrites = true;
    await expect(cache.park(sequence.holding(0, 100))).rejects.toThrow("ENOSPC");
    await expect(cache.save(sequence.holding(0, 100))).rejects.toThrow("ENOSPC");
    expect(readdirSync(cache.directory)).toEqual([]);
    sequence.failWrites = false;
    const parked = await cache.park(sequence.holding(0, 100));
    await cache.save(sequence.holding(0, 100));
    expect(cache.size).toBe(2);
    cache.delete(parked!);
    // The file is removed in the background: wait for it, however busy the machine.
    await vi.waitFor(() => expect(readdirSync(cache.directory)).toHaveLength(1));
    await cache.park(sequence.holding(0, 300));
    cache.close();
    expect(existsSync(cache.directory)).toBe(false);
  });
});

describe("snapshots with a lead on top", () => {
  it("are found for a prefix only as far as their own prefix goes, and for a lead only after the same prefix", async () => {
    const cache = cacheOf(10_000);
    const sequence = new FakeSequence();
    // A prefix of 300 tokens with a lead of 200 on top, as a finished request leaves them.
    const key = await cache.save(sequence.holding(0, 500), 300);
    expect(cache.prefixLengthOf(key!)).toBe(300);
    // Another prefix that runs on into the lead's tokens takes over only the prefix's 300.
    expect(cache.find(tokens(0, 450))?.shared).toBe(300);
    expect(cache.find(tokens(0, 250))?.shared).toBe(250);
    // A lead after the same prefix: as far as it starts like the one held.
    expect(cache.findLead(tokens(0, 300), tokens(300, 200))).toEqual({ key, shared: 200 });
    expect(cache.findLead(tokens(0, 300), [...tokens(300, 120), 7])).toEqual({ key, shared: 120 });
    expect(cache.findLead(tokens(0, 300), tokens(300, 900))).toEqual({ key, shared: 200 });
    // Not after a prefix that ends elsewhere, or differs, or with nothing in common.
    expect(cache.findLead(tokens(0, 400), tokens(400, 100))).toBeUndefined();
    expect(cache.findLead([1, ...tokens(1, 299)].reverse(), tokens(300, 200))).toBeUndefined();
    expect(cache.findLead(tokens(0, 300), [7, 8, 9])).toBeUndefined();
    // The same tokens saved as a whole prefix are another snapshot, found for a prefix first
    // when smaller, never for a lead.
    await cache.save(sequence.holding(0, 500));
    await cache.save(sequence.holding(0, 300));
    expect(cache.size).toBe(3);
    expect(cache.find(tokens(0, 500))?.shared).toBe(500);
    expect(cache.prefixLengthOf(cache.find(tokens(0, 300))!.key)).toBe(300);
    expect(cache.find(tokens(0, 300))?.key).not.toBe(key);
    expect(cache.findLead(tokens(0, 300), tokens(300, 200))?.key).toBe(key);
    expect(await cache.load(sequence.holding(0, 0), key!)).toHaveLength(500);
    // Another lead after the same prefix (another question of the same state) replaces it.
    sequence.contextTokens = [...tokens(0, 300), ...tokens(9_000, 100)];
    const other = await cache.save(sequence as unknown as LlamaContextSequence, 300);
    expect(cache.findLead(tokens(0, 300), tokens(300, 200))).toBeUndefined();
    expect(cache.findLead(tokens(0, 300), tokens(9_000, 100))).toEqual({ key: other, shared: 100 });
    expect(cache.size).toBe(3);
    cache.close();
  });
});
