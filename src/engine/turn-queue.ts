/**
 * The order in which requests get an engine's model, one task at a time: requests that have not
 * had it yet before those that gave it up part way and wait to go on (a multi-level feedback
 * queue of two levels, as operating systems schedule short jobs ahead of long ones), with aging,
 * so that a long request still goes on while new ones keep coming. Why: docs/decisions/103.
 * @example
 * ```ts
 * const queue = new TurnQueue();
 * queue.run(longTurn, "later"); // gave the model up once, waits to go on
 * queue.run(shortRequest); // runs before it
 * ```
 */
export class TurnQueue {
  /**
   * New tasks that may run before a waiting `"later"` task, counted from when the oldest of those
   * started waiting or last ran: the aging bound.
   */
  static readonly MAX_PASSED = 8;
  private readonly first: (() => Promise<void>)[] = [];
  /** Later tasks by rank, then arrival. */
  private readonly later: { readonly rank: number; readonly start: () => Promise<void> }[] = [];
  private running = false;
  /** New tasks run while a later one waited, since a later one last ran. */
  private passed = 0;
  private readonly idleWaiters: (() => void)[] = [];

  /**
   * Runs `task` once the model is free and its turn comes: `"first"` (a request's first turn, and
   * any other task) in arrival order, ahead of `"later"` tasks (turns of requests that gave the
   * model up), except that a later task runs after at most {@link MAX_PASSED} first ones have
   * passed it. Later tasks run by `rank` (the request's place in arrival order), so the request
   * that came first finishes first instead of every long one taking turns. A task that fails does
   * not stop the others.
   * @returns what `task` resolves to
   * @throws what `task` throws
   */
  run<T>(task: () => Promise<T>, level: "first" | "later" = "first", rank = 0): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // Never throws, even for a task that throws before its first await.
      const start = async () => {
        try {
          resolve(await task());
        } catch (error) {
          reject(error);
        }
      };
      if (level === "first") this.first.push(start);
      else {
        const at = this.later.findIndex((waiting) => waiting.rank > rank);
        this.later.splice(at < 0 ? this.later.length : at, 0, { rank, start });
      }
      this.next();
    });
  }

  /** Resolves once no task runs and none waits. */
  idle(): Promise<void> {
    if (!this.running && this.first.length === 0 && this.later.length === 0)
      return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private next(): void {
    if (this.running) return;
    const aged =
      this.later.length > 0 && (this.first.length === 0 || this.passed >= TurnQueue.MAX_PASSED);
    const task = aged ? this.later.shift()?.start : this.first.shift();
    if (!task) {
      for (const wake of this.idleWaiters.splice(0)) wake();
      return;
    }
    if (aged) this.passed = 0;
    else if (this.later.length > 0) this.passed++;
    this.running = true;
    void task().finally(() => {
      this.running = false;
      this.next();
    });
  }
}
