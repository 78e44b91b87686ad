import { sharedStart, type HeldPrefix } from "../decode/index.js";
import type { Token } from "../types.js";
import type { CompletionAnswer } from "./completion-answer.js";
import type { EngineConnection } from "./http.js";

/**
 * What each slot of a llama-server holds, as far as decisiond knows: the tokens of the last call
 * on it that answered, and the length of that request's prefix (`null` while its prefix was being
 * evaluated: a prefix broken off). A slot's tokens are unknown until a call on it answers (another
 * engine object or client may have used it), while a call is out, after one that failed
 * (aborted, timed out, refused: the server may have evaluated part of it), and after a request
 * moved onto it (the server brings that request's own prompt back).
 */
export class SlotPrompts {
  /** Per slot: the tokens held, or `null` when unknown. */
  private readonly tokens: (readonly Token[] | null)[];
  /** Per slot: the prefix length of the request that made its last call. */
  private readonly prefixLength: (number | null)[];

  constructor(slots: number) {
    this.tokens = Array.from({ length: slots }, () => null);
    this.prefixLength = Array.from({ length: slots }, () => null);
  }

  /**
   * What a request's `prefix` may take over on `slot`, as `planDecode` takes it: the tokens it
   * shares with the previous request's prefix there and that prefix's length; nothing (`length`
   * undefined) when the slot's tokens are unknown or its prefix was broken off.
   */
  heldPrefix(slot: number, prefix: readonly Token[]): HeldPrefix {
    const held = this.tokens[slot];
    const length = this.prefixLength[slot];
    if (!held || length === null || length === undefined) return { shared: 0, length: undefined };
    return { shared: Math.min(sharedStart(held, prefix), length), length };
  }

  /**
   * Whether `slot` must be cut back before `target[from…]` is evaluated on it: it holds more of
   * `target` than `from` tokens, or what it holds is unknown.
   */
  mustCut(slot: number, target: readonly Token[], from: number): boolean {
    const held = this.tokens[slot];
    return !held || sharedStart(held, target) > from;
  }

  /** Marks `slot`'s tokens unknown: before a call is sent on it, or when a request moves onto it. */
  forget(slot: number): void {
    this.tokens[slot] = null;
  }

  /**
   * Records that `slot` holds `tokens`, from a request whose prefix has `prefixLength` tokens
   * (`null` while it is being evaluated): call when a call on it has answered.
   */
  called(slot: number, tokens: readonly Token[], prefixLength: number | null): void {
    this.tokens[slot] = tokens;
    this.prefixLength[slot] = prefixLength;
  }
}

/** Tokens per probe call of {@link probeSlots}. */
const PROBE_TOKENS = 16;

/** What {@link probeSlots} found. */
export interface SlotBehaviour {
  /**
   * A slot keeps its prompt while another slot takes a task, which every request's calls after
   * its first rely on (each evaluates only what it adds). A llama-server with a unified KV cache
   * and `--cache-idle-slots` (both its defaults when started without `--parallel`: four slots, one
   * cache) saves every idle slot to its host-memory prompt cache and clears it whenever another
   * slot takes a task, and a call naming the cleared slot (`id_slot`) does not load it back: under
   * concurrent requests every call would evaluate its whole prompt again. Measured:
   * docs/decisions/106.
   */
  readonly keep: boolean;
  /**
   * A prompt displaced from a slot by another task is restored when a call continues it (the
   * host-memory prompt cache, `--cache-ram`, on by default, with `--slot-prompt-similarity` not
   * 0): what lets a request give its slot up to a shorter one and go on later without evaluating
   * again what it had. Not always: the server saves a displaced prompt only when the new task
   * would keep less than half of it, and its cache drops the oldest prompts when full; a request
   * whose prompt was not kept evaluates the lost part again, in one call.
   */
  readonly restore: boolean;
}

/**
 * Finds out how a llama-server of `total` slots keeps prompts ({@link SlotBehaviour}), with calls
 * of {@link PROBE_TOKENS} tokens on slots 0 and 1. What a server does not report (no
 * `timings.cache_n`) counts as kept.
 * @throws {@link EngineCallError} when the server does not answer.
 */
export async function probeSlots(
  http: EngineConnection,
  total: number,
  vocabularySize: number,
  signal?: AbortSignal,
): Promise<SlotBehaviour> {
  // Three runs of distinct tokens, a quarter of the vocabulary apart.
  const run = (k: number, length: number) =>
    Array.from({ length }, (_, i) => (Math.floor((vocabularySize * k) / 4) + i) % vocabularySize);
  const call = (prompt: readonly Token[], slot: number) =>
    http.call<CompletionAnswer>(
      "/completion",
      { prompt, n_predict: 0, n_probs: 0, cache_prompt: true, temperature: 0, id_slot: slot },
      signal,
    );
  const kept = (answer: CompletionAnswer) => {
    const cached = answer.timings?.cache_n ?? answer.tokens_cached;
    return cached === undefined || cached >= PROBE_TOKENS;
  };
  await call(run(1, PROBE_TOKENS), 0);
  let keep = true;
  if (total > 1) {
    await call(run(2, PROBE_TOKENS), 1);
    keep = kept(await call(run(1, PROBE_TOKENS + 1), 0));
  }
  await call(run(3, PROBE_TOKENS), 0);
  const restore = kept(await call(run(1, PROBE_TOKENS + 2), 0));
  return { keep, restore };
}

/**
 * How decisiond uses a llama-server of `total` slots: all of them, or 1 when the server clears an
 * idle slot's prompt; and whether requests take turns on them, which only a server that restores
 * a displaced prompt makes worth it ({@link SlotBehaviour}). What it gives up is said to
 * `onNotice`, with the flags that change it.
 * @throws {@link EngineCallError} when the server does not answer.
 */
export async function slotUse(
  http: EngineConnection,
  total: number,
  vocabularySize: number,
  onNotice: ((message: string) => void) | undefined,
  signal?: AbortSignal,
): Promise<{ slots: number; turns: boolean }> {
  const { keep, restore } = await probeSlots(http, total, vocabularySize, signal);
  const server = `the llama-server at ${http.url}`;
  if (!keep)
    onNotice?.(
      `${server} clears a slot's prompt whenever another slot takes a task (a unified KV ` +
        `cache with --cache-idle-slots, its default without --parallel): decisiond uses 1 of ` +
        `its ${total} slots. To use them all, start it with --parallel N and no --kv-unified`,
    );
  if (!restore)
    onNotice?.(
      `${server} does not restore a prompt another task displaced from its slot (--cache-ram ` +
        `0, or --slot-prompt-similarity 0): a request keeps its slot to its end, and shorter ` +
        `requests wait for it. Start it without those flags for requests to take turns`,
    );
  return { slots: keep ? total : 1, turns: restore };
}
