import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ClientRequestSchema,
  JSONRPCMessageSchema,
  type JSONRPCMessage,
} from "@modelcontextprotocol/sdk/types.js";
import { JsonBodyScanner, MAX_JSON_VALUES, MAX_SCANNED_DEPTH } from "../protocol/json-scan.js";

/**
 * Longest message line read, in bytes: a `decide` call may carry what decisiond takes in one body
 * (16 MiB, an image or a video as a base64 data URL) and its JSON-RPC envelope.
 */
export const MAX_MESSAGE_BYTES = 24 * 1024 * 1024;

/** JSON-RPC 2.0's error codes for a message that cannot be read. */
export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
export const JSONRPC_INVALID_PARAMS = -32602;

/**
 * Longest wait, after the input ends, for the requests still pending to be answered, ms: a piped
 * call gets its answer; a client that left does not keep the process for ever.
 */
export const ENDED_GRACE_MS = 5 * 60_000;

/** Bytes kept of each end of a line too long to read, to find its id in. */
const ENDS_KEPT = 1024;

/** A JSON-RPC id as a message sends it: a string or a number. */
type Id = string | number;

/** The SDK's schema of each request a client may send, by its method. */
const REQUEST_SCHEMAS = new Map<string, (typeof ClientRequestSchema.options)[number]>(
  ClientRequestSchema.options.map((schema) => [schema.shape.method.value, schema]),
);

// Why a transport of our own: docs/decisions/114-an-mcp-stdio-transport-that-answers.md
/**
 * MCP's stdio transport (one JSON-RPC message a line) that answers the requests it cannot use.
 * The SDK's `StdioServerTransport` drops a line that is not JSON or not a message without a word
 * (a client waits for ever), ends the session at a line over 10 MiB, and hands on a message whose
 * object names a member twice with one of them lost; decisiond takes bodies of 16 MiB and refuses
 * duplicate names on HTTP. Here, as JSON-RPC 2.0 says:
 * - a line that is not JSON is answered −32700 (id null);
 * - a line over `maxBytes` is dropped as it arrives and answered −32600;
 * - a line past {@link JsonBodyScanner}'s bounds, or one naming a member twice, is refused before
 *   it is parsed: −32600, or −32602 when the name is inside `params`;
 * - a line that is not one JSON-RPC message (a batch, no method, a fractional id) −32600;
 * - a request whose params do not fit its method (`tools/call` without a name, `arguments` that
 *   are not an object) −32602, with the first problem and where it is (the SDK answers −32603
 *   with its validator's whole report).
 * The answer carries the request's id, found at the top level at either end of the line when the
 * line is not parsed; null when there is none. A notification (no id) or a client's response is
 * never answered: each refusal goes to `onerror`, answered or not. An exception thrown by
 * `onmessage` goes to `onerror` too, and the next line is read. When the input ends with requests
 * still unanswered, the session closes once they are answered or cancelled (at most
 * {@link ENDED_GRACE_MS} later), so a client that writes its calls and closes its end
 * (`printf … | decisiond mcp`) gets their answers.
 * @example
 * ```ts
 * await server.connect(new LineStdioTransport()); // process.stdin and process.stdout
 * ```
 */
