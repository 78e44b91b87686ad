import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeJsonBytes, firstInvalidUtf8 } from "../src/api/json.js";
import { HttpError } from "../src/protocol/errors.js";

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
