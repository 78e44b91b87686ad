import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { LineStdioTransport } from "../src/mcp/stdio-transport.js";

/**
 * The MCP plugin's stdio transport answers every line it cannot use (probe27: the SDK's dropped
 * them without a word, ended the session at 10 MiB, and let a duplicate question id through).
 */
function transport(maxBytes?: number) {
  const input = new PassThrough();
  const output = new PassThrough();
  const t = new LineStdioTransport(input, output, maxBytes);
  const messages: unknown[] = [];
  const errors: string[] = [];
  t.onmessage = (m) => messages.push(m);
  t.onerror = (e) => errors.push(e.message);
  let closed = false;
  t.onclose = () => (closed = true);
  const answers = () =>
    String(output.read() ?? "")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { id: unknown; error: { code: number; message: string } });
  return { t, input, messages, errors, answers, closed: () => closed };
}

const PING = { jsonrpc: "2.0", id: 1, method: "ping" };

describe("the MCP stdio transport", () => {
  it("hands on one message a line, split across chunks or ending in CRLF", async () => {
    const { t, input, messages, answers } = transport();
    await t.start();
    const line = JSON.stringify(PING);
    input.write(line.slice(0, 10));
    input.write(line.slice(10) + "\r\n" + JSON.stringify({ ...PING, id: "b" }) + "\n\n");
    expect(messages).toEqual([PING, { ...PING, id: "b" }]);
    expect(answers()).toEqual([]);
  });

  it("answers a line that is not JSON, a batch, no method or a fractional id, and goes on", async () => {
    const { t, input, messages, errors, answers } = transport();
    await t.start();
    input.write("{not json\n");
    input.write(JSON.stringify([PING]) + "\n");
    input.write(JSON.stringify({ jsonrpc: "2.0", id: 5 }) + "\n");
    input.write(JSON.stringify({ ...PING, id: 13.5 }) + "\n");
    input.write(JSON.stringify(PING) + "\n");
    const got = answers();
    expect(got.map((a) => [a.id, a.error.code])).toEqual([
      [null, -32700],
      [null, -32600],
      [5, -32600],
      [13.5, -32600],
    ]);
    expect(got[1]!.error.message).toMatch(/batch/);
    expect(messages).toEqual([PING]);
    expect(errors).toHaveLength(4);
  });

  it("refuses a message naming a member twice, with its id", async () => {
    const { t, input, messages, answers } = transport();
    await t.start();
    input.write(
      '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"decide","arguments":{"state":"x","questions":{"q":{"type":"noul","instructions":"a"},"q":{"type":"noul","instructions":"b"}}}}}\n',
    );
    const [answer] = answers();
    expect(answer).toMatchObject({ id: 7, error: { code: -32602 } });
    expect(answer!.error.message).toMatch(/Duplicate name "q"/);
    expect(messages).toEqual([]);
  });

  it("drops a line over its bound as it arrives, answers it, and reads the next", async () => {
    const { t, input, messages, answers, closed } = transport(1000);
    await t.start();
    input.write(`{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"${"x".repeat(600)}`);
    input.write(`${"x".repeat(600)}"}}\n`);
    input.write(JSON.stringify(PING) + "\n");
    const [answer] = answers();
    expect(answer).toMatchObject({ id: 9, error: { code: -32600 } });
    expect(answer!.error.message).toMatch(/more than 1000 bytes/);
    expect(messages).toEqual([PING]);
    // The SDK's clients write the id last; an id inside the params is not the message's.
    input.write(`{"jsonrpc":"2.0","params":{"id":4,"pad":"${"x".repeat(1200)}"},"id":10}\n`);
    input.write(`{"jsonrpc":"2.0","params":{"pad":"${"x".repeat(1200)}","id":4}}\n`);
    // An id that is not JSON after all is no id, and the next line is read.
    input.write(`{"jsonrpc":"2.0","id":012,"pad":"${"x".repeat(1200)}"}\n`);
    input.write(JSON.stringify({ ...PING, id: 11 }) + "\n");
    expect(answers()).toMatchObject([
      { id: 10, error: { code: -32600 } },
      { id: null, error: { code: -32600 } },
      { id: null, error: { code: -32600 } },
    ]);
    expect(messages).toEqual([PING, { ...PING, id: 11 }]);
    expect(closed()).toBe(false);
  });

  it("reads a last line without its newline, then closes when its input ends", async () => {
    const { t, input, messages, closed } = transport();
    await t.start();
    await expect(t.start()).rejects.toThrow(/already started/);
    input.end(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(messages).toHaveLength(1);
    expect(closed()).toBe(true);
  });

  it("closes an ended input once its requests are answered or cancelled", async () => {
    // probe33: `printf '<tools/call>\n' | decisiond mcp` closed at once, the call never made.
    const { t, input, messages, closed, answers } = transport();
    await t.start();
    input.write(JSON.stringify(PING) + "\n" + JSON.stringify({ ...PING, id: "two" }) + "\n");
    input.end();
    await new Promise((resolve) => setImmediate(resolve));
    expect(messages).toHaveLength(2);
    expect(closed()).toBe(false);
    await t.send({ jsonrpc: "2.0", id: 1, result: {} });
    expect(closed()).toBe(false);
    await t.send({ jsonrpc: "2.0", id: "two", result: {} });
    expect(closed()).toBe(true);
    expect(answers().map((a) => a.id)).toEqual([1, "two"]);

    const other = transport();
    await other.t.start();
    other.input.write(JSON.stringify(PING) + "\n");
    const cancel = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } };
    other.input.end(JSON.stringify(cancel) + "\n");
    await new Promise((resolve) => setImmediate(resolve));
    expect(other.closed()).toBe(true);
  });

  it("refuses a request whose params do not fit its method: −32602 and where", async () => {
    // probe33: the SDK answered these −32603 with its validator's whole report.
    const { t, input, messages, answers } = transport();
    await t.start();
    const call = { jsonrpc: "2.0", method: "tools/call" };
    input.write(
      JSON.stringify({ ...call, id: 3, params: { name: "decide", arguments: "str" } }) + "\n",
    );
    input.write(JSON.stringify({ ...call, id: 4 }) + "\n");
    input.write(
      JSON.stringify({ ...call, id: 5, params: { name: "decide", arguments: {} } }) + "\n",
    );
    input.write(JSON.stringify({ jsonrpc: "2.0", id: 6, method: "no/such", params: {} }) + "\n");
    const got = answers();
    expect(got.map((a) => [a.id, a.error.code])).toEqual([
      [3, -32602],
      [4, -32602],
    ]);
    expect(got[0]!.error.message).toMatch(/^Invalid params: params\.arguments of tools\/call: /);
    expect(got[1]!.error.message).toMatch(/^Invalid params: params of tools\/call: /);
    for (const answer of got) expect(answer.error.message).not.toContain("\n");
    // A call that fits, and a method the SDK answers itself (−32601), are handed on.
    expect(messages.map((m) => (m as { id: unknown }).id)).toEqual([5, 6]);
  });

  it("answers neither a notification nor a client's response it cannot use", async () => {
    const { t, input, errors, answers } = transport();
    await t.start();
    input.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/x", params: 5 }) + "\n");
    input.write(JSON.stringify({ jsonrpc: "2.0", id: 3, result: 5 }) + "\n");
    expect(answers()).toEqual([]);
    expect(errors).toHaveLength(2);
  });

  it("refuses a name given twice before parsing: its values are not counted past it", async () => {
    const { t, input, answers } = transport();
    await t.start();
    // The id twice, then more values than a body may hold: refused on the name, not parsed.
    input.write(
      `{"jsonrpc":"2.0","id":1,"id":1,"method":"ping","params":[${"[],".repeat(200_000)}[]]}\n`,
    );
    const [answer] = answers();
    expect(answer).toMatchObject({ id: 1, error: { code: -32600 } });
    expect(answer!.error.message).toMatch(/Duplicate name "id"/);
  });

  it("goes on reading when a message's handler throws", async () => {
    const { t, input, errors, closed } = transport();
    const seen: unknown[] = [];
    t.onmessage = (m) => {
      seen.push(m);
      if (seen.length === 1) throw new Error("handler failed");
    };
    await t.start();
    input.write(JSON.stringify(PING) + "\n" + JSON.stringify({ ...PING, id: 2 }) + "\n");
    expect(seen).toHaveLength(2);
    expect(errors).toEqual(["handler failed"]);
    // The request whose handler threw is not waited for; the other one is.
    input.end();
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed()).toBe(false);
    await t.send({ jsonrpc: "2.0", id: 2, result: {} });
    expect(closed()).toBe(true);
  });
});
