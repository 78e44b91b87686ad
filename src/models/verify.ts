import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile, rename, rm, stat, writeFile } from "node:fs/promises";

/**
 * What `<file>.verified.json` records about a model file whose SHA-256 was checked: enough to
 * tell on the next start, without reading the file again, whether it is still the same file.
 */
export interface VerifiedSidecar {
  /** The file's size in bytes when it was hashed. */
  size: number;
  /** The file's modification time (`fs.Stats.mtimeMs`, milliseconds since the epoch) when hashed. */
  mtimeMs: number;
  /** Lower-case hex SHA-256 of the file's content. */
  sha256: string;
}

/** The sidecar's path for a model file: `<file>.verified.json`, beside it. */
export function sidecarPath(file: string): string {
  return `${file}.verified.json`;
}

/**
 * SHA-256 of a file's content, read as a stream (64 KiB chunks), so a file of hundreds of MB
 * never sits in memory.
 *
 * @returns lower-case hex digest (64 characters).
 * @throws the `fs` error (e.g. `ENOENT`) when the file cannot be read, or `signal`'s reason when
 *   aborted.
 */
export async function sha256File(file: string, signal?: AbortSignal): Promise<string> {
  const hash = createHash("sha256");
  const stream = createReadStream(file, { highWaterMark: 1 << 16, signal });
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/**
 * Records that `file` was verified: stats it now and writes the sidecar atomically (a temporary
 * file renamed over the old sidecar).
 *
 * @param sha256 - the digest the caller computed (or checked) for the file's current content.
 * @returns the sidecar that was written.
 * @throws the `fs` error when the file cannot be stat'ed or the sidecar cannot be written.
 */
export async function writeSidecar(file: string, sha256: string): Promise<VerifiedSidecar> {
  const st = await stat(file);
  const sidecar: VerifiedSidecar = { size: st.size, mtimeMs: st.mtimeMs, sha256 };
  const target = sidecarPath(file);
  const tmp = `${target}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(sidecar) + "\n");
  await rename(tmp, target);
  return sidecar;
}

/**
 * Reads `<file>.verified.json`.
 *
 * @returns the sidecar, or `undefined` when it is missing, unreadable or not of the expected shape
 *   (a damaged sidecar only costs one re-hash, so it is never an error).
 */
export async function readSidecar(file: string): Promise<VerifiedSidecar | undefined> {
  try {
    const parsed: unknown = JSON.parse(await readFile(sidecarPath(file), "utf8"));
    if (typeof parsed !== "object" || parsed === null) return undefined;
    const { size, mtimeMs, sha256 } = parsed as Record<string, unknown>;
    if (typeof size !== "number" || typeof mtimeMs !== "number" || typeof sha256 !== "string") {
      return undefined;
    }
    return { size, mtimeMs, sha256 };
  } catch {
    return undefined;
  }
}

/** Deletes a model file's sidecar if there is one. */
export async function removeSidecar(file: string): Promise<void> {
  await rm(sidecarPath(file), { force: true });
}

/** How {@link checkFile} came to its answer. */
export type CheckResult =
  /** No file at that path. */
  | { state: "missing" }
  /** The sidecar matched the file's size and mtime and the expected digest; nothing was read. */
  | { state: "verified"; via: "sidecar" }
  /** The file was hashed and matched (the sidecar has been refreshed). */
  | { state: "verified"; via: "hash" }
  /** The file was hashed and did not match. */
  | { state: "mismatch"; actualSha256: string; size: number };

/**
 * Checks a model file against the digest and size it should have.
 *
 * With `trustSidecar` (the fast path used at start-up), a sidecar whose size, mtime and digest
 * all match stands for a hash; otherwise the file is read and hashed, and on a match the sidecar
 * is rewritten. A file of the wrong size is reported as a mismatch without being hashed only when
 * the size alone proves it (`actualSha256` is then the empty string).
 *
 * @param expectedSha256 - lower-case hex SHA-256.
 * @param expectedSize - size in bytes.
 * @throws `fs` errors other than `ENOENT`, or `signal`'s reason when aborted.
 */
export async function checkFile(
  file: string,
  expectedSha256: string,
  expectedSize: number,
  options: { trustSidecar: boolean; signal?: AbortSignal },
): Promise<CheckResult> {
  let st;
  try {
    st = await stat(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { state: "missing" };
    throw err;
  }
  if (st.size !== expectedSize) return { state: "mismatch", actualSha256: "", size: st.size };
  if (options.trustSidecar) {
    const sidecar = await readSidecar(file);
    if (
      sidecar &&
      sidecar.size === st.size &&
      sidecar.mtimeMs === st.mtimeMs &&
      sidecar.sha256 === expectedSha256
    ) {
      return { state: "verified", via: "sidecar" };
    }
  }
  const actual = await sha256File(file, options.signal);
  if (actual !== expectedSha256) return { state: "mismatch", actualSha256: actual, size: st.size };
  await writeSidecar(file, actual);
  return { state: "verified", via: "hash" };
}
