import type { FastifyInstance } from "fastify";
import { PassThrough } from "node:stream";
import { ApiError, Errors } from "../protocol/errors.js";

/**
 * The request timeout for bodies. Node's `requestTimeout` answers 408 to a request whose headers
 * do not arrive in time, but not to a body once a route has the request (measured: no answer at
 * 1.25 s with a 1 s timeout), nor to one trickled a byte at a time, which could hold a connection
 * for as long as its sender likes (a slowloris). This `preParsing` hook gives every body
 * `timeoutMs` from the moment it starts to be read: past that the upload is cut off and answered 408
 * `request_timeout` with `Connection: close`. Registered before decompression, it times the
 * bytes on the wire.
 * @param timeoutMs - the server's request timeout, in milliseconds
 */
export function installBodyDeadline(app: FastifyInstance, timeoutMs: number): void {
  app.addHook("preParsing", async (request, _reply, payload) => {
    // A request without a body (no Content-Length, or 0, and no Transfer-Encoding) has nothing
    // to time; Node's own timeout covers its headers.
    const length = request.headers["content-length"];
    if (
      (length === undefined || length === "0") &&
      request.headers["transfer-encoding"] === undefined
    )
      return payload;
    const guarded = new PassThrough();
    const timer = setTimeout(() => {
      payload.unpipe(guarded);
      guarded.destroy(
        new ApiError(Errors.requestTimeout, [timeoutMs / 1000], {
          headers: { connection: "close" },
        }),
      );
    }, timeoutMs);
    timer.unref();
    const done = () => clearTimeout(timer);
    payload.on("end", done);
    payload.on("close", done);
    payload.on("error", (error) => {
      done();
      guarded.destroy(error);
    });
    // An error after Fastify stopped reading (it answered already) must not go unhandled.
    guarded.on("error", () => {});
    payload.pipe(guarded);
    return guarded;
  });
}
