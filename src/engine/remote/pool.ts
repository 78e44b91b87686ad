import {
  EngineUnavailableError,
  type ChatMessage,
  type ChatTemplate,
  type Engine,
  type EngineCounters,
  type ModelInfo,
  type ScoreRequest,
  type ScoreResult,
  type Token,
  type TokenizeOptions,
} from "../types.js";
import { DEFAULT_ENGINE_DEADLINE_MS, EngineCallError } from "./http.js";

/**
 * Several engines serving the same model, as one {@link Engine}. Every call goes to the healthy
 * engine with the fewest calls in flight (the first listed among equals). An engine that does not
 * answer (no connection, a reset, a 5xx, one HTTP call past its timeout, or, while a call waits on
 * it, two health checks in a row) is taken out at once and the call goes to the next one; a
 * taken-out engine is probed every `probeIntervalMs` (`ready()`, or opening it when it was down at
 * start) and comes back when it answers. With no engine left a call fails with
 * {@link EngineUnavailableError} (the API's 503 with `Retry-After`), never a hang. The pool does
 * not bound a whole call (a long state takes many HTTP calls): the caller's signal does (the
 * request's deadline). Why: docs/decisions/105-an-engine-deadline-bounds-one-call.md
 *
 * @example
 * ```ts
 * const pool = await EnginePool.open([{ name: url, open: (s) => LlamaServerEngine.open({ url }, s) }]);
 * const result = await pool.score(request, signal);
 * ```
 */

/** One engine of the pool: how to reach it. */
export interface PoolMember {
  /** For messages: the engine's URL. */
  readonly name: string;
  /** Connects to the engine and reads its model. @throws when it cannot be reached. */
  open(signal?: AbortSignal): Promise<Engine>;
}

/** Options of {@link EnginePool.open}. */
export interface PoolOptions {
  /**
   * Milliseconds opening an engine may take. Default {@link DEFAULT_ENGINE_DEADLINE_MS}. (Each
   * HTTP call's own timeout is the engine's.)
   */
  readonly deadlineMs?: number;
  /** Milliseconds between probes of a taken-out engine. Default 1000. */
  readonly probeIntervalMs?: number;
}

/** One member's state. */
interface Slot {
  readonly member: PoolMember;
  engine: Engine | undefined;
  healthy: boolean;
  inFlight: number;
  probe: NodeJS.Timeout | undefined;
  /** Why it was last taken out, for the 503's message. */
  lastError: string | undefined;
}

export class EnginePool implements Engine {
  readonly chatTemplate: ChatTemplate;
  private closed = false;
  private readonly probeIntervalMs: number;

  private constructor(
    private readonly slots: Slot[],
    readonly model: ModelInfo,
    options: PoolOptions,
  ) {
    this.probeIntervalMs = options.probeIntervalMs ?? 1000;
    this.chatTemplate = {
      name: "pool",
      render: (messages: readonly ChatMessage[], signal?: AbortSignal) =>
        this.run((engine, s) => engine.chatTemplate.render(messages, s), signal),
    };
    for (const slot of slots) if (!slot.healthy) this.startProbe(slot);
  }

  /**
   * Opens every member; those that do not answer start taken out (and are probed).
   * @throws {@link EngineUnavailableError} when none answers.
   * @throws `Error` when two engines serve different models (their model ids differ).
   */
  static async open(
    members: readonly PoolMember[],
    options: PoolOptions = {},
  ): Promise<EnginePool> {
    if (members.length === 0) throw new Error("a pool needs at least one engine");
    const timeout = options.deadlineMs ?? DEFAULT_ENGINE_DEADLINE_MS;
    const opened = await Promise.allSettled(
      members.map((m) => m.open(AbortSignal.timeout(timeout))),
    );
    const slots: Slot[] = members.map((member, i) => {
      const result = opened[i]!;
      return {
        member,
        engine: result.status === "fulfilled" ? result.value : undefined,
        healthy: result.status === "fulfilled",
        inFlight: 0,
        probe: undefined,
        lastError: result.status === "rejected" ? (result.reason as Error).message : undefined,
      };
    });
    const first = slots.find((s) => s.engine)?.engine;
    if (!first)
      throw new EngineUnavailableError(
        "engineUnreachable",
        slots.map((s) => s.lastError).join("; "),
        1,
      );
    for (const slot of slots)
      if (slot.engine && slot.engine.model.id !== first.model.id)
        throw new Error(
          `the engines serve different models: ${first.model.id} and ${slot.engine.model.id} (${slot.member.name})`,
        );
    return new EnginePool(slots, first.model, options);
  }

