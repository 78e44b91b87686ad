import type { FastifyInstance } from "fastify";
import { PassThrough } from "node:stream";
import { ApiError, Errors } from "../protocol/errors.js";
import { ShutdownError } from "./work-queue.js";

/** How long a body still arriving when the drain begins has to arrive in full, ms. */
export const DRAIN_BODY_GRACE_MS = 1000;

/**
 * The request timeout for bodies. Node's `requestTimeout` answers 408 to a request whose headers
 * do not arrive in time, but not to a body once a route has the request (measured: no answer at
 * 1.25 s with a 1 s timeout), nor to one trickled a byte at a time, which could hold a connection
 * for as long as its sender likes (a slowloris). This `preParsing` hook gives every body
 * `timeoutMs` from the moment it starts to be read: past that the upload is cut off and answered 408
 * `request_timeout` with `Connection: close`. Registered before decompression, it times the
 * bytes on the wire.
 *
 * A body still arriving {@link DRAIN_BODY_GRACE_MS} after the drain began, or when the drain cuts
 * what is in flight, is cut off too and answered 503 `shutting_down` (`Retry-After: 1`,
 * `Connection: close`): it holds no slot, so it need not hold the drain either, and its sender
 * should retry elsewhere rather than lose the connection part way. It has no ledger row: the
 * account's slot is taken only once the body is parsed.
 * @param timeoutMs - the server's request timeout, in milliseconds
 * @param lifecycle - `drainSignal` aborts when the drain begins, `cutSignal` when it cuts what is
 *   in flight (`Lifecycle`)
 */
export function installBodyDeadline(
  app: FastifyInstance,
  timeoutMs: number,
  lifecycle?: { readonly drainSignal: AbortSignal; readonly cutSignal: AbortSignal },
): void {
  // One listener per signal for every body (an AbortSignal warns past ten listeners).
  const arriving = new Set<(error: Error, drop?: boolean) => void>();
  const stopAll = () => {
    for (const stop of [...arriving]) stop(new ShutdownError("body"), true);
  };
  const cut = lifecycle?.cutSignal;
  cut?.addEventListener("abort", stopAll, { once: true });
  lifecycle?.drainSignal.addEventListener(
    "abort",
    () => setTimeout(stopAll, DRAIN_BODY_GRACE_MS).unref(),
    { once: true },
  );
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
    // An error after Fastify stopped reading (it answered already) must not go unhandled.
    guarded.on("error", () => {});
    const timer = setTimeout(
      () =>
        stop(
          new ApiError(Errors.requestTimeout, [timeoutMs / 1000], {
            headers: { connection: "close" },
          }),
        ),
      timeoutMs,
    );
    timer.unref();
    const done = () => {
      clearTimeout(timer);
      arriving.delete(stop);
    };
    // A body cut at the drain is read on and dropped, so that a client still sending it reads
    // the 503 rather than a reset (the process exits soon anyway); one past its deadline is not,
    // as its sender may trickle it for as long as it likes.
    const stop = (error: Error, drop = false) => {
      done();
      payload.unpipe(guarded);
      if (drop) payload.resume();
      guarded.destroy(error);
    };
    if (cut?.aborted) {
      stop(new ShutdownError("body"), true);
      return guarded;
    }
    arriving.add(stop);
    if (lifecycle?.drainSignal.aborted) {
      const late = () => arriving.has(stop) && stop(new ShutdownError("body"), true);
      setTimeout(late, DRAIN_BODY_GRACE_MS).unref();
    }
    payload.on("end", done);
    payload.on("close", done);
    payload.on("error", (error) => {
      done();
      guarded.destroy(error);
    });
    payload.pipe(guarded);
    return guarded;
  });
}
