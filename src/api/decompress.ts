import type { FastifyInstance } from "fastify";
import { Decompress as ZstdStream } from "fzstd";
import { Transform, type TransformCallback } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { ApiError, Errors, HttpError } from "../protocol/errors.js";
import { JSON_CONTENT_TYPE } from "./json.js";
import { ZstdFrameError, ZstdFrameGuard } from "./zstd-frames.js";

/**
 * Compressed request bodies: `Content-Encoding` gzip, deflate and br (node:zlib) and zstd (the
 * pure-JS `fzstd`; Node 20's zlib has no zstd), which the official Python client sends for bodies
 * of 1 KiB or more. The body limit applies to the decompressed size, so a small compressed body
 * that inflates past it gets 413 and decompression stops there. An unknown encoding gets 415.
 */

/** Encodings accepted in `Content-Encoding`. */
export const CONTENT_ENCODINGS = ["identity", "gzip", "x-gzip", "deflate", "br", "zstd"] as const;

/** A readable Fastify reads the body from: it checks `receivedEncodedLength` against Content-Length. */
type Decoded = Transform & { receivedEncodedLength: number };

/** Adds a `preParsing` hook that decompresses request bodies; `bodyLimit` bounds the decompressed bytes. */
export function installDecompression(app: FastifyInstance, bodyLimit: number): void {
  app.addHook("preParsing", async (request, _reply, payload) => {
    const header = request.headers["content-encoding"];
    if (header === undefined) return payload;
    const codings = header
      .split(",")
      .map((c) => c.trim().toLowerCase())
      .filter((c) => c !== "" && c !== "identity");
    if (codings.length === 0) return payload;
    // A body no parser takes is answered 415 unread: decoding it would be wasted work, and its
    // decoding errors would come after the reply.
    if (!JSON_CONTENT_TYPE.test(request.headers["content-type"] ?? "")) return payload;
    if (codings.length > 1 || !(CONTENT_ENCODINGS as readonly string[]).includes(codings[0]!))
      throw new ApiError(Errors.unsupportedContentEncoding, [header]);
    const coding = codings[0]!;
    const decoder = createDecoder(coding, bodyLimit);
    const limited = limitTo(bodyLimit) as Decoded;
    limited.receivedEncodedLength = 0;

    const stop = (error: Error) => {
      payload.unpipe(decoder);
      payload.resume(); // drain the rest of the upload so the error reply can be read
      decoder.destroy();
      limited.destroy(error);
    };
    payload.on("data", (chunk: Buffer) => {
      limited.receivedEncodedLength += chunk.length;
    });
    payload.on("error", (error) => limited.destroy(error));
    decoder.on("error", (error) =>
      stop(
        error instanceof HttpError
          ? error
          : error instanceof ZstdFrameError && error.kind === "too_large"
            ? tooLarge()
            : new ApiError(Errors.invalidBodyEncoding, [coding, error.message]),
      ),
    );
    limited.on("limit", () => stop(tooLarge()));
    // An error after Fastify stopped reading (it answered already) must not go unhandled.
    limited.on("error", () => {});
    payload.pipe(decoder).pipe(limited);
    return limited;
  });
}

function createDecoder(coding: string, bodyLimit: number): Transform {
  switch (coding) {
    case "gzip":
    case "x-gzip":
      return createGunzip();
    case "deflate":
      return createInflate();
    case "br":
      return createBrotliDecompress();
    default:
      return new ZstdDecoder(bodyLimit);
  }
}

/** A pass-through that emits `limit` (and passes nothing more) once more than `limit` bytes went through. */
function limitTo(limit: number): Transform {
  let total = 0;
  let over = false;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (over) return callback();
      total += chunk.length;
      if (total > limit) {
        over = true;
        this.emit("limit");
        return callback();
      }
      callback(null, chunk);
    },
  });
}

/** The 413 of a body that decompresses past the limit (the same body as Fastify's own 413). */
function tooLarge(): Error {
  return Object.assign(new Error("the decompressed request body exceeds the body limit"), {
    code: "FST_ERR_CTP_BODY_TOO_LARGE",
    statusCode: 413,
  });
}

/**
 * zstd decompression as a stream over fzstd's streaming decoder, behind a {@link ZstdFrameGuard}
 * that refuses oversized windows and frames before fzstd allocates them.
 */
class ZstdDecoder extends Transform {
  private readonly guard: ZstdFrameGuard;

  constructor(bodyLimit: number) {
    super();
    this.guard = new ZstdFrameGuard(bodyLimit);
  }

  private readonly zstd = new ZstdStream((data) => {
    if (data.length > 0) this.push(Buffer.from(data)); // fzstd reuses its window buffer: copy
  });

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.guard.push(chunk);
      this.zstd.push(chunk);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.zstd.push(new Uint8Array(0), true);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }
}
