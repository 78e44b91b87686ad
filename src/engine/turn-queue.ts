/** A task waiting in a {@link TurnQueue}. */
interface Waiting {
  readonly start: () => void;
  readonly rank: number;
  /** Tasks started before this one was queued: how long it has waited, counted in tasks. */
  readonly queuedAt: number;
}

/**
 * The order in which requests get an engine's model, one task at a time: requests that have not
 * had it yet before those that gave it up part way and wait to go on (a multi-level feedback
 * queue of two levels, as operating systems schedule short jobs ahead of long ones), the latter
 * by the work they have left (shortest remaining first), with aging, so that a long request still
 * goes on while others keep coming. Why: docs/decisions/103.
 * @example
 * ```ts
 * const queue = new TurnQueue();
 * queue.run(longTurn, "later", 4_000); // gave the model up once, 4,000 tokens left
 * queue.run(shortRequest); // runs before it
 * ```
 */
export class TurnQueue {
  /**
   * Tasks that may start while a `"later"` task waits before it goes next whatever else waits:
   * the aging bound.
   */
  static readonly MAX_PASSED = 8;
  private readonly first: Waiting[] = [];
  private readonly later: Waiting[] = [];
  private running = false;
  /** Tasks started so far. */
  private started = 0;
  private readonly idleWaiters: (() => void)[] = [];

  /**
   * Runs `task` once the model is free and its turn comes: `"first"` tasks (a request's first
   * turn, and any other task) in arrival order, ahead of `"later"` tasks (turns of requests that
   * gave the model up); those go by `rank` (the work the request has left), the lowest first, then
   * by arrival. A later task that has waited while {@link MAX_PASSED} tasks started goes next (the
   * one that has waited longest first). A task that fails does not stop the others.
   * @param rank - for a `"later"` task, the work its request has left (tokens to evaluate)
   * @param signal - aborting it takes a task that has not started out of the queue
   * @returns what `task` resolves to
   * @throws what `task` throws; the signal's reason when aborted before `task` started
   */
  run<T>(
    task: () => Promise<T>,
    level: "first" | "later" = "first",
    rank = 0,
    signal?: AbortSignal,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const list = level === "first" ? this.first : this.later;
      const abandon = () => {
        const at = list.indexOf(waiting);
        if (at < 0) return;
        list.splice(at, 1);
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
        queuedAt: this.started,
      };
      signal?.addEventListener("abort", abandon, { once: true });
      list.push(waiting);
      this.next();
    });
  }

  /** Resolves once no task runs and none waits. */
  idle(): Promise<void> {
    if (!this.running && this.first.length === 0 && this.later.length === 0)
      return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private done(): void {
    this.running = false;
    this.next();
  }

  private next(): void {
    if (this.running) return;
    const task = this.take();
    if (!task) {
      for (const wake of this.idleWaiters.splice(0)) wake();
      return;
    }
    this.running = true;
    this.started++;
    task.start();
  }

  /** Removes and returns the task to start next, if any. */
  private take(): Waiting | undefined {
    const later = this.later;
    if (later.length === 0) return this.first.shift();
    const oldest = later.reduce((a, b) => (b.queuedAt < a.queuedAt ? b : a));
    const aged = this.started - oldest.queuedAt >= TurnQueue.MAX_PASSED;
    if (!aged && this.first.length > 0) return this.first.shift();
    const chosen = aged
      ? oldest
      : later.reduce((a, b) =>
          b.rank < a.rank || (b.rank === a.rank && b.queuedAt < a.queuedAt) ? b : a,
        );
    later.splice(later.indexOf(chosen), 1);
    return chosen;
  }
}
