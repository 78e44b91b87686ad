import type { FastifyInstance } from "fastify";
import { Transform, type TransformCallback } from "node:stream";
import { JsonBodyScanner, MAX_JSON_VALUES, MAX_SCANNED_DEPTH } from "../protocol/json-scan.js";
import { JSON_CONTENT_TYPE } from "./json.js";

/** A readable Fastify reads the body from; decompression sets `receivedEncodedLength`. */
type Payload = NodeJS.ReadableStream & { receivedEncodedLength?: number };

/**
 * Adds a `preParsing` hook that scans JSON bodies (after decompression, so it counts the decoded
 * bytes) with a {@link JsonBodyScanner}; a body past a bound is answered its 422 at once, and the
 * rest of its upload is read and dropped so the client can read the answer.
 * @param limits - the bounds; default {@link MAX_JSON_VALUES} and {@link MAX_SCANNED_DEPTH}
 */
export function installJsonScan(
  app: FastifyInstance,
  limits: { maxValues?: number; maxDepth?: number } = {},
): void {
  const maxValues = limits.maxValues ?? MAX_JSON_VALUES;
  const maxDepth = limits.maxDepth ?? MAX_SCANNED_DEPTH;
  app.addHook("preParsing", async (request, _reply, payload: Payload) => {
    if (!JSON_CONTENT_TYPE.test(request.headers["content-type"] ?? "")) return payload;
    const scanner = new JsonBodyScanner(maxValues, maxDepth);
    request.inexactIntegers = scanner.inexact;
    const scanned = new Transform({
      transform(chunk: Buffer, _encoding, callback: TransformCallback) {
        const refusal = scanner.push(chunk);
        if (!refusal) return callback(null, chunk);
        payload.unpipe(scanned);
        payload.resume(); // drain the rest of the upload so the error reply can be read
        callback(refusal);
      },
    });
    // Fastify compares the bytes received with Content-Length: the decoder's count, if any.
    if (payload.receivedEncodedLength !== undefined)
      Object.defineProperty(scanned, "receivedEncodedLength", {
        get: () => payload.receivedEncodedLength,
      });
    payload.on("error", (error: Error) => scanned.destroy(error));
    // An error after Fastify stopped reading (it answered already) must not go unhandled.
    scanned.on("error", () => {});
    payload.pipe(scanned);
    return scanned;
  });
}
