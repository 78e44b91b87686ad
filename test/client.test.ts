import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  ClientConfigError,
  DecisiondClient,
  DecisiondError,
  keyFilePath,
  renderAnswerLines,
  resolveClientConfig,
  type DecideResponse,
} from "../src/client/index.js";

/** A `node:http` server on 127.0.0.1 that records requests and answers with `handler`. */
class FakeDecisiond {
  readonly requests: {
    method: string;
    url: string;
    authorization: string | undefined;
    body: string;
  }[] = [];
  handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end("{}");
  private server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      this.requests.push({
        method: req.method ?? "",
        url: req.url ?? "",
        authorization: req.headers.authorization,
        body,
      });
      this.handler(req, res);
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

const RESPONSE: DecideResponse = {
  model: "decisiond-1.0-experimental",
  answers: {
    refund: { type: "noul", noul: 0.8 },
    team: {
      type: "choice",
      choice: "billing",
      probabilities: { billing: 0.7, sales: 0.3 },
      confidence: 0.4,
    },
    anger: {
      type: "score",
      score: 1.1,
      legend: { "0": "calm", "1": "annoyed", "2": "furious" },
      probabilities: { "0": 0.2, "1": 0.5, "2": 0.3 },
      confidence: 0.55,
    },
  },
  usage: { input_tokens: 120, output_tokens: 3 },
};

const REQUEST = {
  model: "decisiond-1.0-experimental",
  state: { message: "I was charged twice" },
  questions: { refund: { type: "noul" as const, instructions: "Is this a refund request?" } },
};

describe("key and base URL resolution", () => {
  let home: string;

  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "decisiond-client-"));
  });

  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  async function writeKey(path: string, key: string, mode: number): Promise<void> {
    await mkdir(join(path, ".."), { recursive: true });
    await writeFile(path, key);
    await chmod(path, mode);
  }

  it("refuses a key file with mode 0644 and says how to fix it", async () => {
    const path = keyFilePath({ env: {}, homedir: home });
    expect(path).toBe(join(home, ".config", "decisiond", "api_key"));
    await writeKey(path, "sk-test\n", 0o644);
    let error: unknown;
    try {
      resolveClientConfig({ env: {}, homedir: home });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ClientConfigError);
    const message = (error as Error).message;
    expect(message).toContain(path);
    expect(message).toContain("0644");
    expect(message).toContain(`chmod 600 ${path}`);
  });

  it("refuses group-readable files too, and accepts 0600 and 0400", async () => {
    const path = keyFilePath({ env: {}, homedir: home });
    await writeKey(path, "sk-test", 0o640);
    expect(() => resolveClientConfig({ env: {}, homedir: home })).toThrow(/chmod 600/);
    await chmod(path, 0o600);
    expect(resolveClientConfig({ env: {}, homedir: home })).toMatchObject({
      apiKey: "sk-test",
      keySource: "file",
    });
    await chmod(path, 0o400);
    expect(resolveClientConfig({ env: {}, homedir: home }).apiKey).toBe("sk-test");
  });

  it("reads the key file under XDG_CONFIG_HOME, trimmed", async () => {
    const xdg = join(home, "xdg");
    const env = { XDG_CONFIG_HOME: xdg };
    const path = keyFilePath({ env, homedir: home });
    expect(path).toBe(join(xdg, "decisiond", "api_key"));
    await writeKey(path, "  sk-xdg\n", 0o600);
    expect(resolveClientConfig({ env, homedir: home })).toMatchObject({
      apiKey: "sk-xdg",
      keyFile: path,
    });
  });

  it("prefers SERVICE_API_KEY and then never reads the file", async () => {
    await writeKey(keyFilePath({ env: {}, homedir: home }), "sk-file", 0o644);
    const config = resolveClientConfig({ env: { SERVICE_API_KEY: "sk-env" }, homedir: home });
    expect(config).toMatchObject({ apiKey: "sk-env", keySource: "env" });
  });

  it("has no key when there is no file, and refuses an empty file", async () => {
    expect(resolveClientConfig({ env: {}, homedir: home })).toMatchObject({
      apiKey: undefined,
      keySource: "none",
    });
    await writeKey(keyFilePath({ env: {}, homedir: home }), "\n", 0o600);
    expect(() => resolveClientConfig({ env: {}, homedir: home })).toThrow(/empty/);
  });

  it("takes the base URL from SERVICE_BASE_URL, default http://127.0.0.1:8080", () => {
    expect(resolveClientConfig({ env: {}, homedir: home }).baseUrl).toBe("http://127.0.0.1:8080");
    expect(
      resolveClientConfig({ env: { SERVICE_BASE_URL: "https://d.example/api/" }, homedir: home })
        .baseUrl,
    ).toBe("https://d.example/api");
    expect(() =>
      resolveClientConfig({ env: { SERVICE_BASE_URL: "localhost:8080" }, homedir: home }),
    ).toThrow(ClientConfigError);
  });
});