  /** Members and their state, for `/readyz`, logs and tests. */
  get members(): { name: string; healthy: boolean; inFlight: number }[] {
    return this.slots.map((s) => ({
      name: s.member.name,
      healthy: s.healthy,
      inFlight: s.inFlight,
    }));
  }

  /** The members' counters summed. */
  get counters(): Readonly<EngineCounters> {
    const sum: EngineCounters = {
      requests: 0,
      prefixTokensEvaluated: 0,
      prefixTokensCached: 0,
      branchTokensEvaluated: 0,
    };
    for (const { engine } of this.slots) {
      if (!engine) continue;
      sum.requests += engine.counters.requests;
      sum.prefixTokensEvaluated += engine.counters.prefixTokensEvaluated;
      sum.prefixTokensCached += engine.counters.prefixTokensCached;
      sum.branchTokensEvaluated += engine.counters.branchTokensEvaluated;
    }
    return sum;
  }

  tokenize(text: string, options: TokenizeOptions = {}): Promise<Token[]> {
    return this.run(
      (engine, signal) => engine.tokenize(text, { ...options, signal }),
      options.signal,
    );
  }

  detokenize(tokens: readonly Token[], signal?: AbortSignal): Promise<string> {
    return this.run((engine, s) => engine.detokenize(tokens, s), signal);
  }

  score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResult> {
    return this.run((engine, s) => engine.score(request, s), signal);
  }

  /** Whether some engine is in and answers its health check (asked of all at once). */
  async ready(signal?: AbortSignal): Promise<boolean> {
    const asked = this.slots
      .filter((slot) => slot.healthy && slot.engine)
      .map(async (slot) => {
        if (!(await (slot.engine!.ready?.(signal) ?? true))) throw new Error("not ready");
      });
    return (
      asked.length > 0 &&
      Promise.any(asked).then(
        () => true,
        () => false,
      )
    );
  }

  /** Why {@link ready} answered false, for `/readyz`: each engine's state. */
  notReadyReason(): string {
    const states = this.slots.map((slot) =>
      slot.healthy && slot.engine
        ? `${slot.member.name} does not answer its health check`
        : `${slot.member.name} is taken out (${slot.lastError ?? "not opened"}), probed every ${this.probeIntervalMs} ms`,
    );
    return `no engine answers: ${states.join("; ")}`;
  }

