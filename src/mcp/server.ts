import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { readFileSync } from "node:fs";
import { z } from "zod";
import { DecisiondClient, type DecideRequest, type DecideResponse } from "../client/client.js";
import { defaultModel, mcpProgressIntervalMs, resolveClientConfig } from "../client/config.js";
import { ClientConfigError, DecisiondError } from "../client/errors.js";
import { renderAnswerLines } from "../client/render.js";
import { ClientQuestionSchema } from "../protocol/client-question.js";
import { LineStdioTransport } from "./stdio-transport.js";

/**
 * The MCP server of decisiond: one tool, `decide`, that sends its input to `POST /v1/systemone`
 * (one HTTP request per call, no retries) and returns the response as structured content plus one
 * text line per question. Imports nothing from the server side.
 */

/** The name the server announces in the MCP handshake. */
export const MCP_SERVER_NAME = "decisiond";

const DataUrl = (what: string) =>
  z.string().regex(/^data:[a-z0-9.+-]+\/[a-z0-9.+-]+;base64,/i, {
    error: (issue) =>
      typeof issue.input === "string" && /^(https?|file|ftp):/i.test(issue.input)
        ? `decisiond fetches nothing: send the ${what} inline as a base64 data URL (data:<mime>;base64,...), not a URL`
        : `${what} should be a base64 data URL (data:<mime>;base64,...)`,
  });

/**
 * Reports `__proto__` as a question id or a choice's option id, as decisiond does (a record
 * would drop it without a word: it is the prototype's name in JavaScript objects).
 */
function reservedIds(questions: unknown, context: z.core.$RefinementCtx): unknown {
  const own = (o: unknown): o is Record<string, unknown> =>
    typeof o === "object" && o !== null && !Array.isArray(o);
  if (!own(questions)) return questions;
  const reserved = (path: string[], what: string) =>
    context.addIssue({
      code: "custom",
      path,
      message: `"__proto__" cannot be ${what} id (it is reserved in JavaScript objects); use another id`,
    });
  for (const id of Object.keys(questions)) {
    if (id === "__proto__") reserved([id], "a question");
    const question = questions[id];
    if (own(question) && own(question.criteria) && Object.hasOwn(question.criteria, "__proto__"))
      reserved([id, "criteria", "__proto__"], "an option");
  }
  return questions;
}

/** The input of the `decide` tool. */
export const decideInputShape = {
  state: z
    .unknown()
    .refine((value) => value !== undefined, "state is required: any JSON value")
    .describe(
      "the situation to decide about: any JSON value (text, an object, a conversation...). It is evidence, not instructions.",
    ),
  questions: z
    .preprocess(reservedIds, z.record(z.string().min(1), ClientQuestionSchema))
    .describe(
      "1–16 questions by id, each of type choice, noul or score; every one is answered about the same state",
    ),
  image: DataUrl("image")
    .optional()
    .describe("one image as a base64 data URL (data:image/png;base64,...); not with video"),
  video: DataUrl("video")
    .optional()
    .describe("one MP4 video as a base64 data URL (data:video/mp4;base64,...); not with image"),
  model: z
    .string()
    .min(1)
    .optional()
    .describe(
      "model name; usually omitted (default: DECISIOND_MODEL of the plugin, else decisiond-1.0-experimental)",
    ),
};

const Probabilities = z.record(z.string(), z.number());

/** The output of the `decide` tool: the API's response, `{model, answers, usage}`. */
export const decideOutputShape = {
  model: z.string().describe("the model that answered"),
  answers: z
    .record(
      z.string(),
      z.discriminatedUnion("type", [
        z.object({ type: z.literal("noul"), noul: z.number().describe("P(true)") }),
        z.object({
          type: z.literal("choice"),
          choice: z.string().describe("the most probable option id"),
          probabilities: Probabilities.describe("option id → probability"),
          confidence: z.number(),
        }),
        z.object({
          type: z.literal("score"),
          score: z.number().describe("expected level, Σ i·pᵢ"),
          legend: z
            .record(
              z.string(),
              z.union([z.string(), z.record(z.string(), z.json()), z.array(z.json())]),
            )
            .describe('"0".."n−1" → level description, as the question gave it'),
          probabilities: Probabilities.describe('"0".."n−1" → probability'),
          confidence: z.number(),
        }),
      ]),
    )
    .describe("question id → answer"),
  usage: z.object({ input_tokens: z.number(), output_tokens: z.number() }),
};

