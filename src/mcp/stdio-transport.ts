import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { JSONRPCMessageSchema, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
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
 * MCP's stdio transport (one JSON-RPC message a line) that answers every line it cannot use. The
 * SDK's `StdioServerTransport` drops a line that is not JSON or not a message without a word (a
 * client waits for ever), ends the session at a line over 10 MiB, and hands on a message whose
 * object names a member twice with one of them lost; decisiond takes bodies of 16 MiB and refuses
 * duplicate names on HTTP. Here:
 * - a line that is not JSON is answered −32700 (id null);
 * - a line past {@link JsonBodyScanner}'s bounds, or one naming a member twice, −32600 or −32602
 *   with the message's id when it has one;
 * - a line that is not one JSON-RPC message (a batch, no method, a fractional id) −32600 with its
 *   id as sent, so that the client can match it;
 * - a line over `maxBytes` is dropped as it arrives and answered −32600 (with its id when its first
 *   bytes name one before any nested value, else null), and the session goes on.
 * Each refusal is also reported to `onerror`.
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
  /** Whether the line being read went past `maxBytes` (the rest of it is dropped). */
  private tooLong = false;
  /** Of a line dropped: its id, when its first bytes name one before any nested value. */
  private droppedId: string | number | null = null;
  private closed = false;

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

  async start(): Promise<void> {
    this.input.on("data", this.onData);
    this.input.on("error", this.onInputError);
    this.input.on("end", this.onEnd);
  }

  /** Writes one message as a line; resolves once the output took it. */
  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.output.write(JSON.stringify(message) + "\n")) resolve();
      else this.output.once("drain", resolve);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.input.off("data", this.onData);
    this.input.off("error", this.onInputError);
    this.input.off("end", this.onEnd);
    this.parts = [];
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

  private readonly onInputError = (error: Error): void => this.onerror?.(error);

  private readonly onEnd = (): void => void this.close();

  private keep(part: Buffer): void {
    if (this.tooLong || part.length === 0) return;
    if (this.bytes + part.length > this.maxBytes) {
      this.tooLong = true;
      this.droppedId = leadingId(Buffer.concat([...this.parts, part]).subarray(0, 1024));
      this.parts = [];
      this.bytes = 0;
      return;
    }
    this.parts.push(part);
    this.bytes += part.length;
  }

  private endLine(): void {
    const parts = this.parts;
    this.parts = [];
    this.bytes = 0;
    if (this.tooLong) {
      this.tooLong = false;
      this.refuse(
        this.droppedId,
        JSONRPC_INVALID_REQUEST,
        `Invalid request: a message of more than ${this.maxBytes} bytes was dropped (an image or video over about 16 MiB as base64 is more than decisiond takes)`,
      );
      return;
    }
    const line = Buffer.concat(parts);
    const text = line.toString("utf8").replace(/\r$/, "");
    if (text.trim() === "") return;
    const scanned = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH).push(line);
    const [issue] = (scanned?.body as { detail?: { msg: string; type: string }[] })?.detail ?? [];
    // Past the bounds: not parsed at all.
    if (issue && issue.type !== "duplicate_key") {
      this.refuse(null, JSONRPC_INVALID_REQUEST, `Invalid request: ${issue.msg}`);
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      this.refuse(null, JSONRPC_PARSE_ERROR, `Parse error: ${(error as Error).message}`);
      return;
    }
    const id = idOf(value);
    if (issue) {
      this.refuse(id, JSONRPC_INVALID_PARAMS, `Invalid params: ${issue.msg}`);
      return;
    }
    const message = JSONRPCMessageSchema.safeParse(value);
    if (!message.success) {
      const what = Array.isArray(value)
        ? "a batch (an array) of messages, which MCP does not take; send one a line"
        : 'not one JSON-RPC 2.0 message (a jsonrpc of "2.0", a method, an id that is a string or an integer)';
      this.refuse(id, JSONRPC_INVALID_REQUEST, `Invalid request: ${what}`);
      return;
    }
    this.onmessage?.(message.data);
  }

  /** Answers a line it cannot use with a JSON-RPC error, and reports it. */
  private refuse(id: string | number | null, code: number, message: string): void {
    this.onerror?.(new Error(message));
    const answer = { jsonrpc: "2.0", id, error: { code, message } };
    this.output.write(JSON.stringify(answer) + "\n");
  }
}

/**
 * The id a message's first bytes name at its top level, before any nested object or array (as
 * `{"jsonrpc":"2.0","id":12,"method":…` does); null when they do not.
 */
function leadingId(head: Buffer): string | number | null {
  const match =
    /^\s*\{[^{[]*?"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*[,}]/.exec(
      head.toString("utf8"),
    );
  return match ? (JSON.parse(match[1]!) as string | number) : null;
}

/** A message's id as sent, when it is a string or a number; else null. */
function idOf(value: unknown): string | number | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const id = (value as { id?: unknown }).id;
  return typeof id === "string" || typeof id === "number" ? id : null;
}
