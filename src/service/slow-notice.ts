import type { Print } from "./accounts.js";

/** How long a model load may take before `serve` says it is still at it, in ms. */
export const SLOW_LOAD_NOTICE_MS = 15_000;

/**
 * Awaits `work`, printing a line each `everyMs` while it has not settled, so that a start that
 * takes minutes (node-llama-cpp building llama.cpp for this machine, or waiting on another
 * process's build of it) is not mistaken for a hung one.
 * @param line - the line for the seconds waited so far
 * @returns what `work` resolves to; @throws what it rejects with
 * @example
 * ```ts
 * const engine = await noticeWhileSlow(openModelEngine(bundle, options), print, (s) => `still loading (${s} s)`);
 * ```
 */
export async function noticeWhileSlow<T>(
  work: Promise<T>,
  print: Print,
  line: (seconds: number) => string,
  everyMs = SLOW_LOAD_NOTICE_MS,
): Promise<T> {
  const started = Date.now();
  const timer = setInterval(() => print(line(Math.round((Date.now() - started) / 1000))), everyMs);
  timer.unref();
  try {
    return await work;
  } finally {
    clearInterval(timer);
  }
}