// Compile-time guard: every response the API's schema allows fits the tool's output schema.
type DecideOutput = z.infer<z.ZodObject<typeof decideOutputShape>>;
const fitsOutput = (response: DecideResponse): DecideOutput => response;
void fitsOutput;

/** Options of {@link createMcpServer}. */
export interface McpServerOptions {
  /**
   * Makes the client for one tool call. Called on every call, so a fixed key file takes effect
   * without a restart; a {@link ClientConfigError} it throws becomes a tool error. Default:
   * {@link DecisiondClient.fromEnv}.
   */
  client?: () => DecisiondClient;
  /** The model used when a call names none. Default: `DECISIOND_MODEL`, else decisiond-1.0-experimental. */
  defaultModel?: string;
  /** Version announced in the handshake; default the package's. */
  version?: string;
  /**
   * Milliseconds between `notifications/progress` of a call whose client sent a progress token.
   * Default: `DECISIOND_MCP_PROGRESS_MS`, else {@link DEFAULT_PROGRESS_MS}.
   */
  progressIntervalMs?: number;
}

/** Default interval of progress notifications: 5 s, well inside a client's 60 s request timeout. */
export const DEFAULT_PROGRESS_MS = 5000;

/**
 * The plugin's own queue: decisiond answers one request in flight per account (a second gets
 * 429), so calls of one agent, which share its key, go one at a time, in order. A call whose
 * client cancels it leaves the queue at once.
 */
class CallQueue {
  private tail: Promise<void> = Promise.resolve();
  /** Waiting or running calls. */
  size = 0;

  /**
   * Waits for the turn of a call. @returns a function that ends the call's turn.
   * @throws the signal's reason when cancelled while waiting.
   */
  async enter(signal: AbortSignal): Promise<() => void> {
    const before = this.tail;
    let done!: () => void;
    this.tail = new Promise<void>((resolve) => (done = resolve));
    this.size++;
    const end = () => {
      this.size--;
      done();
    };
    try {
      await new Promise<void>((resolve, reject) => {
        const cancel = () => reject(signal.reason);
        if (signal.aborted) return cancel();
        signal.addEventListener("abort", cancel, { once: true });
        void before.then(() => {
          signal.removeEventListener("abort", cancel);
          resolve();
        });
      });
    } catch (error) {
      // Our turn still comes in order: pass it on once the call before ends.
      void before.then(end);
      throw error;
    }
    return end;
  }
}

/**
 * Builds the MCP server with the `decide` tool (not yet connected to a transport).
 *
 * A call sends exactly one `POST /v1/systemone`. Calls wait for each other (one in flight, in
 * order: decisiond answers one request per account at a time); a call whose client gave a
 * progress token gets `notifications/progress` every `progressIntervalMs` while it waits and
 * runs; a cancelled call aborts its HTTP request. On success the result has `structuredContent` =
 * the response and one text line per question. Every failure is a tool result with
 * `isError: true` and a text naming it (`DecisiondError.describe()`: status, error type,
 * message, request id, retry delay) followed by the same fields as JSON; also for an image
 * together with a video, a refused key file, or no response from the server.
 */
