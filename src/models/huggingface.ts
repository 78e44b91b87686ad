import { rm, stat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import type { HuggingFaceSource } from "./catalogue.js";
import { startProgress, type Progress } from "./progress.js";
import { describeError, mismatchMessage, type PullJob } from "./source.js";
import { sha256File } from "./verify.js";

/** The public Hugging Face hub, used when neither `hfEndpoint` nor `$HF_ENDPOINT` is set. */
export const DEFAULT_HF_ENDPOINT = "https://huggingface.co";

/** Where the hub is and who asks: resolved from `PullOptions` and the environment. */
export interface HubAccess {
  /** Base URL of the hub, no trailing path, e.g. `https://huggingface.co`. */
  endpoint: string;
  /** Bearer token for gated or private repositories; no `Authorization` header when undefined. */
  token: string | undefined;
}

/**
 * The download URL of a Hugging Face source: `<endpoint>/<repo>/resolve/<revision>/<path>`, each
 * path segment percent-encoded.
 *
 * @example
 * ```ts
 * const source = { kind: "huggingface", repo: "o/m", revision: "main", path: "m.gguf" } as const;
 * huggingFaceUrl(source, "https://huggingface.co"); // → "https://huggingface.co/o/m/resolve/main/m.gguf"
 * ```
 */
export function huggingFaceUrl(source: HuggingFaceSource, endpoint: string): string {
  const segments = (s: string) => s.split("/").map(encodeURIComponent).join("/");
  return `${endpoint.replace(/\/+$/, "")}/${segments(source.repo)}/resolve/${encodeURIComponent(
    source.revision,
  )}/${segments(source.path)}`;
}

/**
 * The Hugging Face source: a `HEAD` of the file's URL (status and size, so an unreachable or
 * wrong hub fails in one round trip), then the transfer by node-llama-cpp's model downloader
 * (`createModelDownloader`, on ipull): it retries broken connections, and resumes, within this
 * pull and on the next one, from the last whole 5 MiB chunk kept in `<part>.ipull`. The part is
 * then hashed; a mismatch deletes it, and when the download had started from an earlier run's
 * leftovers it is fetched once more from zero. A part of another size than the catalogue's is
 * deleted and fetched once more from zero too.
 *
 * @param job - the pull; the file lands at `job.partPath`
 * @param access - hub endpoint and token
 * @returns the lower-case hex SHA-256 of the part, equal to `job.entry.sha256`
 * @throws an Error naming the URL and the HTTP status or network error; `no response within N ms`
 *   or `no data within N ms` after `job.timeoutMs` of silence; a `sha256 mismatch` error; the
 *   signal's reason when aborted
 */
export async function fromHuggingFace(
  job: PullJob,
  source: HuggingFaceSource,
  access: HubAccess,
): Promise<string> {
  const url = huggingFaceUrl(source, access.endpoint);
  const headers: Record<string, string> = { "user-agent": "decisiond" };
  if (access.token) headers.authorization = `Bearer ${access.token}`;
  await checkRemote(job, url, headers, access.token !== undefined);
  for (let fromZero = false; ; fromZero = true) {
    const leftovers = (await exists(job.partPath)) || (await exists(`${job.partPath}.ipull`));
    const size = await transfer(job, url, headers);
    if (size !== job.entry.sizeBytes) {
      // The downloader wrote more or less than the file (seen under load): once more from zero.
      await removePart(job);
      const got = `got ${size} bytes, the catalogue expects ${job.entry.sizeBytes}`;
      if (fromZero) throw new Error(`GET ${url}: ${got}`);
      job.log(`${job.entry.file}: ${got}; starting over`);
      continue;
    }
    const actual = await sha256File(job.partPath, job.signal);
    if (actual === job.entry.sha256) return actual;
    await removePart(job);
    if (fromZero || !leftovers) throw new Error(mismatchMessage(job.entry, actual));
    job.log(
      `${job.entry.file}: ${mismatchMessage(job.entry, actual)} after resuming; starting over`,
    );
  }
}

/** A response's status, with a hint about HF_TOKEN when access was refused. */
function statusOf(res: Response, tokenSent: boolean): string {
  const hint =
    res.status === 401 || res.status === 403
      ? tokenSent
        ? " (HF_TOKEN was sent; does it have access to this repository?)"
        : " (set HF_TOKEN for gated or private repositories)"
      : "";
  return `HTTP ${res.status} ${res.statusText}${hint}`;
}

/**
 * Fails fast, with the status, when the hub does not serve the file at the catalogue's size, or
 * says it serves byte ranges and does not.
 */
async function checkRemote(
  job: PullJob,
  url: string,
  headers: Record<string, string>,
  tokenSent: boolean,
): Promise<void> {
  const guard = silenceGuard(job);
  try {
    guard.arm("no response");
    let res: Response;
    try {
      res = await guard.race(fetch(url, { method: "HEAD", headers, signal: guard.signal }));
    } catch (err) {
      throw new Error(`HEAD ${url}: ${describeError(guard.reason() ?? err)}`);
    }
    if (!res.ok) throw new Error(`HEAD ${url}: ${statusOf(res, tokenSent)}`);
    // Content-Length counts encoded bytes; only compare it when the body would be sent as is.
    const encoded = (res.headers.get("content-encoding") ?? "identity") !== "identity";
    const length = Number(res.headers.get("content-length") ?? NaN);
    if (!encoded && Number.isFinite(length) && length !== job.entry.sizeBytes) {
      throw new Error(
        `HEAD ${url}: the hub has ${length} bytes, the catalogue ${job.entry.sizeBytes}`,
      );
    }
    // The downloader (ipull) fetches a file in parallel byte ranges when the hub says it takes
    // them. A hub or proxy that says so but answers a range with the whole file fails it with a
    // rejection nobody handles, which ends the process before the next source is tried: ask for
    // one byte first.
    const ranges = /\bbytes\b/i.test(res.headers.get("accept-ranges") ?? "");
    if (ranges && job.entry.sizeBytes > 1) {
      guard.arm("no response");
      let ranged: Response;
      try {
        const init = { headers: { ...headers, range: "bytes=0-0" }, signal: guard.signal };
        ranged = await guard.race(fetch(url, init));
      } catch (err) {
        throw new Error(`GET ${url} (bytes 0-0): ${describeError(guard.reason() ?? err)}`);
      }
      await ranged.body?.cancel().catch(() => undefined);
      if (ranged.status === 200)
        throw new Error(
          `GET ${url} (bytes 0-0): HTTP 200, not 206: the hub says it serves byte ranges (Accept-Ranges: bytes) but answers with the whole file, and the downloader needs ranges`,
        );
      if (ranged.status !== 206)
        throw new Error(`GET ${url} (bytes 0-0): ${statusOf(ranged, tokenSent)}`);
    }
  } finally {
    guard.dispose();
  }
}

/**
 * Runs node-llama-cpp's downloader into `job.partPath`, bounded by `job.timeoutMs` of silence.
 * @returns the part's size in bytes once the downloader is done
 */
async function transfer(
  job: PullJob,
  url: string,
  headers: Record<string, string>,
): Promise<number> {
  const { createModelDownloader } = await import("node-llama-cpp");
  letIpullStraysPass();
  const guard = silenceGuard(job);
  // Set once the downloader says how much an earlier run left; updated from its progress events.
  const shown: { progress?: Progress } = {};
  guard.arm("no response");
  const downloader = await guard
    .race(
      createModelDownloader({
        modelUri: url,
        dirPath: dirname(job.partPath),
        fileName: basename(job.partPath),
        headers,
        skipExisting: true,
        deleteTempFileOnCancel: false,
        onProgress: ({ downloadedSize }) => {
          guard.arm("no data");
          shown.progress?.update(downloadedSize);
        },
      }),
    )
    .catch((err: unknown) => {
      guard.dispose();
      throw new Error(`GET ${url}: ${describeError(guard.reason() ?? err)}`);
    });
  const start = downloader.downloadedSize;
  if (start > 0 && start < job.entry.sizeBytes) {
    job.log(`${job.entry.file}: resuming at byte ${start} of ${job.entry.sizeBytes}`);
  }
  const progress = startProgress(job, job.entry.file, start);
  shown.progress = progress;
  try {
    guard.arm("no data");
    await guard.race(downloader.download({ signal: guard.signal }));
  } catch (err) {
    await downloader.cancel({ deleteTempFile: false }).catch(() => undefined);
    throw new Error(`GET ${url}: ${describeError(guard.reason() ?? err)}`);
  } finally {
    progress.stop();
    guard.dispose();
  }
  return (await stat(job.partPath)).size;
}

/** Whether {@link letIpullStraysPass} has set its listener. */
let straysPass = false;

/**
 * When one chunk of a transfer fails (a hub or proxy that answers a later byte range with the
 * whole file), ipull rejects the transfer, which {@link transfer} handles, and leaves the other
 * chunks' rejections unhandled, which would end the process before the next source is tried.
 * From the first transfer on, a rejection nobody handles that was raised inside ipull is let
 * pass; any other still ends the process, as Node's default does.
 */
function letIpullStraysPass(): void {
  if (straysPass) return;
  straysPass = true;
  process.on("unhandledRejection", (reason) => {
    if (reason instanceof Error && /[\\/]ipull[\\/]/.test(reason.stack ?? "")) {
      process.emitWarning(`a download chunk failed after its transfer did: ${reason.message}`, {
        code: "DECISIOND_IPULL_STRAY",
      });
      return;
    }
    // Ended as Node's default would, where no other listener takes it.
    if (process.listenerCount("unhandledRejection") === 1) throw reason;
  });
}

/**
 * An abort signal that fires when the caller's signal does, or when `arm`'s timer runs out
 * before it is armed again; `race` makes a promise reject then, even one that ignores signals.
 */
function silenceGuard(job: PullJob) {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const onAbort = () => controller.abort(job.signal?.reason);
  job.signal?.addEventListener("abort", onAbort, { once: true });
  if (job.signal?.aborted) onAbort();
  const fired = new Promise<never>((_, reject) => {
    controller.signal.addEventListener("abort", () => reject(controller.signal.reason), {
      once: true,
    });
  });
  fired.catch(() => undefined);
  return {
    signal: controller.signal,
    arm(what: string): void {
      clearTimeout(timer);
      timer = setTimeout(
        () => controller.abort(new Error(`${what} within ${job.timeoutMs} ms`)),
        job.timeoutMs,
      );
    },
    race<T>(promise: Promise<T>): Promise<T> {
      return Promise.race([promise, fired]);
    },
    /** The caller's abort reason, or the timeout's; undefined while neither fired. */
    reason(): unknown {
      if (job.signal?.aborted) throw job.signal.reason;
      return controller.signal.aborted ? controller.signal.reason : undefined;
    },
    dispose(): void {
      clearTimeout(timer);
      job.signal?.removeEventListener("abort", onAbort);
    },
  };
}

async function removePart(job: PullJob): Promise<void> {
  await rm(job.partPath, { force: true });
  await rm(`${job.partPath}.ipull`, { force: true });
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