export class LineStdioTransport implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onerror?: (error: Error) => void;
  onclose?: () => void;
  /** The line being read, as it arrived. */
  private parts: Buffer[] = [];
  private bytes = 0;
  /** Of a line past `maxBytes`: its first and last bytes (the rest is dropped); else undefined. */
  private dropped: { head: Buffer; tail: Buffer } | undefined;
  private started = false;
  private closed = false;
  /** Requests handed on and not yet answered (nor cancelled), by id: how many with that id. */
  private readonly pending = new Map<Id, number>();
  /** Whether the input has ended: the session closes when nothing is pending. */
  private ended = false;

  /**
   * @param input - where messages arrive, one a line (default stdin)
   * @param output - where answers go, one a line (default stdout)
   * @param maxBytes - longest line read (default {@link MAX_MESSAGE_BYTES})
   */
  constructor(
    private readonly input: NodeJS.ReadableStream = process.stdin,
    private readonly output: NodeJS.WritableStream = process.stdout,
    private readonly maxBytes = MAX_MESSAGE_BYTES,
  ) {}

  /** @throws when started before (as the SDK's transports do) */
  async start(): Promise<void> {
    if (this.started) throw new Error("LineStdioTransport already started");
    this.started = true;
    this.input.on("data", this.onData);
    this.input.on("error", this.onStreamError);
    this.input.on("end", this.onEnd);
    this.output.on("error", this.onOutputError);
  }

  /** Writes one message as a line; resolves once the output took it, or closed. */
  async send(message: JSONRPCMessage): Promise<void> {
    await new Promise<void>((resolve) => {
      if (this.closed || this.output.write(JSON.stringify(message) + "\n")) resolve();
      else {
        this.output.once("drain", resolve);
        this.output.once("close", resolve);
      }
    });
    if ("id" in message && !("method" in message)) this.settle(message.id);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.input.off("data", this.onData);
    this.input.off("error", this.onStreamError);
    this.input.off("end", this.onEnd);
    this.output.off("error", this.onOutputError);
    // Nothing else reads the input: stop it flowing, as the SDK's transport does.
    if (this.input.listenerCount("data") === 0) this.input.pause();
    this.parts = [];
    this.dropped = undefined;
    this.onclose?.();
  }

  private readonly onData = (chunk: Buffer | string): void => {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    let from = 0;
    for (;;) {
      const end = bytes.indexOf(0x0a, from);
      this.keep(bytes.subarray(from, end === -1 ? bytes.length : end));
      if (end === -1) return;
      from = end + 1;
      this.endLine();
    }
  };

  private readonly onStreamError = (error: Error): void => this.onerror?.(error);

  /** The output failed (the client went, EPIPE): nothing more can be answered. */
  private readonly onOutputError = (error: Error): void => {
    this.onerror?.(error);
    void this.close();
  };

  /**
   * The input ended: a last line without its newline is read, then the session closes, once the
   * requests still pending are answered.
   */
  private readonly onEnd = (): void => {
    if (this.bytes > 0 || this.dropped) this.endLine();
    this.ended = true;
    if (this.pending.size === 0) void this.close();
    // The client is gone: what it asked for last gets a bounded time to be answered.
    else setTimeout(() => void this.close(), ENDED_GRACE_MS).unref();
  };

  /** A request answered or cancelled: the last one closes an ended session. */
  private settle(id: unknown): void {
    const count = this.pending.get(id as Id);
    if (count === undefined) return;
    if (count > 1) this.pending.set(id as Id, count - 1);
    else this.pending.delete(id as Id);
    if (this.ended && this.pending.size === 0) void this.close();
  }

  private keep(part: Buffer): void {
    if (part.length === 0) return;
    if (this.dropped) {
      this.dropped.tail = lastBytes([this.dropped.tail, part]);
      return;
    }
    if (this.bytes + part.length <= this.maxBytes) {
      this.parts.push(part);
      this.bytes += part.length;
      return;
    }
    const parts = [...this.parts, part];
    this.dropped = { head: firstBytes(parts), tail: lastBytes(parts) };
    this.parts = [];
    this.bytes = 0;
  }

  /** Reads the line kept, or answers it; nothing it does throws. */
  private endLine(): void {
    const parts = this.parts;
    const dropped = this.dropped;
    this.parts = [];
    this.bytes = 0;
    this.dropped = undefined;
    try {
      if (dropped) {
        this.refuse(
          idAtEnds(dropped.head, dropped.tail),
          JSONRPC_INVALID_REQUEST,
          `Invalid request: a message of more than ${this.maxBytes} bytes was dropped (an image or video over about 16 MiB as base64 is more than decisiond takes)`,
        );
        return;
      }
      this.read(Buffer.concat(parts));
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private read(line: Buffer): void {
    const text = line.toString("utf8").replace(/\r$/, "");
    if (text.trim() === "") return;
    const scanned = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH).push(line);
    const [issue] =
      (scanned?.body as { detail?: { loc: unknown[]; msg: string; type: string }[] })?.detail ?? [];
    // Past the bounds, or a name given twice (the scanner stops there, so the rest is uncounted):
    // not parsed at all.
    if (issue) {
      const inParams = issue.type === "duplicate_key" && issue.loc[1] === "params";
      const code = inParams ? JSONRPC_INVALID_PARAMS : JSONRPC_INVALID_REQUEST;
      const what = inParams ? "Invalid params" : "Invalid request";
      const ends = [line.subarray(0, ENDS_KEPT), line.subarray(-ENDS_KEPT)] as const;
      this.refuse(idAtEnds(...ends), code, `${what}: ${issue.msg}`);
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      this.refuse(null, JSONRPC_PARSE_ERROR, `Parse error: ${(error as Error).message}`);
      return;
    }
    const message = JSONRPCMessageSchema.safeParse(value);
    if (!message.success) {
      const what = Array.isArray(value)
        ? "a batch (an array) of messages, which MCP does not take; send one a line"
        : 'not one JSON-RPC 2.0 message (a jsonrpc of "2.0", a method, an id that is a string or an integer)';
      this.refuse(answerableId(value), JSONRPC_INVALID_REQUEST, `Invalid request: ${what}`, value);
      return;
    }
    const request = message.data as { method?: string; id?: Id; params?: { requestId?: unknown } };
    if (request.method !== undefined && request.id !== undefined) {
      const problem = paramsProblem(request.method, value);
      if (problem) {
        this.refuse(request.id, JSONRPC_INVALID_PARAMS, `Invalid params: ${problem}`);
        return;
      }
      this.pending.set(request.id, (this.pending.get(request.id) ?? 0) + 1);
    } else if (request.method === "notifications/cancelled") this.settle(request.params?.requestId);
    try {
      this.onmessage?.(message.data);
    } catch (error) {
      // Not handed on after all: nothing will answer it.
      if (request.method !== undefined && request.id !== undefined) this.settle(request.id);
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /**
   * Reports a line it cannot use, and answers it with a JSON-RPC error unless it is a
   * notification or a client's response (`value`, when parsed), which are never answered.
   */
  private refuse(id: Id | null, code: number, message: string, value?: unknown): void {
    this.onerror?.(new Error(message));
    if (value !== undefined && !answerable(value)) return;
    if (this.closed) return;
    this.output.write(JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } }) + "\n");
  }
}

