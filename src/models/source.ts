import type { CatalogueEntry } from "./catalogue.js";

/**
 * One pull of one catalogue file, as a source sees it: where the download goes and how to report.
 * Built by `pullEntry` and handed to each source in turn.
 */
export interface PullJob {
  /** The file being pulled; its `sha256` and `sizeBytes` are what the download must match. */
  entry: CatalogueEntry;
  /** Absolute path the verified file is renamed to. */
  finalPath: string;
  /** Absolute path a source writes the whole file to, `<finalPath>.part`, before it is checked. */
  partPath: string;
  /** Where progress and failure lines go, one line per call, no trailing newline. */
  log: (line: string) => void;
  /** Draw a `cli-progress` bar when stderr is a TTY (else a line per 10 %). */
  progress: boolean;
  /** Cancels the pull; sources reject with its reason. */
  signal: AbortSignal | undefined;
  /** Longest wait, in milliseconds, for a response or for the next bytes of one. */
  timeoutMs: number;
}

/**
 * One line for an error, with the causes undici hides in `cause`, at most three deep, e.g.
 * `fetch failed (getaddrinfo ENOTFOUND huggingface.co)`.
 *
 * @param err - anything thrown
 * @returns the message and its causes' messages and error codes
 */
export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  let message = err.message;
  let cause: unknown = err.cause;
  for (let depth = 0; cause instanceof Error && depth < 3; depth++) {
    const code = (cause as NodeJS.ErrnoException).code;
    message += ` (${cause.message}${code && !cause.message.includes(code) ? `, ${code}` : ""})`;
    cause = cause.cause;
  }
  return message;
}

/**
 * The reason given when a download's hash is not the catalogue's.
 *
 * @param entry - the file pulled
 * @param actual - lower-case hex SHA-256 of what was downloaded
 */
export function mismatchMessage(entry: CatalogueEntry, actual: string): string {
  return `sha256 mismatch: got ${actual}, expected ${entry.sha256}`;
}
