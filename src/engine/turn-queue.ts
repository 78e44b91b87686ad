/** A task waiting in a {@link TurnQueue}. */
interface Waiting {
  readonly start: () => void;
  readonly rank: number | (() => number);
  /** Whether a running task with more work left is to give the model up to it. */
  readonly interrupts: boolean;
  /** Tasks started before this one was queued: how long it has waited, counted in tasks. */
  readonly queuedAt: number;
}

/** Options of {@link TurnQueue.run}. */
export interface TurnOptions {
  /**
   * The work the task's request has left (tokens to evaluate), or a function that says it when
   * asked (for work that depends on what the model holds by then); default 0.
   */
  readonly rank?: number | (() => number);
  /** Aborting it takes a task that has not started out of the queue. */
  readonly signal?: AbortSignal | undefined;
  /**
   * Whether {@link TurnQueue.hasShorterThan} counts it: default `true`; `false` for bookkeeping
   * not worth a running request's giving the model up.
   */
  readonly interrupts?: boolean;
}

/**
 * The order in which requests get an engine's model, `capacity` tasks at a time (one for a model
 * in-process, a llama-server's slots for a remote one): the request with the least work left
 * first (shortest remaining processing time, which gives the least mean time of all orders), with
 * aging, so that a long request still goes on while shorter ones keep coming.
 * A running request asks {@link hasShorterThan} between two steps and, if so, gives the model up
 * and queues again with what it has left. Why: docs/decisions/103.
 * @example
 * ```ts
 * const queue = new TurnQueue();
 * queue.run(longTurn, { rank: 4_000 }); // 4,000 tokens left
 * queue.run(shortRequest, { rank: 60 }); // runs before it
 * ```
 */
export class TurnQueue {
  /**
   * Tasks that may start while a task waits before it goes next whatever else waits: the aging
   * bound.
   */
  static readonly MAX_PASSED = 8;
  private readonly waiting: Waiting[] = [];
  /** Tasks running now. */
  private running = 0;
  /** Tasks started so far. */
  private started = 0;
  private readonly idleWaiters: (() => void)[] = [];

  /** @param capacity - tasks that run at once, at least 1. */
  constructor(private readonly capacity = 1) {}

  /**
   * Runs `task` once fewer than `capacity` tasks run and its turn comes: the waiting task of the
   * lowest `rank` first, then by arrival, except that a task that has waited while
   * {@link MAX_PASSED} others started goes next (the one that has waited longest first). A task
   * that fails does not stop the others.
   * @returns what `task` resolves to
   * @throws what `task` throws; the signal's reason when aborted before `task` started
   */
  run<T>(task: () => Promise<T>, options: TurnOptions = {}): Promise<T> {
    const { rank = 0, signal, interrupts = true } = options;
    return new Promise<T>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const abandon = () => {
        const at = this.waiting.indexOf(waiting);
        if (at < 0) return;
        this.waiting.splice(at, 1);
        reject(signal!.reason);
        this.next();
      };
      // Never throws, even for a task that throws before its first await.
      const start = async () => {
        signal?.removeEventListener("abort", abandon);
        try {
          resolve(await task());
        } catch (error) {
          reject(error);
        }
      };
      const waiting: Waiting = {
        start: () => void start().finally(() => this.done()),
        rank,
        interrupts,
        queuedAt: this.started,
      };
      signal?.addEventListener("abort", abandon, { once: true });
      this.waiting.push(waiting);
      this.next();
    });
  }

  /** Whether a task waits (one that interrupts) whose request has less work left than `work`. */
  hasShorterThan(work: number): boolean {
    return this.waiting.some((waiting) => waiting.interrupts && rankOf(waiting) < work);
  }

  /** Tasks waiting to start. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Resolves once no task runs and none waits. */
  idle(): Promise<void> {
    if (this.running === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private done(): void {
    this.running--;
    this.next();
  }

  private next(): void {
    while (this.running < this.capacity) {
      const task = this.take();
      if (!task) {
        if (this.running === 0) for (const wake of this.idleWaiters.splice(0)) wake();
        return;
      }
      this.running++;
      this.started++;
      task.start();
    }
  }

  /** Removes and returns the task to start next, if any. */
  private take(): Waiting | undefined {
    if (this.waiting.length === 0) return undefined;
    // Waiting tasks are in arrival order: the first is the oldest.
    const oldest = this.waiting[0]!;
    const chosen =
      this.started - oldest.queuedAt >= TurnQueue.MAX_PASSED
        ? oldest
        : this.waiting.reduce((a, b) => (rankOf(b) < rankOf(a) ? b : a));
    this.waiting.splice(this.waiting.indexOf(chosen), 1);
    return chosen;
  }
}

function rankOf(waiting: Waiting): number {
  return typeof waiting.rank === "number" ? waiting.rank : waiting.rank();
}
