/**
 * A promise chain that runs one task at a time: one llama.cpp context serves one request at a
 * time. A task that fails does not stop the ones queued behind it.
 * @example
 * ```ts
 * const queue = new SerialQueue();
 * await Promise.all([queue.run(first), queue.run(second)]); // second starts once first settles
 * ```
 */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  /**
   * Runs `task` after every task queued before it has settled.
   * @returns what `task` resolves to
   * @throws what `task` throws
   */
  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    this.tail = result.catch(() => undefined);
    return result;
  }
}
