/**
 * The service's lifecycle as the HTTP layer sees it: decision requests being handled, and
 * whether the service drains (SIGTERM: new decision requests get `Errors.shuttingDown`, `/readyz`
 * answers 503 so the load balancer stops sending, and the process exits once what is in flight
 * is answered), or cuts what is still in flight when the drain ran out of time.
 */
export class Lifecycle {
  private activeCount = 0;
  private readonly draining_ = new AbortController();
  private readonly idleWaiters: (() => void)[] = [];
  private readonly cutting = new AbortController();

  /** Aborts once {@link drain} (or {@link cut}) is called. */
  get drainSignal(): AbortSignal {
    return this.draining_.signal;
  }

  /**
   * Aborts once {@link cut} is called: the app's work queue aborts every decision admitted with
   * it, and their callers answer 503 `shutting_down` (recorded in the ledger).
   */
  get cutSignal(): AbortSignal {
    return this.cutting.signal;
  }

  /** Decision requests being handled now. */
  get active(): number {
    return this.activeCount;
  }

  /** Whether {@link drain} was called. */
  get draining(): boolean {
    return this.draining_.signal.aborted;
  }

  /** A decision request arrived and was let in. */
  enter(): void {
    this.activeCount++;
  }

  /** A decision request was answered (or its client left). */
  leave(): void {
    this.activeCount = Math.max(0, this.activeCount - 1);
    if (this.activeCount === 0) for (const wake of this.idleWaiters.splice(0)) wake();
  }

  /**
   * Stops letting decision requests in and resolves once none is in flight, or after `timeoutMs`.
   * @returns whether every request in flight was answered before the time-out.
   */
  drain(timeoutMs: number): Promise<boolean> {
    this.draining_.abort();
    if (this.activeCount === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  /**
   * Stops letting decision requests in, aborts those in flight ({@link cutSignal}), and resolves
   * once none is in flight, or after `timeoutMs`.
   * @returns whether every request in flight was answered before the time-out.
   */
  cut(timeoutMs: number): Promise<boolean> {
    this.draining_.abort();
    this.cutting.abort();
    return this.drain(timeoutMs);
  }
}
