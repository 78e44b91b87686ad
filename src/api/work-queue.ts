import { untilAborted } from "../decision/prepare.js";
import { ApiError, CodedError, Errors } from "../protocol/errors.js";

/**
 * Bounds the work waiting for the model: at most `capacity` decisions are admitted at once
 * (running or queued behind the engine, which runs one computation at a time); one more is
 * refused ({@link Errors.overloaded}) with a `Retry-After` estimated from recent durations.
 * Each admitted decision gets a deadline: past it, its signal aborts (the engine drops the work
 * at its next step, or when its turn comes) and the caller answers
 * {@link Errors.deadlineExceeded}. When the service stops with decisions still running, its `cut`
 * signal aborts them all ({@link ShutdownError}), and their callers answer
 * {@link Errors.shuttingDown} (recorded in the ledger like any answer).
 * Why these defaults: docs/decisions/035-overload-and-deadlines.md
 */

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** Decisions admitted at once (running + waiting). Default {@link DEFAULT_QUEUE_CAPACITY}. */
  readonly capacity?: number;
  /** Longest a decision may take from admission to answer, in ms; 0 for none. Default {@link DEFAULT_DEADLINE_MS}. */
  readonly deadlineMs?: number;
  /**
   * Once it aborts, every decision admitted (running, or waiting for the engine) is aborted with
   * a {@link ShutdownError}, and new ones are refused with one. Default: none.
   */
  readonly cut?: AbortSignal;
}

/** Default capacity: 16 decisions admitted at once. */
export const DEFAULT_QUEUE_CAPACITY = 16;
/** Default deadline: 300 s (docs/decisions/035). */
export const DEFAULT_DEADLINE_MS = 300_000;

/**
 * Thrown (as a signal's reason) when a decision runs past its deadline; code `deadlineExceeded`,
 * with a retry after a quarter of the deadline (at least 1 s).
 */
export class DeadlineError extends CodedError<"deadlineExceeded"> {
  constructor(readonly deadlineMs: number) {
    super("deadlineExceeded", [deadlineMs], {
      retryAfterMs: 1000 * Math.max(1, Math.ceil(deadlineMs / 4000)),
    });
  }
}

/**
 * Thrown (as a signal's reason) when the service stops before a decision is answered (the drain's
 * time-out, `decisiond serve`); code `shuttingDown`, with a retry after 1 s (elsewhere).
 */
export class ShutdownError extends CodedError<"shuttingDown"> {
  /** @param cut - what was stopped: the answer (default) or the body still arriving */
  constructor(cut: "answer" | "body" = "answer") {
    super("shuttingDown", { cut }, { retryAfterMs: 1000 });
  }
}

export class WorkQueue {
  readonly capacity: number;
  readonly deadlineMs: number;
  private readonly cut: AbortSignal | undefined;
  /** The signals of the decisions admitted (until their work lets go) and of {@link untilCut}. */
  private readonly controllers = new Set<AbortController>();
  private admitted = 0;
  /** When each decision admitted started (`performance.now()`, one entry each), for Retry-After. */
  private readonly running = new Set<{ readonly started: number }>();
  /** A running average of decision durations (ms), for Retry-After. */
  private typicalMs = 1000;

  constructor(options: WorkQueueOptions = {}) {
    this.capacity = Math.max(1, options.capacity ?? DEFAULT_QUEUE_CAPACITY);
    this.deadlineMs = Math.max(0, options.deadlineMs ?? DEFAULT_DEADLINE_MS);
    this.cut = options.cut;
    // One listener for all decisions (an AbortSignal warns past ten listeners).
    this.cut?.addEventListener(
      "abort",
      () => {
        for (const controller of this.controllers) controller.abort(new ShutdownError());
      },
      { once: true },
    );
  }

  /** Decisions admitted now. */
  get size(): number {
    return this.admitted;
  }

