import { TurnQueue } from "../turn-queue.js";

/** Options of {@link SlotPool.acquire}. */
export interface SlotOptions {
  /** The work the request has left, in tokens to evaluate: the least goes first. Default 0. */
  readonly rank?: number;
  /** Aborting it takes a request that waits out of the queue. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Slot ids 0…n−1 of a llama-server, handed out one request at a time, in a {@link TurnQueue}'s
 * order: the waiting request with the least work left first, with aging; by arrival for equal
 * work. A request holding a slot may give it up to a shorter one ({@link hasShorterThan}) and
 * acquire one again. Why: docs/decisions/106.
 */
export class SlotPool {
  /** Slots handed out. */
  readonly count: number;
  private readonly free: number[];
  private readonly queue: TurnQueue;
  /** Per slot held: ends its task in the queue. */
  private readonly finish = new Map<number, () => void>();
  /** Set by {@link retire}: what every later acquisition fails with. */
  private retired: Error | undefined;

  constructor(count: number) {
    this.count = Math.max(1, count);
    this.free = Array.from({ length: this.count }, (_, i) => i);
    this.queue = new TurnQueue(this.count);
  }

  /** Requests waiting for a slot. */
  get queued(): number {
    return this.queue.queued;
  }

  /**
   * A free slot id, now or when its turn comes.
   * @throws the signal's reason on abort; the reason given to {@link retire} once retired.
   */
  acquire(options: SlotOptions = {}): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      if (this.retired) return reject(this.retired);
      this.queue
        .run(
          () =>
            new Promise<void>((done) => {
              if (this.retired) {
                reject(this.retired);
                return done();
              }
              const slot = this.free.shift()!;
              this.finish.set(slot, done);
              resolve(slot);
            }),
          options,
        )
        .catch(reject);
    });
  }

  /** Whether a request holds a slot or waits for one. */
  get busy(): boolean {
    return this.finish.size > 0 || this.queue.queued > 0;
  }

  /**
   * Runs `task` holding every slot, each taken as a request with no work left would be (before
   * other waiters but for aging) as requests that hold one give it up (between their calls, or at
   * their end): no call of theirs is out meanwhile.
   * @returns what `task` resolves to
   * @throws what `task` throws; the signal's reason when aborted before every slot was held
   */
  async holdAll<T>(task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const held: number[] = [];
    try {
      while (held.length < this.count) held.push(await this.acquire({ rank: 0, signal }));
      return await task();
    } finally {
      for (const slot of held) this.release(slot);
    }
  }

  /**
   * Ends the pool's use (its server now has other slots): requests that wait for a slot, or ask
   * for one later, fail with `reason`.
   */
  retire(reason: Error): void {
    this.retired ??= reason;
  }

  /** Gives `slot` back: the next request in the queue's order takes it. */
  release(slot: number): void {
    const done = this.finish.get(slot);
    if (!done) return;
    this.finish.delete(slot);
    this.free.push(slot);
    done();
  }

  /** Whether a request waits with less work left than `work` tokens. */
  hasShorterThan(work: number): boolean {
    return this.queue.hasShorterThan(work);
  }
}

/**
 * One request's hold on a slot of a {@link SlotPool}, from {@link SlotTurn.take} to
 * {@link SlotTurn.release}. Between two calls ({@link beforeCall}) it may give the slot up to a
 * waiting request with less work left and queue again with what it has left; each turn makes at
 * least one call, so every request finishes.
 */
export class SlotTurn {
  /** Calls made in this turn. */
  private calls = 0;
  /** The request's prefix length once evaluated; `null` while it is being evaluated. */
  prefixLength: number | null = null;
  /**
   * Whether a call on the slot went unanswered (aborted, timed out, connection lost): the server
   * may still be evaluating it there, and a call naming a busy slot corrupts it (decision 106).
   */
  unanswered = false;

  private constructor(
    private readonly pool: SlotPool,
    /** The slot held, −1 while none is. */
    public slot: number,
    /** Tokens the request has left to evaluate. */
    private left: number,
  ) {}

  /** A slot for a request of `work` tokens, now or when its turn comes. @throws as acquire does. */
  static async take(pool: SlotPool, work: number, signal?: AbortSignal): Promise<SlotTurn> {
    return new SlotTurn(pool, await pool.acquire({ rank: work, signal }), work);
  }

  /**
   * Before a call: when `yields` and this turn has made a call, gives the slot up to a waiting
   * request with less work left and resolves once a slot is held again (perhaps another one).
   * @returns whether the slot was given up (what the slot now held holds is the server's doing)
   * @throws the signal's reason when aborted while waiting
   */
  async beforeCall(yields: boolean, signal?: AbortSignal): Promise<boolean> {
    if (!yields || this.calls === 0 || !this.pool.hasShorterThan(this.left)) return false;
    this.release();
    this.slot = await this.pool.acquire({ rank: this.left, signal });
    this.calls = 0;
    return true;
  }

  /** After a call that evaluated `tokens` tokens. */
  afterCall(tokens: number): void {
    this.calls++;
    this.left = Math.max(0, this.left - tokens);
  }

  /** Gives the slot back, if one is held. */
  release(): void {
    if (this.slot < 0) return;
    this.pool.release(this.slot);
    this.slot = -1;
  }
}
