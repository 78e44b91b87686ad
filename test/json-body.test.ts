import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildApp } from "../src/api/app.js";
import { decodeJsonBytes, firstInvalidUtf8 } from "../src/api/json.js";
import { JsonBodyScanner, MAX_JSON_VALUES, MAX_SCANNED_DEPTH } from "../src/protocol/json-scan.js";
import { HttpError } from "../src/protocol/errors.js";
import { StubModel } from "./support/stub-model.js";

const strict = new TextDecoder("utf-8", { fatal: true });

/** Whether `bytes` decode as UTF-8, by the platform's own strict decoder. */
function decodes(bytes: Uint8Array): boolean {
  try {
    strict.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

describe("a JSON body's bytes as UTF-8", () => {
  it("finds the first byte that begins no character, as the WHATWG decoder judges", () => {
    // Bytes drawn from the edges of Table 3-7, so that most arrays hold multi-byte sequences.
    const edge = fc.constantFrom(
      0x00,
      0x41,
      0x7f,
      0x80,
      0x8f,
      0x90,
      0x9f,
      0xa0,
      0xbf,
      0xc0,
      0xc1,
      0xc2,
      0xdf,
      0xe0,
      0xe1,
      0xec,
      0xed,
      0xee,
      0xef,
      0xf0,
      0xf1,
      0xf3,
      0xf4,
      0xf5,
      0xff,
    );
    fc.assert(
      fc.property(fc.array(edge, { maxLength: 12 }), (array) => {
        const bytes = Uint8Array.from(array);
        const at = firstInvalidUtf8(bytes);
        expect(at === bytes.length).toBe(decodes(bytes));
        expect(decodes(bytes.subarray(0, at))).toBe(true);
      }),
      { numRuns: 20_000 },
    );
  });

  it("decodes UTF-8 (a byte order mark kept) and refuses the rest with 422 json_invalid", () => {
    expect(decodeJsonBytes(Buffer.from('\uFEFF{"a":"é😀"}', "utf8"))).toBe('\uFEFF{"a":"é😀"}');
    for (const [bytes, at, value] of [
      [Buffer.from('{"a":"caf\u00e9"}', "latin1"), 9, "E9"],
      [Buffer.from([0x7b, 0xed, 0xa0, 0x80, 0x7d]), 1, "ED"], // a surrogate, U+D800
      [Buffer.from([0x7b, 0xc0, 0xaf, 0x7d]), 1, "C0"], // an overlong "/"
      [Buffer.from([0x22, 0xe2, 0x82]), 1, "E2"], // the body ends inside a character
    ] as const) {
      let caught: unknown;
      try {
        decodeJsonBytes(bytes);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(HttpError);
      const error = caught as HttpError;
      expect(error.statusCode).toBe(422);
      expect(error.body).toEqual({
        detail: [
          {
            loc: ["body"],
            msg: expect.stringContaining(`byte ${at} (0x${value}) begins no character`),
            type: "json_invalid",
          },
        ],
      });
    }
  });
});

describe("integers a 64-bit float would round", () => {
  const body = JSON.stringify({ state: { id: 1, items: [2, 3.5] } }).replace(
    "}}",
    ', "big": 9007199254740993, "bigger": -123456789012345678901234567890, "safe": 9007199254740992, "float": 1.00000000000000000001, "exp": 12345678901234567890e3, "text": "9007199254740993", "list": [0, 18446744073709551615], "exact": 1180591620717411303424}}',
  );

  it("are found by the scan where they stand, whatever the chunks", () => {
    const expected = [
      { path: ["state", "big"], text: "9007199254740993" },
      { path: ["state", "bigger"], text: "-123456789012345678901234567890" },
      { path: ["state", "list", 1], text: "18446744073709551615" },
      // 2⁷⁰: a float holds it, but writes it 1.1805916207174113e+21.
      { path: ["state", "exact"], text: "1180591620717411303424" },
    ];
    for (const size of [1, 2, 7, 64, body.length]) {
      const scanner = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH);
      for (let at = 0; at < body.length; at += size)
        expect(scanner.push(Buffer.from(body.slice(at, at + size)))).toBeUndefined();
      expect(scanner.inexact, `chunks of ${size}`).toEqual(expected);
    }
  });

  it("are not noted deeper than a body may nest (it is refused there)", () => {
    const scanner = new JsonBodyScanner(MAX_JSON_VALUES, MAX_SCANNED_DEPTH);
    const deep = "[".repeat(1000) + "9007199254740993" + "]".repeat(1000);
    expect(scanner.push(Buffer.from(`{"state": ${deep}}`))).toBeUndefined();
    expect(scanner.inexact).toEqual([]);
  });

  it("reach the model as their digits, other numbers as parsed", async () => {
    const model = new StubModel();
    const app = await buildApp({ models: [model], logger: false });
    const request = body.replace(
      '{"state"',
      '{"model": "stub-1", "questions": {"q": {"type": "noul", "instructions": "Is it?"}}, "state"',
    );
    const reply = await app.inject({
      method: "POST",
      url: "/v1/systemone",
      headers: { "content-type": "application/json" },
      payload: request,
    });
    expect(reply.statusCode, reply.body).toBe(200);
    expect(model.received[0]!.state).toEqual({
      id: 1,
      items: [2, 3.5],
      big: "9007199254740993",
      bigger: "-123456789012345678901234567890",
      safe: 9007199254740992,
      float: 1,
      exp: Number("12345678901234567890e3"), // an exponent: read as a float
      text: "9007199254740993",
      list: [0, "18446744073709551615"],
      exact: "1180591620717411303424",
    });
    await app.close();
  });
});