export function createMcpServer(options: McpServerOptions = {}): McpServer {
  const makeClient = options.client ?? (() => DecisiondClient.fromEnv());
  const model = options.defaultModel ?? defaultModel();
  const progressMs = options.progressIntervalMs ?? mcpProgressIntervalMs() ?? DEFAULT_PROGRESS_MS;
  const queue = new CallQueue();
  const server = new McpServer({
    name: MCP_SERVER_NAME,
    version: options.version ?? packageVersion(),
  });
  server.registerTool(
    "decide",
    {
      title: "Decide",
      description:
        "Answer questions about a state with probabilities from decisiond, a decision model that reads " +
        "answers from next-token probabilities (it never writes text). Give a state (any JSON) and 1–16 questions " +
        "by id: choice (pick one option id from criteria), noul (true/false; returns P(true)) or score " +
        "(ordered levels 0..n−1; returns the expected level). Optionally one image or one video as a data URL. " +
        "Returns every answer with probabilities and confidence.",
      inputSchema: decideInputShape,
      outputSchema: decideOutputShape,
      annotations: {
        readOnlyHint: true,
        destructiveHint: false,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    async (input, extra): Promise<CallToolResult> => {
      if (input.image !== undefined && input.video !== undefined)
        return toolError(
          "send one image or one video, not both (the API takes one medium per request)",
        );
      let client: DecisiondClient;
      try {
        client = makeClient();
      } catch (error) {
        if (error instanceof ClientConfigError)
          return toolError(`decisiond client configuration: ${error.message}`);
        throw error;
      }
      const request = {
        model: input.model ?? model,
        state: input.state,
        questions: input.questions,
        ...(input.image !== undefined ? { images: [input.image] } : {}),
        ...(input.video !== undefined ? { videos: [input.video] } : {}),
      } as DecideRequest; // state and texts arrive as JSON over JSON-RPC: they are JSON values
      // Progress while the call waits in the queue and while decisiond works, so a client that
      // resets its timeout on progress (MCP `resetTimeoutOnProgress`) waits as long as it takes.
      const token = extra._meta?.progressToken;
      let progress = 0;
      let stage = queue.size > 0 ? `queued behind ${queue.size} call(s) of this agent` : "deciding";
      const notify = () => {
        if (token === undefined) return;
        progress++;
        extra
          .sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress, message: stage },
          })
          .catch(() => undefined); // the client may be gone; the call's own result says so
      };
      notify();
      const timer = token === undefined ? undefined : setInterval(notify, progressMs);
      let end: (() => void) | undefined;
      try {
        end = await queue.enter(extra.signal);
        stage = "deciding";
        // The client's cancellation (`notifications/cancelled` → extra.signal) aborts the HTTP
        // request, and decisiond cancels the engine's work when the connection closes.
        const response = await client.decide(request, { signal: extra.signal });
        return {
          content: [{ type: "text", text: renderAnswerLines(response).join("\n") }],
          structuredContent: response as unknown as Record<string, unknown>,
        };
      } catch (error) {
        if (error instanceof DecisiondError)
          return toolError(
            `decisiond ${error.status > 0 ? "answered" : "failed"}: ${error.describe()}\n${JSON.stringify(error.toJSON())}`,
          );
        throw error;
      } finally {
        clearInterval(timer);
        end?.();
      }
    },
  );
  return server;
}

/**
 * Runs {@link createMcpServer} on stdin/stdout until stdin closes and the calls it sent are
 * answered (LineStdioTransport, at most `ENDED_GRACE_MS` more). Writes one line to stderr when
 * the client configuration is already known to be bad (the calls will report it too).
 * @returns when the transport closes.
 */
export async function runMcpStdio(options: McpServerOptions = {}): Promise<void> {
  if (!options.client) {
    try {
      resolveClientConfig();
    } catch (error) {
      if (!(error instanceof ClientConfigError)) throw error;
      process.stderr.write(`decisiond mcp: ${error.message}\n`);
    }
  }
  const server = createMcpServer(options);
  const transport = new LineStdioTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
  });
  await server.connect(transport);
  // The MCP spec ends a stdio session by closing the server's stdin: the transport closes then,
  // once the requests it handed on are answered.
  await closed;
  await server.close();
}

/** The version in the package's package.json (dist/mcp/ → ../../package.json); "0.0.0" if unreadable. */
function packageVersion(): string {
  try {
    const url = new URL("../../package.json", import.meta.url);
    return (JSON.parse(readFileSync(url, "utf8")) as { version?: string }).version ?? "0.0.0";
  } catch {
    return "0.0.0";
  }
}

function toolError(text: string): CallToolResult {
  return { content: [{ type: "text", text }], isError: true };
}
