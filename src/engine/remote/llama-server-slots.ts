import { sharedStart } from "../decode/index.js";
import type { Token } from "../types.js";
import type { CompletionAnswer } from "./completion-answer.js";
import type { EngineConnection } from "./http.js";

/**
 * What each slot of a llama-server holds, as far as decisiond knows: the tokens of its last call
 * on the slot and the length of the last request's prefix in them. While a call is out, and after
 * one that failed (aborted, timed out, refused), the slot holds something unknown: the server may
 * have evaluated part of it. A slot never called holds nothing.
 */
export class SlotPrompts {
  /** Per slot: the tokens held, or `null` when unknown. */
  private readonly tokens: (readonly Token[] | null)[] = [];
  private readonly prefixLength: number[] = [];

  /**
   * What a request's `prefix` may take over on `slot`: the tokens it shares with the previous
   * request's prefix there (`shared`) and that prefix's length (`length`), as `planDecode` takes
   * them. Nothing when the slot's tokens are unknown.
   */
  heldPrefix(slot: number, prefix: readonly Token[]): { shared: number; length: number } {
    const held = this.tokens[slot] ?? [];
    const length = this.tokens[slot] === null ? 0 : (this.prefixLength[slot] ?? 0);
    return { shared: Math.min(sharedStart(held, prefix), length), length };
  }

  /** Records that the request on `slot` has a prefix of `length` tokens. */
  setPrefix(slot: number, length: number): void {
    this.prefixLength[slot] = length;
  }

  /**
   * Whether `slot` must be cut back before `target[from…]` is evaluated on it: it holds more of
   * `target` than `from` tokens, or what it holds is unknown.
   */
  mustCut(slot: number, target: readonly Token[], from: number): boolean {
    const held = this.tokens[slot];
    return held === null || sharedStart(held ?? [], target) > from;
  }

  /** Marks `slot` unknown while a call is out: call before sending it. */
  calling(slot: number): void {
    this.tokens[slot] = null;
  }

  /** Records that `slot` holds `tokens`: call when a call on it has answered. */
  called(slot: number, tokens: readonly Token[]): void {
    this.tokens[slot] = tokens;
  }
}

/** Tokens per probe call of {@link slotsKeepPrompts}. */
const PROBE_TOKENS = 16;

/**
 * Whether a llama-server's slot keeps its prompt while another slot takes a task, which every
 * request's calls after its first rely on (each evaluates only what it adds). A llama-server with a
 * unified KV cache and `--cache-idle-slots` (both its defaults when started without `--parallel`:
 * four slots, one cache) saves every idle slot to its host-memory prompt cache and clears it
 * whenever another slot takes a task, and a call naming the cleared slot (`id_slot`) does not load
 * it back: under concurrent requests every call would evaluate its whole prompt again (4 requests
 * of about 340 tokens at once: 24,447 prompt tokens evaluated instead of 3,706).
 * Three calls of {@link PROBE_TOKENS} tokens: slot 0, slot 1, slot 0 again with one token more.
 * @returns `true` when the last call took the first one's tokens from slot 0, or when the server
 *   does not report what it took from its cache.
 * @throws {@link EngineCallError} when the server does not answer.
 */
export async function slotsKeepPrompts(
  http: EngineConnection,
  vocabularySize: number,
  signal?: AbortSignal,
): Promise<boolean> {
  const run = (start: number, length: number) =>
    Array.from({ length }, (_, i) => (start + i) % vocabularySize);
  const call = (prompt: readonly Token[], slot: number) =>
    http.call<CompletionAnswer>(
      "/completion",
      { prompt, n_predict: 0, n_probs: 0, cache_prompt: true, temperature: 0, id_slot: slot },
      signal,
    );
  await call(run(1000, PROBE_TOKENS), 0);
  await call(run(2000, PROBE_TOKENS), 1);
  const again = await call(run(1000, PROBE_TOKENS + 1), 0);
  const cached = again.timings?.cache_n ?? again.tokens_cached;
  return cached === undefined || cached >= PROBE_TOKENS;
}

/**
 * How many of a llama-server's `total` slots decisiond uses: all of them, or 1 when the server
 * clears an idle slot's prompt ({@link slotsKeepPrompts}), saying so to `onNotice` with what to
 * change.
 * @throws {@link EngineCallError} when the server does not answer.
 */
export async function usableSlots(
  http: EngineConnection,
  total: number,
  vocabularySize: number,
  onNotice: ((message: string) => void) | undefined,
  signal?: AbortSignal,
): Promise<number> {
  if (total <= 1 || (await slotsKeepPrompts(http, vocabularySize, signal))) return total;
  onNotice?.(
    `the llama-server at ${http.url} clears a slot's prompt whenever another slot takes a task ` +
      `(a unified KV cache with --cache-idle-slots, its default without --parallel): decisiond ` +
      `uses 1 of its ${total} slots. To use them all, start it with --no-cache-idle-slots, or ` +
      `with --parallel N and no --kv-unified`,
  );
  return 1;
}