describe("DecisiondClient", () => {
  const fake = new FakeDecisiond();
  let baseUrl: string;

  beforeAll(async () => {
    baseUrl = await fake.start();
  });

  afterAll(async () => {
    await fake.stop();
  });

  beforeEach(() => {
    fake.requests.length = 0;
  });

  it("posts the request with the key and returns the response as sent", async () => {
    fake.handler = (_req, res) => json(res, 200, RESPONSE, { "x-request-id": "r-1" });
    const client = new DecisiondClient({ baseUrl: `${baseUrl}/`, apiKey: "sk-test" });
    expect(await client.decide(REQUEST)).toEqual(RESPONSE);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]).toMatchObject({
      method: "POST",
      url: "/v1/systemone",
      authorization: "Bearer sk-test",
    });
    expect(JSON.parse(fake.requests[0]!.body)).toEqual(REQUEST);
  });

  it("sends no Authorization header without a key", async () => {
    fake.handler = (_req, res) =>
      json(res, 200, { models: [{ name: "m", description: "d", release_date: "2026-01-01" }] });
    const client = new DecisiondClient({ baseUrl });
    expect(await client.models()).toEqual([
      { name: "m", description: "d", release_date: "2026-01-01" },
    ]);
    expect(fake.requests[0]).toMatchObject({
      method: "GET",
      url: "/v1/models",
      authorization: undefined,
    });
  });

  it("turns a 422 into validation_error with the detail list and a readable message", async () => {
    const detail = [
      {
        loc: ["body", "questions", "a", "criteria"],
        msg: "A score needs 2 to 10 levels",
        type: "too_short",
      },
      { loc: ["body", "state"], msg: "Field required", type: "missing" },
    ];
    fake.handler = (_req, res) => json(res, 422, { detail }, { "x-request-id": "r-422" });
    const error = await new DecisiondClient({ baseUrl }).decide(REQUEST).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DecisiondError);
    expect(error).toMatchObject({
      status: 422,
      errorType: "validation_error",
      requestId: "r-422",
      details: detail,
      message:
        "body.questions.a.criteria: A score needs 2 to 10 levels; body.state: Field required",
    });
  });

  it("turns a 429 into one error with type, message, request id and Retry-After, without retrying", async () => {
    fake.handler = (_req, res) =>
      json(
        res,
        429,
        {
          detail: { error_type: "concurrency_limit", message: "one request at a time per account" },
        },
        { "x-request-id": "r-429", "retry-after": "1" },
      );
    const error = (await new DecisiondClient({ baseUrl })
      .decide(REQUEST)
      .catch((e: unknown) => e)) as DecisiondError;
    expect(error).toBeInstanceOf(DecisiondError);
    expect(error).toMatchObject({
      status: 429,
      errorType: "concurrency_limit",
      message: "one request at a time per account",
      requestId: "r-429",
      retryAfter: 1,
    });
    expect(error.describe()).toBe(
      "HTTP 429 concurrency_limit: one request at a time per account (request id r-429; retry after 1 s)",
    );
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect(fake.requests).toHaveLength(1);
  });

  it("keeps a non-JSON error body whole", async () => {
    const page = `<html>${"bad gateway ".repeat(200)}</html>`;
    fake.handler = (_req, res) => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end(page);
    };
    const error = await new DecisiondClient({ baseUrl }).decide(REQUEST).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 502, errorType: "http_502" });
    expect((error as Error).message).toContain(page);
  });

  it("reports no response as status 0", async () => {
    const closed = new FakeDecisiond();
    const url = await closed.start();
    await closed.stop();
    const error = await new DecisiondClient({ baseUrl: url })
      .decide(REQUEST)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DecisiondError);
    expect(error).toMatchObject({ status: 0, errorType: "connection_error" });
    expect((error as Error).message).toContain(url);
  });

  it("reports an abort as status 0, aborted", async () => {
    fake.handler = () => {
      /* never answers */
    };
    const controller = new AbortController();
    const pending = new DecisiondClient({ baseUrl })
      .decide(REQUEST, { signal: controller.signal })
      .catch((e: unknown) => e);
    setTimeout(() => controller.abort(), 50);
    expect(await pending).toMatchObject({ status: 0, errorType: "aborted" });
  });

  it("renders one line per question", () => {
    expect(renderAnswerLines(RESPONSE)).toEqual([
      "refund (noul): true (P(true) 0.80)",
      "team (choice): billing — confidence 0.40",
      'anger (score): 1.10 of 0–2, most likely 1 "annoyed" — confidence 0.55',
    ]);
  });
});

describe("the light-package boundary", () => {
  it("client/ and mcp/ import nothing from the server side, only protocol/", async () => {
    const root = fileURLToPath(new URL("../src/", import.meta.url));
    const allowedPackages = ["zod", "@modelcontextprotocol/sdk"];
    for (const dir of ["client", "mcp"]) {
      for (const file of (await readdir(join(root, dir))).filter((f) => f.endsWith(".ts"))) {
        const source = await readFile(join(root, dir, file), "utf8");
        for (const match of source.matchAll(/^import\s+(type\s+)?[^;]*?from\s+"([^"]+)"/gms)) {
          const [, , specifier] = match as unknown as [string, string | undefined, string];
          const where = `${dir}/${file} imports ${specifier}`;
          if (specifier.startsWith("node:")) continue;
          if (/^(\.\/[^/]+|\.\.\/(client|protocol)\/.+)$/.test(specifier)) continue;
          expect(
            allowedPackages.some((p) => specifier === p || specifier.startsWith(`${p}/`)),
            where,
          ).toBe(true);
        }
      }
    }
  });
});