  /**
   * Runs `work` under the queue's bound and deadline.
   * @param work - gets a signal that aborts when `signal` does, the deadline passes or the queue's
   *   `cut` aborts.
   * @param signal - the caller's own (e.g. aborted when the client hangs up).
   * @param letGo - called at once with a promise of what the work returns once it lets go
   *   (`undefined` when it fails), also when the caller was answered sooner: the usage of
   *   abandoned work is charged then.
   * @returns what `work` returns. Rejects as soon as the signal aborts (with its reason: a
   *   {@link DeadlineError} past the deadline, a {@link ShutdownError} when cut), even if `work`
   *   has not yet let go.
   * @throws {@link ApiError} 503 ({@link Errors.overloaded}) with `Retry-After` when the queue is
   *   full; {@link ShutdownError} once the queue is cut
   * @example
   * ```ts
   * await queue.run((signal) => model.decide(request, signal), controller.signal);
   * ```
   */
  async run<T>(
    work: (signal: AbortSignal) => Promise<T>,
    signal: AbortSignal,
    letGo?: (done: Promise<T | undefined>) => void,
  ): Promise<T> {
    if (this.cut?.aborted) throw new ShutdownError();
    if (this.admitted >= this.capacity) throw this.overloaded();
    this.admitted++;
    const started = performance.now();
    const entry = { started };
    this.running.add(entry);
    const controller = new AbortController();
    const timer =
      this.deadlineMs > 0
        ? setTimeout(() => controller.abort(new DeadlineError(this.deadlineMs)), this.deadlineMs)
        : undefined;
    const forward = () => controller.abort(signal.reason);
    if (signal.aborted) forward();
    else signal.addEventListener("abort", forward, { once: true });
    this.controllers.add(controller);
    let aborted!: (reason: unknown) => void;
    const whenAborted = new Promise<never>((_, reject) => (aborted = reject));
    const onAbort = () => aborted(controller.signal.reason);
    if (controller.signal.aborted) onAbort();
    else controller.signal.addEventListener("abort", onAbort, { once: true });
    // A `work` that throws at once is a rejection like any other: the slot is released below.
    const running = Promise.resolve().then(() => work(controller.signal));
    letGo?.(running.catch(() => undefined));
    try {
      const result = await Promise.race([running, whenAborted]);
      this.typicalMs = 0.8 * this.typicalMs + 0.2 * (performance.now() - started);
      return result;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", forward);
      controller.signal.removeEventListener("abort", onAbort);
      // The slot is held until the work itself lets go, so abandoned work still counts.
      const release = () => {
        this.admitted--;
        this.running.delete(entry);
        this.controllers.delete(controller);
      };
      void running.then(release, release);
    }
  }

  /**
   * `step`, unless the queue is cut first: for what a decision does before {@link run} (decoding
   * its media), so that a cut answers it too. `step` itself runs on.
   * @returns what `step` resolves to
   * @throws {@link ShutdownError} when the queue is, or gets, cut before `step` settles; else what
   *   `step` rejects with
   */
  async untilCut<T>(step: Promise<T>): Promise<T> {
    if (this.cut?.aborted) throw new ShutdownError();
    if (!this.cut) return step;
    const controller = new AbortController();
    this.controllers.add(controller);
    try {
      return await untilAborted(step, controller.signal);
    } finally {
      this.controllers.delete(controller);
    }
  }

  /**
   * The refusal of a full queue, with when to retry: when the first decision admitted is expected
   * to let go, each expected to take a typical decision, or, once it has run longer, about as
   * long again as it has run (at least 1 s, at most 60 s). Why: docs/decisions/035-overload-and-deadlines.md
   */
  private overloaded(): ApiError {
    const now = performance.now();
    let soonest = Infinity;
    for (const { started } of this.running) {
      const elapsed = now - started;
      soonest = Math.min(soonest, this.typicalMs > elapsed ? this.typicalMs - elapsed : elapsed);
    }
    if (soonest === Infinity) soonest = this.typicalMs;
    const ms = Math.round(Math.min(60_000, Math.max(1000, soonest)));
    return new ApiError(Errors.overloaded, [this.admitted, Math.ceil(ms / 1000)], {
      headers: { "retry-after": String(Math.ceil(ms / 1000)), "retry-after-ms": String(ms) },
    });
  }
}
