import cliProgress from "cli-progress";
import type { PullJob } from "./source.js";

/** A progress display for one download. */
export interface Progress {
  /** Sets the number of bytes of the file now on disk. */
  update(bytes: number): void;
  /** Ends the display (removes the bar's cursor handling); idempotent. */
  stop(): void;
}

/**
 * Starts a progress display for `job`: a `cli-progress` bar on stderr when `job.progress` is set
 * and stderr is a TTY, else one `job.log` line each time another tenth of the file is on disk.
 *
 * @param job - the pull; `job.entry.sizeBytes` is the total
 * @param label - what the bar or the lines are prefixed with, e.g. the file name
 * @param startBytes - bytes already on disk (a resumed download), so no line repeats
 */
export function startProgress(job: PullJob, label: string, startBytes: number): Progress {
  const total = job.entry.sizeBytes;
  const mb = (n: number) => (n / 1_048_576).toFixed(1);
  if (job.progress && process.stderr.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format: `${label} [{bar}] {percentage}% | {done}/{all} MB | ETA {eta_formatted}`,
        stream: process.stderr,
        hideCursor: true,
        etaBuffer: 50,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total, startBytes, { done: mb(startBytes), all: mb(total) });
    let stopped = false;
    return {
      update: (bytes) => bar.update(bytes, { done: mb(bytes), all: mb(total) }),
      stop: () => {
        if (!stopped) bar.stop();
        stopped = true;
      },
    };
  }
  let lastDecile = Math.floor((startBytes / total) * 10);
  return {
    update(bytes) {
      const decile = Math.floor((bytes / total) * 10);
      if (decile > lastDecile) {
        lastDecile = decile;
        job.log(`${label}: ${Math.min(decile * 10, 100)}% (${mb(bytes)}/${mb(total)} MB)`);
      }
    },
    stop() {},
  };
}
