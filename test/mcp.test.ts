import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Answer, DecideResponse } from "../src/client/index.js";
import type { Service } from "../src/service/build.js";
import { startTestService } from "./support/service.js";

// `npm test` builds dist/ (tsc) before vitest runs; the MCP server runs as the real command.
const CLI = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));

interface Session {
  client: Client;
  stderr: () => string;
  close(): Promise<void>;
}

/** Spawns `decisiond mcp` with a clean HOME (no key file unless written) and connects a client. */
async function openSession(env: Record<string, string>): Promise<Session> {
  if (!existsSync(CLI))
    throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "mcp"],
    env,
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const client = new Client({ name: "decisiond-test", version: "0.0.0" });
  await client.connect(transport);
  return { client, stderr: () => stderr, close: () => client.close() };
}

async function tempHome(): Promise<{ home: string; env: Record<string, string> }> {
  const home = await mkdtemp(join(tmpdir(), "decisiond-mcp-"));
  return { home, env: { HOME: home, XDG_CONFIG_HOME: join(home, ".config") } };
}

/** The structured answer to question `id`, checked to be of `type`. */
function answerOf<T extends Answer["type"]>(
  result: CallToolResult,
  id: string,
  type: T,
): Extract<Answer, { type: T }> {
  const answer = (result.structuredContent as DecideResponse | undefined)?.answers[id];
  expect(answer?.type).toBe(type);
  return answer as Extract<Answer, { type: T }>;
}

