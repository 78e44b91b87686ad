import { setTimeout as sleep } from "node:timers/promises";
import { sharedStart, type HeldPrefix } from "../decode/index.js";
import { EngineUnavailableError, type Token } from "../types.js";
import { completionBody, type CompletionAnswer, type LoraScales } from "./completion-answer.js";
import { EngineRequestError, type EngineConnection } from "./http.js";
import { SlotPool, type SlotTurn } from "./slot-pool.js";

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

  /** Marks every slot's tokens unknown (another client's calls named them). */
  forgetAll(): void {
    this.tokens.fill(null);
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

/** A llama-server as the slot probe calls it. */
export interface SlotServer {
  readonly http: EngineConnection;
  /** Its slots, `/props` `total_slots`. */
  readonly total: number;
  readonly vocabularySize: number;
  /**
   * The adapter scales every call of the engine names: the probe's calls name them too, since a
   * call with other scales than a slot's last makes the server clear that slot's prompt.
   */
  readonly lora: LoraScales | undefined;
}

/**
 * Finds out how a llama-server keeps prompts ({@link SlotBehaviour}), with calls of
 * {@link PROBE_TOKENS} tokens on slots 0 and 1. What a server does not report (no
 * `timings.cache_n`) counts as kept.
 * @throws {@link EngineCallError} when the server does not answer.
 */
export async function probeSlots(server: SlotServer, signal?: AbortSignal): Promise<SlotBehaviour> {
  const { http, total, vocabularySize, lora } = server;
  // Three runs of distinct tokens, a quarter of the vocabulary apart.
  const run = (k: number, length: number) =>
    Array.from({ length }, (_, i) => (Math.floor((vocabularySize * k) / 4) + i) % vocabularySize);
  // Not completeOnSlot: what a server does not report counts as kept here, and the probe's calls
  // go through no slot bookkeeping.
  const call = (tokens: readonly Token[], slot: number) =>
    http
      .call<CompletionAnswer>(
        "/completion",
        completionBody({ tokens, nProbs: 0, slot, lora }),
        signal,
      )
      .catch(async (error: unknown) => {
        // Whoever names the slot next must find the server done with it.
        if (!(error instanceof EngineRequestError)) await untilIdle(http, [slot]);
        throw error;
      });
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
 * How decisiond uses a llama-server: all its slots, or 1 when the server clears an idle slot's
 * prompt; and whether requests take turns on them, which only a server that restores a displaced
 * prompt makes worth it ({@link SlotBehaviour}). What it gives up is said to `onNotice`, with the
 * flags that change it.
 * @throws {@link EngineCallError} when the server does not answer.
 */
export async function slotUse(
  slotServer: SlotServer,
  onNotice: ((message: string) => void) | undefined,
  signal?: AbortSignal,
): Promise<{ slots: number; turns: boolean }> {
  const { total } = slotServer;
  const { keep, restore } = await probeSlots(slotServer, signal);
  const server = `the llama-server at ${slotServer.http.url}`;
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

/**
 * The slots of one llama-server as decisiond uses them, for as long as it serves that server: the
 * queue that hands them out, what each holds, and whether requests take turns on them
 * ({@link slotUse}). An engine opened again after an outage takes them over
 * ({@link openServerSlots}), so that the requests still running on the engine it replaces and the
 * new ones share one queue: a call that names a slot the server is busy with corrupts that slot
 * (docs/decisions/106).
 */
export class ServerSlots {
  /** Hands the slots in use out, one request at a time. */
  readonly pool: SlotPool;
  /** What each slot holds after our calls on it. */
  readonly held: SlotPrompts;

  constructor(
    /** The server's slots (`/props` `total_slots`). */
    readonly total: number,
    /** Slots in use: the first `count` ({@link slotUse}). */
    readonly count: number,
    /** Whether a request gives its slot up to a shorter one between calls ({@link slotUse}). */
    readonly turns: boolean,
  ) {
    this.pool = new SlotPool(count);
    this.held = new SlotPrompts(count);
  }

  /**
   * Gives `turn`'s slot back once the server is done with it: at once after calls that answered,
   * after one that went unanswered once {@link untilIdle}. Never throws.
   */
  async release(http: EngineConnection, turn: SlotTurn): Promise<void> {
    if (turn.unanswered && turn.slot >= 0) await untilIdle(http, [turn.slot]);
    turn.release();
  }
}

/**
 * Resolves once the server is done with `slots` after a call on them went unanswered (aborted,
 * timed out, connection lost). The server notices a closed connection within a second
 * (`HTTP_POLLING_SECONDS`) and only then cancels the call, which may still wait in its queue
 * meanwhile: so after {@link DISCONNECT_CHECK_MS}, once `GET /slots` says none of `slots` is
 * processing, polled for at most the connection's call timeout; {@link UNANSWERED_FALLBACK_MS}
 * more when that route fails or the time is up. A call that names a slot the server is busy with
 * corrupts it (docs/decisions/106). Never throws.
 */
export async function untilIdle(http: EngineConnection, slots: readonly number[]): Promise<void> {
  await sleep(DISCONNECT_CHECK_MS, undefined, { ref: false });
  const until = Date.now() + http.timeoutMs;
  try {
    while (Date.now() < until) {
      const left = AbortSignal.timeout(Math.max(1, until - Date.now()));
      const states = await http.call<{ id?: unknown; is_processing?: unknown }[]>(
        "/slots",
        undefined,
        left,
      );
      const busy = (id: number) =>
        Array.isArray(states) && states.some((s) => s.id === id && s.is_processing === true);
      if (!slots.some(busy)) return;
      await sleep(SLOTS_POLL_MS, undefined, { ref: false });
    }
  } catch {
    // The route is off (`--no-slots`), or the server does not answer.
  }
  await sleep(UNANSWERED_FALLBACK_MS, undefined, { ref: false });
}

/** Milliseconds after an unanswered call before the server has surely noticed it: its 1 s check. */
const DISCONNECT_CHECK_MS = 1_100;

/** Milliseconds between two `GET /slots` while an unanswered call's slot is still processing. */
const SLOTS_POLL_MS = 100;

/**
 * Milliseconds more a slot whose call went unanswered is kept from other requests when the server
 * does not say (`GET /slots` off, or no answer): a batch of 512 tokens on a 2-core CPU, and more.
 */
export const UNANSWERED_FALLBACK_MS = 4_000;

/**
 * The slots of a llama-server, for an engine opened on it: probed ({@link slotUse}). When the
 * engine replaces one opened on the same server before (a pool's reopening after an outage):
 * - while requests of that engine hold or wait for its slots (the outage was one failed call,
 *   not a restart, which would have failed them), `previous` is kept unprobed, what its slots
 *   hold marked unknown: the probe would have to wait for those requests, and the engine would
 *   stay out meanwhile;
 * - otherwise the probe runs with every slot of `previous` held (so no call comes in between),
 *   and `previous` is kept when the server answers as it did, retired when it does not (a server
 *   restarted with other slots).
 * @throws {@link EngineCallError} when the server does not answer; the signal's reason on abort.
 */
export async function openServerSlots(
  server: SlotServer,
  previous: ServerSlots | undefined,
  onNotice: ((message: string) => void) | undefined,
  signal?: AbortSignal,
): Promise<ServerSlots> {
  const probe = async () => {
    const use = await slotUse(server, onNotice, signal);
    return new ServerSlots(server.total, use.slots, use.turns);
  };
  if (!previous) return probe();
  if (previous.total === server.total && previous.pool.busy) {
    previous.held.forgetAll(); // each request cuts its slot back before its next call
    return previous;
  }
  return previous.pool.holdAll(async () => {
    const now = await probe();
    previous.held.forgetAll();
    const same =
      [now.total, now.count, now.turns].join() ===
      [previous.total, previous.count, previous.turns].join();
    if (same) return previous;
    // Not an engine failure: the pool must not take the engine that replaces it out.
    previous.pool.retire(
      new EngineUnavailableError(
        "engineUnreachable",
        `${server.http.url} restarted with other slots`,
        1,
      ),
    );
    return now;
  }, signal);
}
