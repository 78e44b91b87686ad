import { describe, expect, it } from "vitest";
import { TurnQueue } from "../src/engine/turn-queue.js";

/** A task that records its name when it runs and settles when `release` is called. */
function gate(log: string[], name: string) {
  let release!: () => void;
  const done = new Promise<void>((resolve) => (release = resolve));
  return {
    task: async () => {
      log.push(name);
      await done;
      return name;
    },
    release,
  };
}

/** Lets every settled promise's callbacks run. */
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe("TurnQueue", () => {
  it("runs one task at a time, the least work left first, then by arrival", async () => {
    const log: string[] = [];
    const queue = new TurnQueue();
    const running = gate(log, "running");
    const results = [
      queue.run(running.task, { rank: 5_000 }),
      queue.run(async () => (log.push("long, again"), "long"), { rank: 3_000 }),
      queue.run(async () => (log.push("short a"), "a"), { rank: 60 }),
      queue.run(async () => (log.push("short b"), "b"), { rank: 60 }),
    ];
    await flush();
    expect(log).toEqual(["running"]);
    expect(queue.hasShorterThan(5_000)).toBe(true);
    expect(queue.hasShorterThan(60)).toBe(false);
    running.release();
    expect(await Promise.all(results)).toEqual(["running", "long", "a", "b"]);
    expect(log).toEqual(["running", "short a", "short b", "long, again"]);
  });

  it("lets bookkeeping that does not interrupt wait without asking a running task to stop", async () => {
    const log: string[] = [];
    const queue = new TurnQueue();
    const running = gate(log, "running");
    const all = [
      queue.run(running.task, { rank: 5_000 }),
      queue.run(async () => log.push("write-behind"), { interrupts: false }),
    ];
    await flush();
    expect(queue.hasShorterThan(5_000)).toBe(false);
    running.release();
    await Promise.all(all);
    expect(log).toEqual(["running", "write-behind"]);
  });

  it("runs tasks by rank, the work their request has left, then by arrival", async () => {
    const log: string[] = [];
    const queue = new TurnQueue();
    const running = gate(log, "running");
    const all = [
      queue.run(running.task),
      queue.run(async () => log.push("4,000 tokens left"), { rank: 4_000 }),
      queue.run(async () => log.push("40 tokens left"), { rank: 40 }),
      queue.run(async () => log.push("6,000 tokens left"), { rank: 6_000 }),
      queue.run(async () => log.push("4,000 tokens left, came later"), { rank: 4_000 }),
    ];
    running.release();
    await Promise.all(all);
    expect(log).toEqual([
      "running",
      "40 tokens left",
      "4,000 tokens left",
      "4,000 tokens left, came later",
      "6,000 tokens left",
    ]);
  });

  it("lets a task of much work left go after MAX_PASSED others started", async () => {
    const log: string[] = [];
    const queue = new TurnQueue();
    const running = gate(log, "running");
    const all: Promise<unknown>[] = [
      queue.run(running.task),
      queue.run(async () => log.push("long"), { rank: 10_000 }),
    ];
    // Shorter turns keep coming while it waits, each queued as the one before it runs.
    const shorter = (i: number): Promise<unknown> =>
      queue.run(
        async () => {
          log.push(`short ${i}`);
          if (i < 2 * TurnQueue.MAX_PASSED) all.push(shorter(i + 1));
        },
        { rank: 10 },
      );
    all.push(shorter(0));
    running.release();
    while (log.length < 2 * TurnQueue.MAX_PASSED + 3) await flush();
    await Promise.all(all);
    expect(log.indexOf("long")).toBe(1 + TurnQueue.MAX_PASSED);
  });

  it("takes a task whose signal is aborted out of the queue at once", async () => {
    const log: string[] = [];
    const queue = new TurnQueue();
    const running = gate(log, "running");
    const controller = new AbortController();
    const first = queue.run(running.task);
    const cancelled = queue.run(async () => log.push("cancelled"), {
      rank: 5,
      signal: controller.signal,
    });
    const next = queue.run(async () => log.push("next"));
    controller.abort(new Error("client gone"));
    await expect(cancelled).rejects.toThrow("client gone");
    expect(log).toEqual(["running"]);
    await expect(
      queue.run(async () => "never", { signal: AbortSignal.abort(new Error("gone before")) }),
    ).rejects.toThrow("gone before");
    running.release();
    await Promise.all([first, next]);
    expect(log).toEqual(["running", "next"]);
    await queue.idle();
  });

  it("lets a task run after at most MAX_PASSED shorter ones queued with it went ahead", async () => {
    const log: string[] = [];
    const queue = new TurnQueue();
    const running = gate(log, "running");
    const all = [
      queue.run(running.task),
      queue.run(async () => log.push("later"), { rank: 10_000 }),
    ];
    for (let i = 0; i < TurnQueue.MAX_PASSED + 3; i++)
      all.push(queue.run(async () => log.push(`first ${i}`), { rank: 1 }));
    running.release();
    await Promise.all(all);
    expect(log.indexOf("later")).toBe(1 + TurnQueue.MAX_PASSED);
    expect(log).toHaveLength(TurnQueue.MAX_PASSED + 5);
  });

  it("goes on after a task fails, and reports idle once nothing runs or waits", async () => {
    const queue = new TurnQueue();
    await expect(queue.idle()).resolves.toBeUndefined();
    const log: string[] = [];
    const running = gate(log, "running");
    const failed = queue.run(async () => {
      throw new Error("no logits");
    });
    const thrown = queue.run((): Promise<string> => {
      throw new Error("before any await");
    });
    const after = queue.run(running.task, { rank: 100 });
    let idle = false;
    const whenIdle = queue.idle().then(() => (idle = true));
    await expect(failed).rejects.toThrow("no logits");
    await expect(thrown).rejects.toThrow("before any await");
    await flush();
    expect(log).toEqual(["running"]);
    expect(idle).toBe(false);
    running.release();
    await expect(after).resolves.toBe("running");
    await whenIdle;
    expect(idle).toBe(true);
  });
});