function text(result: CallToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

describe("decisiond mcp against the real model", () => {
  let service: Service;
  let session: Session;
  let home: string;

  beforeAll(async () => {
    service = await startTestService();
    const temp = await tempHome();
    home = temp.home;
    session = await openSession({ ...temp.env, SERVICE_BASE_URL: service.url });
  });

  afterAll(async () => {
    await session?.close();
    await service?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it("lists one tool, decide, with input and output schemas", async () => {
    const { tools } = await session.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(["decide"]);
    const decide = tools[0]!;
    expect(decide.inputSchema.required).toEqual(expect.arrayContaining(["state", "questions"]));
    expect(Object.keys(decide.inputSchema.properties ?? {})).toEqual(
      expect.arrayContaining(["state", "questions", "image", "video", "model"]),
    );
    expect(decide.outputSchema?.required).toEqual(
      expect.arrayContaining(["model", "answers", "usage"]),
    );
  });

  const state = { message: "You charged my card twice. I want my money back now!" };

  it("answers a noul question", async () => {
    const result = (await session.client.callTool({
      name: "decide",
      arguments: {
        state,
        questions: { refund: { type: "noul", instructions: "Is this a refund request?" } },
      },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    const content = result.structuredContent as DecideResponse;
    expect(content.model).toBe("decisiond-1.0-experimental");
    const answer = answerOf(result, "refund", "noul");
    expect(answer).toEqual({ type: "noul", noul: expect.any(Number) });
    expect(answer.noul).toBeGreaterThanOrEqual(0);
    expect(answer.noul).toBeLessThanOrEqual(1);
    expect(content.usage).toEqual({
      input_tokens: expect.any(Number),
      output_tokens: expect.any(Number),
    });
    expect(text(result)).toMatch(/^refund \(noul\): (true|false) \(P\(true\) \d\.\d\d\)$/);
  });

  it("answers a choice question", async () => {
    const result = (await session.client.callTool({
      name: "decide",
      arguments: {
        state,
        questions: {
          team: {
            type: "choice",
            instructions: "Which team should handle this?",
            criteria: { billing: "payments and refunds", technical: null, sales: "new purchases" },
          },
        },
      },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    const answer = answerOf(result, "team", "choice");
    expect(["billing", "technical", "sales"]).toContain(answer.choice);
    expect(Object.keys(answer.probabilities).sort()).toEqual(["billing", "sales", "technical"]);
    const sum = Object.values(answer.probabilities as Record<string, number>).reduce(
      (a, b) => a + b,
      0,
    );
    expect(sum).toBeCloseTo(1, 5);
    expect(answer.confidence).toBeGreaterThanOrEqual(0);
    expect(text(result)).toMatch(
      /^team \(choice\): (billing|technical|sales) — confidence \d\.\d\d$/,
    );
  });

  it("answers a score question", async () => {
    const result = (await session.client.callTool({
      name: "decide",
      arguments: {
        state,
        questions: {
          anger: {
            type: "score",
            instructions: "How angry is the customer?",
            criteria: ["calm", "annoyed", "furious"],
          },
        },
      },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    const answer = answerOf(result, "anger", "score");
    expect(answer).toMatchObject({
      type: "score",
      legend: { "0": "calm", "1": "annoyed", "2": "furious" },
    });
    expect(answer.score).toBeGreaterThanOrEqual(0);
    expect(answer.score).toBeLessThanOrEqual(2);
    expect(Object.keys(answer.probabilities).sort()).toEqual(["0", "1", "2"]);
    expect(text(result)).toMatch(
      /^anger \(score\): \d\.\d\d of 0–2, most likely \d ".+" — confidence \d\.\d\d$/,
    );
  });

  it("takes null where the API does, and leaves an unknown criterion to the server's 422", async () => {
    const result = (await session.client.callTool({
      name: "decide",
      arguments: {
        state,
        questions: {
          refund: { type: "noul", instructions: null, criteria: { true: "a refund", false: null } },
          other: { type: "noul", instructions: "Is it about a refund?", criteria: null },
          anger: { type: "score", criteria: ["calm", null, "furious"] },
        },
      },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(answerOf(result, "refund", "noul").noul).toBeGreaterThanOrEqual(0);
    expect(answerOf(result, "anger", "score").legend).toMatchObject({
      "0": "calm",
      "2": "furious",
    });
    const unknown = (await session.client.callTool({
      name: "decide",
      arguments: {
        state,
        questions: { refund: { type: "noul", instructions: "Refund?", criteria: { yes: "a" } } },
      },
    })) as CallToolResult;
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toContain("HTTP 422 validation_error: body.questions.refund.criteria");
  });

  it("turns the server's 422 into a tool error with its message", async () => {
    const result = (await session.client.callTool({
      name: "decide",
      arguments: { state, questions: { anger: { type: "score", criteria: ["only one level"] } } },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toBeUndefined();
    expect(text(result)).toContain("HTTP 422 validation_error: body.questions.anger.criteria");
  });
});

describe("decisiond mcp against a fake server", () => {
  let server: Server;
  let baseUrl: string;
  let requests = 0;
  let home: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests++;
      req.resume();
      req.on("end", () => {
        res.writeHead(429, {
          "content-type": "application/json",
          "retry-after": "1",
          "x-request-id": "req-429-test",
        });
        res.end(
          JSON.stringify({
            detail: {
              error_type: "concurrency_limit",
              message: "this account already has a request in flight",
            },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const temp = await tempHome();
    home = temp.home;
    env = { ...temp.env, SERVICE_BASE_URL: baseUrl };
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(home, { recursive: true, force: true });
  });

  const questions = { refund: { type: "noul", instructions: "Is this a refund request?" } };

  it("reports a 429 as one tool error after exactly one HTTP request", async () => {
    requests = 0;
    const session = await openSession(env);
    try {
      const result = (await session.client.callTool({
        name: "decide",
        arguments: { state: "charged twice", questions },
      })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toBeUndefined();
      const message = text(result);
      expect(message).toContain(
        "HTTP 429 concurrency_limit: this account already has a request in flight (request id req-429-test; retry after 1 s)",
      );
      const fields = JSON.parse(message.split("\n")[1]!);
      expect(fields).toEqual({
        status: 429,
        error_type: "concurrency_limit",
        message: "this account already has a request in flight",
        request_id: "req-429-test",
        retry_after: 1,
      });
      // Longer than Retry-After: a retry would have come by now.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(requests).toBe(1);
    } finally {
      await session.close();
    }
  });

  it("refuses an image with a video without a request", async () => {
    requests = 0;
    const session = await openSession(env);
    try {
      const result = (await session.client.callTool({
        name: "decide",
        arguments: {
          state: "x",
          questions,
          image: "data:image/png;base64,iVBORw0KGgo=",
          video: "data:video/mp4;base64,AAAAIGZ0eXA=",
        },
      })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(text(result)).toContain("one image or one video, not both");
      expect(requests).toBe(0);
    } finally {
      await session.close();
    }
  });

  it("refuses an image URL, saying decisiond fetches nothing, without a request", async () => {
    requests = 0;
    const session = await openSession(env);
    try {
      const call = session.client.callTool({
        name: "decide",
        arguments: { state: "x", questions, image: "https://example.com/cat.png" },
      });
      // The SDK answers a tool's invalid arguments as an error result or a thrown McpError.
      const said = await call.then(
        (result) => ((result as CallToolResult).isError ? text(result as CallToolResult) : ""),
        (error: Error) => error.message,
      );
      expect(said).toContain("decisiond fetches nothing: send the image inline");
      expect(requests).toBe(0);
    } finally {
      await session.close();
    }
  });

  it("refuses a key file with mode 0644, saying how to fix it, without a request", async () => {
    requests = 0;
    const keyFile = join(home, ".config", "decisiond", "api_key");
    await mkdir(join(home, ".config", "decisiond"), { recursive: true });
    await writeFile(keyFile, "sk-test\n");
    await chmod(keyFile, 0o644);
    const session = await openSession(env);
    try {
      const result = (await session.client.callTool({
        name: "decide",
        arguments: { state: "x", questions },
      })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(text(result)).toContain(`chmod 600 ${keyFile}`);
      expect(session.stderr()).toContain(`chmod 600 ${keyFile}`);
      expect(requests).toBe(0);
    } finally {
      await session.close();
      await rm(keyFile);
    }
  });

  it("refuses __proto__ as a question or option id, as the API does, without a request", async () => {
    // probe33: the record dropped it, and the call went out with no questions (a 422 for 0).
    requests = 0;
    const session = await openSession(env);
    try {
      for (const [questions, said] of [
        ['{"__proto__": {"type": "noul", "instructions": "Is it?"}}', "a question id"],
        [
          '{"q": {"type": "choice", "instructions": "Which?", "criteria": {"__proto__": "x", "b": "y"}}}',
          "an option id",
        ],
      ] as const) {
        const call = session.client.callTool({
          name: "decide",
          arguments: { state: "x", questions: JSON.parse(questions) as unknown },
        });
        const message = await call.then(
          (result) => ((result as CallToolResult).isError ? text(result as CallToolResult) : ""),
          (error: Error) => error.message,
        );
        expect(message).toContain(`"__proto__" cannot be ${said}`);
      }
      expect(requests).toBe(0);
    } finally {
      await session.close();
    }
  });

  it("answers a call piped in before its input ends, then exits", async () => {
    // probe33: `printf '<tools/call>\n' | decisiond mcp` exited 0 with no answer and no request.
    requests = 0;
    const child = spawn(process.execPath, [CLI, "mcp"], { env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    const lines = [
      {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "pipe", version: "0" },
        },
      },
      { jsonrpc: "2.0", method: "notifications/initialized" },
      {
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "decide", arguments: { state: "charged twice", questions } },
      },
    ];
    child.stdin.end(lines.map((line) => JSON.stringify(line)).join("\n") + "\n");
    const [code] = (await once(child, "exit")) as [number | null];
    expect(code).toBe(0);
    const answers = stdout
      .trim()
      .split("\n")
      .map(
        (line) =>
          JSON.parse(line) as {
            id: number;
            result: CallToolResult;
          },
      );
    expect(answers.map((answer) => answer.id)).toEqual([1, 2]);
    expect(answers[1]!.result.isError).toBe(true);
    expect(text(answers[1]!.result)).toContain("HTTP 429 concurrency_limit");
    expect(requests).toBe(1);
  });
});
