import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseQuestionSpec } from "../src/cli/ask.js";
import type { Service } from "../src/service/build.js";
import { startTestService } from "./support/service.js";

// `npm test` builds dist/ (tsc) before vitest runs; `ask` runs as the real command from a shell.
const CLI = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let home: string;

/** Runs `decisiond ask ...` with a clean HOME (no key file unless written) and `env` added. */
function ask(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return decisiond(["ask", ...args], env);
}

/** Runs `decisiond ...` with a clean HOME and `env` added. */
function decisiond(args: string[], env: Record<string, string> = {}): Promise<Run> {
  if (!existsSync(CLI))
    throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      {
        env: {
          PATH: process.env.PATH ?? "",
          HOME: home,
          XDG_CONFIG_HOME: join(home, ".config"),
          ...env,
        },
        timeout: 120_000,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), "decisiond-ask-"));
});

afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

/** A response for the fake server to send. */
const CANNED = {
  model: "my-model",
  answers: {
    team: {
      type: "choice",
      choice: "billing",
      probabilities: { billing: 0.7, sales: 0.3 },
      confidence: 0.4,
    },
  },
  usage: { input_tokens: 10, output_tokens: 1 },
};

describe("decisiond ask against the real model", () => {
  let service: Service;

  beforeAll(async () => {
    service = await startTestService();
  });

  afterAll(async () => {
    await service?.close();
  });

  const state = ["--state", '{"message":"You charged my card twice. Refund me now!"}'];

  it("prints a table", async () => {
    const run = await ask(
      [
        ...state,
        "--noul",
        "refund=Is this a refund request?",
        "--choice",
        "team=Which team should handle it?:billing=payments and refunds,technical,sales",
        "--score",
        "anger=How angry is the customer?:calm,annoyed,furious",
      ],
      { SERVICE_BASE_URL: service.url },
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const lines = run.stdout.split("\n");
    expect(lines.some((l) => /question.*answer.*confidence.*top probabilities/.test(l))).toBe(true);
    // Rows in command-line order.
    const rows = ["refund (noul)", "team (choice)", "anger (score)"].map((id) =>
      lines.findIndex((l) => l.includes(id)),
    );
    expect(rows.every((i) => i > 0)).toBe(true);
    expect([...rows].sort((a, b) => a - b)).toEqual(rows);
    expect(lines[rows[1]!]).toMatch(/(billing|technical|sales) +│ \d\.\d\d/);
    expect(run.stdout).toMatch(
      /model decisiond-1\.0-experimental; input tokens \d+, output tokens 3/,
    );
  });

  it("prints the response with --json", async () => {
    const run = await ask(
      [
        ...state,
        "--noul",
        "refund=Is this a refund request?",
        "--score",
        "anger=How angry?:calm,furious",
        "--json",
      ],
      { SERVICE_BASE_URL: service.url },
    );
    expect(run.code).toBe(0);
    const body = JSON.parse(run.stdout);
    expect(body.model).toBe("decisiond-1.0-experimental");
    expect(body.answers.refund).toEqual({ type: "noul", noul: expect.any(Number) });
    expect(body.answers.anger).toMatchObject({
      type: "score",
      legend: { "0": "calm", "1": "furious" },
    });
    expect(body.usage.output_tokens).toBe(2);
  });

  it("exits 1 with the server's message on a 422", async () => {
    const run = await ask([...state, "--noul", "x=Is it?", "--model", "no-such-model"], {
      SERVICE_BASE_URL: service.url,
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(
      /HTTP 422 validation_error: body\.model: model "no-such-model" is not served here.*request id/,
    );
  });
});

describe("decisiond ask without a model", () => {
  let server: Server;
  let baseUrl: string;
  let requests = 0;
  const bodies: unknown[] = [];
  let answerOk = false;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests++;
      let body = "";
      req.on("data", (chunk: Buffer) => (body += chunk.toString()));
      req.on("end", () => {
        bodies.push(JSON.parse(body));
        if (answerOk) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify(CANNED));
          return;
        }
        res.writeHead(429, {
          "content-type": "application/json",
          "retry-after": "1",
          "x-request-id": "req-ask-429",
        });
        res.end(
          JSON.stringify({
            detail: { error_type: "concurrency_limit", message: "one request at a time" },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("exits 1 on a server error, with status, type, message and request id on stderr", async () => {
    requests = 0;
    const run = await ask(["--state", '"hi"', "--noul", "x=Is it?"], { SERVICE_BASE_URL: baseUrl });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      "HTTP 429 concurrency_limit: one request at a time (request id req-ask-429; retry after 1 s)",
    );
    expect(requests).toBe(1);
  });

  it("builds the request from --questions, the flags in order, DECISIOND_MODEL and --image", async () => {
    bodies.length = 0;
    answerOk = true;
    const image = join(home, "pixel.png");
    await writeFile(image, Buffer.from("89504e470d0a1a0a", "hex"));
    try {
      const run = await ask(
        [
          "--state",
          '{"message":"hi"}',
          "--questions",
          '{"first":{"type":"noul","criteria":{"true":"yes"}}}',
          "--score",
          "anger=How angry?:calm,furious",
          "--noul",
          "refund=Refund?",
          "--choice",
          "team=:billing=payments,sales",
          "--image",
          image,
        ],
        { SERVICE_BASE_URL: baseUrl, DECISIOND_MODEL: "my-model" },
      );
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      expect(bodies).toHaveLength(1);
      const body = bodies[0] as Record<string, unknown>;
      expect(body).toEqual({
        model: "my-model",
        state: { message: "hi" },
        questions: {
          first: { type: "noul", criteria: { true: "yes" } },
          anger: { type: "score", instructions: "How angry?", criteria: ["calm", "furious"] },
          refund: { type: "noul", instructions: "Refund?" },
          team: { type: "choice", criteria: { billing: "payments", sales: null } },
        },
        images: ["data:image/png;base64,iVBORw0KGgo="],
      });
      expect(Object.keys(body.questions as object)).toEqual(["first", "anger", "refund", "team"]);
      expect(run.stdout).toContain("│ team (choice) │ billing");
      expect(run.stdout).toContain("billing 0.70, sales 0.30");
    } finally {
      answerOk = false;
    }
  });

  it("sends ids named like Object's own properties as plain keys", async () => {
    bodies.length = 0;
    answerOk = true;
    try {
      const run = await ask(
        [
          "--state",
          '"I want a refund"',
          "--questions",
          '{"__proto__":{"type":"noul","instructions":"Refund?"}}',
          "--noul",
          "toString=Is this a refund request?",
          "--choice",
          "hasOwnProperty=Which team?:constructor,billing",
        ],
        { SERVICE_BASE_URL: baseUrl },
      );
      expect(run.stderr).not.toMatch(/given twice|no questions/);
      expect(bodies).toHaveLength(1);
      const questions = (bodies[0] as { questions: Record<string, unknown> }).questions;
      expect(Object.keys(questions)).toEqual(["__proto__", "toString", "hasOwnProperty"]);
      expect(questions.hasOwnProperty).toEqual({
        type: "choice",
        instructions: "Which team?",
        criteria: { constructor: null, billing: null },
      });
    } finally {
      answerOk = false;
    }
  });

  it("exits 2 on usage errors, without a request", async () => {
    requests = 0;
    const env = { SERVICE_BASE_URL: baseUrl };
    const cases: [string[], RegExp][] = [
      [["--noul", "x=Is it?"], /--state is required/],
      [
        ["--state", "not json", "--noul", "x=Is it?"],
        /--state: the value is not JSON.*'"not json"'/,
      ],
      [["--state", "1"], /no questions/],
      [["--state", "1", "--choice", "team=Which?"], /--choice expects id=question:opt1,opt2/],
      [["--state", "1", "--choice", "team=Which?:a"], /at least 2 options/],
      [["--state", "1", "--noul", "x=a", "--noul", "x=b"], /"x" is given twice/],
      [["--state", "1", "--noul", "x=a", "--bogus"], /unknown option '--bogus'/],
      [["--state", "@/no/such/file", "--noul", "x=a"], /cannot read \/no\/such\/file/],
    ];
    for (const [args, message] of cases) {
      const run = await ask(args, env);
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
      expect(run.stderr).toMatch(message);
    }
    expect(requests).toBe(0);
  });

  it("every command exits 2 on a flag or argument it refuses, 0 for help", async () => {
    const env = { DECISIOND_HOME: join(home, "decisiond") };
    for (const args of [
      ["keys"],
      ["keys", "create"],
      ["keys", "create", "--account", "a b"],
      ["keys", "revoke", "nosuch"],
      ["usage", "--bogus"],
      ["serve", "--port", "abc"],
      ["accounts", "set-allowance", "--period", "week"],
      ["accounts", "set-allowance", "acme", "--none", "--tokens", "5"],
      ["serve", "--auth", "off", "--host", "0.0.0.0"],
      ["eval"],
      ["nosuchcommand"],
    ]) {
      const run = await decisiond(args, env);
      expect(run.code, `${args.join(" ")}: ${run.stderr}`).toBe(2);
      expect(run.stderr).not.toBe("");
    }
    expect((await decisiond(["keys", "--help"], env)).code).toBe(0);
    // What it quotes back cannot reorder or drive the terminal.
    const label = await decisiond(["keys", "create", "--account", "a", "--label", "x\u202ey"], env);
    expect(label.code).toBe(2);
    expect(label.stderr).toContain("'x\\u202ey'");
    const account = await decisiond(["keys", "create", "--account", "a\u202eb\u0007"], env);
    expect(account.stderr).toContain('"a\\u202eb\\u0007"');
    expect(account.stderr.includes("\u202e") || account.stderr.includes("\u0007")).toBe(false);
  });

  it("refuses a key file with mode 0644 (exit 2), saying how to fix it", async () => {
    requests = 0;
    const keyFile = join(home, ".config", "decisiond", "api_key");
    await mkdir(join(home, ".config", "decisiond"), { recursive: true });
    await writeFile(keyFile, "sk-test\n");
    await chmod(keyFile, 0o644);
    try {
      const run = await ask(["--state", '"hi"', "--noul", "x=Is it?"], {
        SERVICE_BASE_URL: baseUrl,
      });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`refusing to use the API key file ${keyFile}: its mode is 0644`);
      expect(run.stderr).toContain(`chmod 600 ${keyFile}`);
      expect(requests).toBe(0);
    } finally {
      await rm(keyFile);
    }
  });
});

describe("the compact question syntax", () => {
  it("reads choice, noul and score specs", () => {
    expect(parseQuestionSpec("noul", "refund=Is this: a refund?")).toEqual([
      "refund",
      { type: "noul", instructions: "Is this: a refund?" },
    ]);
    expect(
      parseQuestionSpec(
        "choice",
        "team=Which team: pick one?:billing=payments, refunds\\, invoices,sales",
      ),
    ).toEqual([
      "team",
      {
        type: "choice",
        instructions: "Which team: pick one?",
        criteria: { billing: "payments", "refunds, invoices": null, sales: null },
      },
    ]);
    expect(parseQuestionSpec("score", "t=At what time?:9\\:00,noon")).toEqual([
      "t",
      { type: "score", instructions: "At what time?", criteria: ["9:00", "noon"] },
    ]);
    expect(parseQuestionSpec("score", "level=:low,high")).toEqual([
      "level",
      { type: "score", criteria: ["low", "high"] },
    ]);
  });
});
