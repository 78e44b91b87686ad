/** Slot ids 0…n−1 handed out one request at a time, waiters served first come, first served. */
export class SlotPool {
  private readonly free: number[];
  private readonly waiting: { resolve: (slot: number) => void; reject: (e: unknown) => void }[] =
    [];

  constructor(count: number) {
    this.free = Array.from({ length: Math.max(1, count) }, (_, i) => i);
  }

  /** Requests waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  /** A free slot id, now or when one is released. @throws the signal's reason on abort. */
  acquire(signal?: AbortSignal): Promise<number> {
    signal?.throwIfAborted();
    const slot = this.free.shift();
    if (slot !== undefined) return Promise.resolve(slot);
    return new Promise<number>((resolve, reject) => {
      const waiter = {
        resolve: (s: number) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(s);
        },
        reject,
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  release(slot: number): void {
    const next = this.waiting.shift();
    if (next) next.resolve(slot);
    else this.free.push(slot);
  }
}