  /** Seconds a client should wait before retrying: the probe interval, at least 1. */
  get retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.probeIntervalMs / 1000));
  }

  /**
   * Runs `call` on the least busy healthy engine, moving on to the next when one does not answer.
   * @throws {@link EngineUnavailableError} when no engine is left to try.
   * @throws the caller's abort reason; the engine's own refusals (4xx, context overflow) as they are.
   */
  private async run<T>(
    call: (engine: Engine, signal: AbortSignal) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    if (this.closed) throw new Error("the engine pool is closed");
    signal?.throwIfAborted();
    const tried = new Set<Slot>();
    for (;;) {
      const slot = this.pick(tried);
      if (!slot)
        throw new EngineUnavailableError(
          "engineUnreachable",
          this.slots.map((s) => `${s.member.name}: ${s.lastError ?? "busy"}`).join("; "),
          this.retryAfterSeconds,
        );
      tried.add(slot);
      slot.inFlight++;
      const watch = this.watch(slot, signal);
      try {
        return await call(slot.engine!, watch.signal);
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        // The watch's abort comes back as its reason, an EngineCallError.
        if (!(error instanceof EngineCallError)) throw error;
        slot.lastError = error.message;
        // A slow engine is not a dead one: a timeout takes it out only when another can serve.
        if (!error.timedOut || this.slots.some((s) => s !== slot && s.healthy))
          this.takeOut(slot, error.message);
      } finally {
        watch.stop();
        slot.inFlight--;
      }
    }
  }

  /**
   * While a call waits on `slot`, asks the engine's health every `probeIntervalMs` (each check
   * given 2 s at least) when another engine could take the call: two checks in a row unanswered (a
   * frozen process, a dead host) abort the call's signal with a timed-out {@link EngineCallError}.
   * @returns the signal to pass to the call (the caller's, plus the watch) and how to stop.
   */
  private watch(slot: Slot, signal?: AbortSignal): { signal: AbortSignal; stop: () => void } {
    const controller = new AbortController();
    const combined = signal ? AbortSignal.any([signal, controller.signal]) : controller.signal;
    let misses = 0;
    let asking = false;
    const timer = setInterval(() => {
      const engine = slot.engine;
      if (asking || !engine?.ready || !this.slots.some((s) => s !== slot && s.healthy)) return;
      asking = true;
      const timeout = AbortSignal.timeout(Math.max(2000, this.probeIntervalMs));
      void engine
        .ready(timeout)
        .catch(() => false)
        .then((answered) => {
          misses = answered ? 0 : misses + 1;
          if (misses >= 2 && !controller.signal.aborted)
            controller.abort(
              new EngineCallError(slot.member.name, "does not answer its health check", true),
            );
        })
        .finally(() => (asking = false));
    }, this.probeIntervalMs);
    timer.unref();
    return { signal: combined, stop: () => clearInterval(timer) };
  }

  /** The healthy, untried slot with the fewest calls in flight. */
  private pick(tried: ReadonlySet<Slot>): Slot | undefined {
    let best: Slot | undefined;
    for (const slot of this.slots)
      if (slot.healthy && slot.engine && !tried.has(slot))
        if (!best || slot.inFlight < best.inFlight) best = slot;
    return best;
  }

  private takeOut(slot: Slot, reason: string): void {
    slot.lastError = reason;
    if (!slot.healthy) return;
    slot.healthy = false;
    this.startProbe(slot);
  }

  private startProbe(slot: Slot): void {
    if (slot.probe || this.closed) return;
    let probing = false;
    slot.probe = setInterval(() => {
      if (probing) return;
      probing = true;
      void this.probeOnce(slot).finally(() => (probing = false));
    }, this.probeIntervalMs);
    slot.probe.unref();
  }

  /**
   * One probe: asks a member's health (when it was open), then opens it again, which checks what
   * it serves anew (its model here, a llama-server's adapter in its `open`: an engine restarted
   * with other flags stays out, saying why); puts it back when all that answers.
   */
  private async probeOnce(slot: Slot): Promise<void> {
    const signal = AbortSignal.timeout(Math.max(500, this.probeIntervalMs));
    try {
      if (slot.engine && !(await (slot.engine.ready?.(signal) ?? true))) return;
      const engine = await slot.member.open(signal);
      if (engine.model.id !== this.model.id) {
        slot.lastError = `serves ${engine.model.id}, not ${this.model.id}`;
        if (engine !== slot.engine) await engine.close();
        return;
      }
      // The engine it replaces is not closed: a call may still be leaving it.
      slot.engine = engine;
    } catch (error) {
      slot.lastError = (error as Error).message;
      return;
    }
    if (this.closed) return;
    clearInterval(slot.probe);
    slot.probe = undefined;
    slot.healthy = true;
    slot.lastError = undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const slot of this.slots) {
      clearInterval(slot.probe);
      slot.probe = undefined;
      await slot.engine?.close();
    }
  }
}
