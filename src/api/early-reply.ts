import type { FastifyInstance } from "fastify";

/**
 * Answers that come before the client has sent its body, made readable by the client.
 *
 * - **An error while the body is still arriving** (413 from Content-Length, a decompressed body
 *   past the limit, a 422 from the scanner): Fastify adds `Connection: close`, and Node closes the
 *   socket as soon as the answer is written. The client is still writing; its next bytes meet a
 *   closed socket, and Node clients (undici) report EPIPE instead of the answer (issue 47, item 4:
 *   3 of 20 tries at 17 MiB). Here the rest of such a body, up to {@link maxDrainBytes}, is read
 *   and dropped first, and the connection stays open, so the client finishes sending and reads
 *   the answer. A 408 (the body did not arrive in time) and a 503 while draining keep their
 *   `Connection: close`.
 * - **`Expect: 100-continue`**: Node answers `100 Continue` by itself on arrival, before any
 *   hook has looked at the request, so a client was told to send a body it would then be
 *   refused. Here `100 Continue` is sent when the body is about to be read (`preParsing`), and
 *   not when Content-Length already exceeds the limit: a refusal (401, 404, 413, …) comes
 *   instead, and the client need not send the body at all.
 */

/**
 * Installs both behaviours on the app.
 * @param bodyLimit - the body limit, bytes; a refused body is read to its end when it declares
 *   at most four times this much (a chunked body: while at most that much arrives), else the
 *   connection is closed at once as before
 */
export function installEarlyReplies(app: FastifyInstance, bodyLimit: number): void {
  const maxDrainBytes = maxDrain(bodyLimit);

  // Node sends no 100 Continue when the server has a `checkContinue` listener: the request is
  // handed to Fastify as any other, and the hook below says when to continue.
  app.server.on("checkContinue", (request, response) =>
    app.server.emit("request", request, response),
  );
  app.addHook("preParsing", async (request, reply, payload) => {
    if (!/^100-continue$/i.test(request.headers.expect ?? "")) return payload;
    const length = Number(request.headers["content-length"]);
    if (!(length > bodyLimit)) reply.raw.writeContinue();
    return payload;
  });

  app.addHook("onSend", async (request, reply, payload) => {
    const raw = request.raw;
    if (raw.complete || reply.getHeader("connection") !== "close") return payload;
    if (reply.statusCode === 408 || reply.statusCode === 503) return payload;
    if (/^100-continue$/i.test(raw.headers.expect ?? "")) return payload; // it was not sent the 100
    const declared = Number(raw.headers["content-length"]);
    if (declared > maxDrainBytes) return payload;
    reply.removeHeader("connection");
    // Read what is left and drop it; a chunked body that goes on past the bound is cut. Unpiped
    // first: a stream the parser stopped reading would pause the request again.
    raw.unpipe();
    let dropped = 0;
    raw.on("data", (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped > maxDrainBytes) raw.socket.destroy();
    });
    raw.resume();
    return payload;
  });
}

/** The most bytes of a refused body read and dropped before its connection is let go. */
export function maxDrain(bodyLimit: number): number {
  return 4 * bodyLimit;
}