/**
 * What is wrong with the params of a request of `method` (`message` as parsed), as one line:
 * the first problem the SDK's schema finds and where (`params.arguments: …`); undefined when they
 * fit, or when the method is not one a client sends (the SDK answers that −32601).
 */
function paramsProblem(method: string, message: unknown): string | undefined {
  const parsed = REQUEST_SCHEMAS.get(method)?.safeParse(message);
  if (!parsed || parsed.success) return undefined;
  const [issue] = parsed.error.issues;
  if (!issue) return `the params of ${method} do not fit it`;
  const where = issue.path.length > 0 ? issue.path.join(".") : "the message";
  return `${where} of ${method}: ${issue.message}`;
}

/**
 * Whether a parsed line that is not a valid message is answered: a request (a method and an id)
 * or something unreadable as any message; not a notification (a method, no id), nor a response
 * (a result or an error, whose id is the client's own request's, not one of the server's).
 */
function answerable(value: unknown): boolean {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return true;
  const message = value as Record<string, unknown>;
  if ("method" in message) return "id" in message;
  return !("result" in message) && !("error" in message);
}

/** The id of a parsed line that is answered ({@link answerable}), as sent; else null. */
function answerableId(value: unknown): Id | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const id = (value as { id?: unknown }).id;
  return typeof id === "string" || typeof id === "number" ? id : null;
}

/** A JSON-RPC id's text: a JSON string or number. */
const ID_TEXT = String.raw`("(?:[^"\\\u0000-\u001f]|\\.)*"|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)`;
/** An id its line's first bytes name at the top level, before any nested value. */
const LEADING_ID = new RegExp(String.raw`^\s*\{[^{[]*?"id"\s*:\s*${ID_TEXT}\s*[,}]`);
/** An id its line's last bytes name as the object's last member (the SDK's own clients' place). */
const TRAILING_ID = new RegExp(String.raw`[{,]\s*"id"\s*:\s*${ID_TEXT}\s*\}\s*$`);

/**
 * The id a line names at its top level, read from its first and last bytes: before any nested
 * value (`{"jsonrpc":"2.0","id":12,"method":…`), or as the last member (`…,"id":12}`); null when
 * neither. A nested `"id"` is neither: it is followed by more than one closing bracket.
 */
function idAtEnds(head: Buffer, tail: Buffer): Id | null {
  for (const [pattern, bytes] of [
    [LEADING_ID, head],
    [TRAILING_ID, tail],
  ] as const) {
    const match = pattern.exec(bytes.toString("utf8"));
    if (!match) continue;
    try {
      return JSON.parse(match[1]!) as Id;
    } catch {
      // Not a JSON string or number after all: look on.
    }
  }
  return null;
}

/** The first {@link ENDS_KEPT} bytes of `parts`, copied. */
function firstBytes(parts: readonly Buffer[]): Buffer {
  const head: Buffer[] = [];
  let size = 0;
  for (const part of parts) {
    if (size >= ENDS_KEPT) break;
    head.push(part.subarray(0, ENDS_KEPT - size));
    size += Math.min(part.length, ENDS_KEPT - size);
  }
  return Buffer.concat(head);
}

/** The last {@link ENDS_KEPT} bytes of `parts`, copied. */
function lastBytes(parts: readonly Buffer[]): Buffer {
  const tail: Buffer[] = [];
  let size = 0;
  for (let i = parts.length - 1; i >= 0 && size < ENDS_KEPT; i--) {
    const part = parts[i]!;
    tail.unshift(part.subarray(Math.max(0, part.length - (ENDS_KEPT - size))));
    size += Math.min(part.length, ENDS_KEPT - size);
  }
  return Buffer.concat(tail);
}
