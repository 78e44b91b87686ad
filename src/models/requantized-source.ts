import { rm } from "node:fs/promises";
import type { CatalogueEntry, RequantizedSource } from "./catalogue.js";
import { requantizeGguf } from "./requantize.js";
import { mismatchMessage, type PullJob } from "./source.js";

/**
 * Pulls a catalogue entry and returns the absolute path of its verified file (pull.ts's
 * `ensureEntry` with the options of the pull that needs it).
 */
export type EnsureEntry = (entry: CatalogueEntry) => Promise<string>;

/**
 * The requantize source: `source.from` is pulled with `ensure` (from its own sources, verified,
 * and kept in the cache), its smaller quantized tensors are converted to `source.to` onto
 * `job.partPath` (requantize.ts), and the result is checked against the entry's size and SHA-256.
 *
 * @returns the lower-case hex SHA-256 of the part, equal to `job.entry.sha256`
 * @throws what `ensure` throws (every source of `from` failed); an Error when the conversion
 *   fails or its size or hash differ from the entry's (the part file is then deleted); the
 *   signal's reason when aborted
 */
export async function fromRequantized(
  job: PullJob,
  source: RequantizedSource,
  ensure: EnsureEntry,
): Promise<string> {
  const { entry, partPath } = job;
  const from = await ensure(source.from);
  job.signal?.throwIfAborted();
  job.log(`${entry.file}: converting the tensors of ${source.from.file} to ${source.to}`);
  let ok = false;
  try {
    const made = await requantizeGguf(from, partPath, source.to, job.signal);
    if (made.sizeBytes !== entry.sizeBytes) {
      throw new Error(
        `the conversion wrote ${made.sizeBytes} bytes, the catalogue expects ${entry.sizeBytes}`,
      );
    }
    if (made.sha256 !== entry.sha256) throw new Error(mismatchMessage(entry, made.sha256));
    ok = true;
    return made.sha256;
  } finally {
    if (!ok) await rm(partPath, { force: true });
  }
}
