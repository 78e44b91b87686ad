import type { TurnQueue } from "../turn-queue.js";

// Why write behind, and why 10 ms: docs/decisions/055
/**
 * Milliseconds after a request before the engine writes the snapshot of the prefix it just read
 * (write-behind), unless another request comes first: long enough for the answer to leave over
 * HTTP before the write takes a core, which on a small machine it would share with the response
 * and the client's wake-up.
 */
export const SNAPSHOT_WRITE_DELAY_MS = 10;

/**
 * Write-behind: {@link SNAPSHOT_WRITE_DELAY_MS} after a request, sequence 0's prefix is saved to
 * the prefix cache, so the next request with another state does not wait for that write (which
 * `PrefixSequence.restore` would otherwise do first). A request arriving sooner cancels it and
 * writes inline.
 */
export class SnapshotWriteBehind {
  private timer: ReturnType<typeof setTimeout> | undefined;

  /**
   * @param queue - the engine's turns: the write is queued there, never interrupting a request
   * @param write - saves sequence 0's prefix (never throws)
   */
  constructor(
    private readonly queue: TurnQueue,
    private readonly write: () => Promise<void>,
  ) {}

  /** Whether a write waits for its time. */
  get pending(): boolean {
    return this.timer !== undefined;
  }

  /** Writes {@link SNAPSHOT_WRITE_DELAY_MS} from now, unless cancelled or started before. */
  schedule(): void {
    this.cancel();
    this.timer = setTimeout(() => this.start(), SNAPSHOT_WRITE_DELAY_MS);
    this.timer.unref();
  }

  /** Drops the waiting timer and queues the write now. */
  start(): void {
    this.cancel();
    void this.queue.run(this.write, { interrupts: false });
  }

  /** Drops the waiting timer, if any. */
  cancel(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
