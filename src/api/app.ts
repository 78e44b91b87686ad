import Fastify, { type FastifyInstance, type FastifyReply } from "fastify";
import { randomUUID } from "node:crypto";
import { ApiError, Errors, errorTypeOf } from "../protocol/errors.js";
import { DEFAULT_BODY_LIMIT } from "../protocol/limits.js";
import { registerDecideRoute } from "./decide-route.js";
import { decisionsRoute } from "./decisions-route.js";
import { installBodyDeadline } from "./body-deadline.js";
import { clientErrorHandler, refuseConnect } from "./client-error.js";
import { installCors, isApiPath } from "./cors.js";
import { installDecompression } from "./decompress.js";
import { installEarlyReplies } from "./early-reply.js";
import { decisionHooks } from "./decision-hooks.js";
import { installErrorHandler, sendUnrouted } from "./error-handler.js";
import { installJsonScan } from "./json-scan.js";
import { requireLoopbackHost } from "./host.js";
import { closeAfterLastRequest } from "./last-request.js";
import { boundSilentConnections } from "./silent-connections.js";
import { capConnections } from "./connection-cap.js";
import { requestLogFields } from "./request-log.js";
import { declareRequestState } from "./request-state.js";
import {
  decodeJsonBytes,
  JSON_CONTENT_TYPE,
  keepStateDigits,
  parseJsonBody,
  unacceptableCharset,
} from "./json.js";
import { Lifecycle } from "./lifecycle.js";
import { createMetrics } from "./metrics.js";
import { DEFAULT_REQUEST_TIMEOUT_MS, type AppOptions, type ServedModel } from "./options.js";
import { registerServiceRoutes } from "./service-routes.js";
import { servedModelName } from "./validate.js";
import { WorkQueue } from "./work-queue.js";

export type { Gate, GateTicket } from "./gate.js";
export type { AppMount, AppOptions, ServedModel } from "./options.js";
export { DEFAULT_BODY_LIMIT, DEFAULT_REQUEST_TIMEOUT_MS };

// Why: docs/decisions/111-bounds-on-what-a-client-holds.md
/**
 * Requests one connection serves before it is closed: 32 (a client opens another); requests
 * pipelined past them get a bare 503, so the answers held for a client that does not read are
 * at most 32 per connection; then it is closed (./last-request.ts).
 */
export const MAX_REQUESTS_PER_SOCKET = 32;

/** A request id sent by a load balancer or client that we adopt: 1–128 safe characters. */
const INCOMING_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Builds the Fastify app: `POST /v1/systemone`, `GET /v1/models`, `GET /healthz` (alive),
 * `GET /readyz` (dependencies answer, not draining), `GET /metrics` (Prometheus text). Every
 * response carries `x-request-id` (the incoming `x-request-id` when it is a safe token, so a load
 * balancer's id follows the request; else a new UUID), which every log line of the request names
 * as `reqId` (and `x-typesafe-request-id`, read by the official clients); bad input
 * gets a 4xx with a body that says what and where; an internal fault gets a 500 naming the
 * request id, and is logged.
 */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const bodyLimit = options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const requestTimeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const app = Fastify({
    bodyLimit,
    // A slow body times out (408) instead of holding a connection; Node checks every
    // `connectionsCheckingInterval` ms, so the check runs often enough for the timeout to hold.
    requestTimeout,
    maxRequestsPerSocket: MAX_REQUESTS_PER_SOCKET,
    http: { connectionsCheckingInterval: Math.max(250, Math.min(requestTimeout / 4, 5000)) },
    clientErrorHandler: clientErrorHandler(requestTimeout),
    logger:
      options.logger === false
        ? false
        : {
            level: (typeof options.logger === "object" && options.logger.level) || "info",
            redact: ["req.headers.authorization", 'req.headers["x-api-key"]', "req.headers.cookie"],
            serializers: { req: requestLogFields },
            ...(typeof options.logger === "object" && options.logger.stream
              ? { stream: options.logger.stream }
              : {}),
          },
    requestIdHeader: false,
    genReqId: (raw) => {
      const incoming = raw.headers["x-request-id"];
      return typeof incoming === "string" && INCOMING_REQUEST_ID.test(incoming)
        ? incoming
        : randomUUID();
    },
  });
  const lifecycle = options.lifecycle ?? new Lifecycle();
  const metrics = createMetrics({
    inFlight: () => lifecycle.active,
    queueDepth: options.queueDepth ?? (() => 0),
    draining: () => lifecycle.draining,
  });
  declareRequestState(app);
  // First: its headers go on every answer of the API, a refusal's included.
  await installCors(app, options.corsOrigins ?? []);

  // When the request arrived (performance.now() ms), for Server-Timing `app` below: Fastify's own
  // `reply.elapsedTime` is 0 when request logging is off.
  app.addHook("onRequest", async (request, reply) => {
    request.receivedAt = performance.now();
    reply.header("x-request-id", request.id);
    reply.header("x-typesafe-request-id", request.id);
    // An unknown route is answered before its body is read: no upload, decompression or parse.
    // So is an OPTIONS outside the API, which only CORS's catch-all route (./cors.ts) matches.
    if (request.is404 || (request.method === "OPTIONS" && !isApiPath(request.url)))
      return sendUnrouted(app, request, reply);
  });

  // W3C Server-Timing `app`: milliseconds from the request's arrival to its response being
  // serialized, so a client can tell the server's own time from the network's (bench/run.mjs).
  app.addHook("onSend", async (request, reply, payload) => {
    const timing = reply.getHeader("server-timing");
    if (typeof timing === "string")
      reply.header(
        "server-timing",
        `${timing}, app;dur=${(performance.now() - request.receivedAt).toFixed(2)}`,
      );
    return payload;
  });

  if (options.loopbackHostOnly ?? options.gate === undefined) requireLoopbackHost(app);
  app.server.on("connect", refuseConnect);
  boundSilentConnections(app, options.silentConnectionsPerAddress);
  closeAfterLastRequest(app);
  capConnections(app, options.maxConnections);
  installEarlyReplies(app, bodyLimit);
  installBodyDeadline(app, requestTimeout, lifecycle);
  installDecompression(app, bodyLimit);
  installJsonScan(app);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    JSON_CONTENT_TYPE,
    { parseAs: "buffer", bodyLimit },
    (request, body, done) => {
      try {
        const charset = unacceptableCharset(request.headers["content-type"]);
        if (charset !== undefined) throw new ApiError(Errors.unsupportedCharset, [charset]);
        const parsed = parseJsonBody(decodeJsonBytes(body as Buffer));
        done(null, keepStateDigits(parsed, request.inexactIntegers ?? []));
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );

  // Metrics of every answered request: count by status and error type, latency by route.
  app.addHook("onSend", async (request, reply, payload) => {
    if (reply.statusCode >= 400 && typeof payload === "string")
      request.errorType = errorTypeOf(payload);
    return payload;
  });
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    metrics.requests.inc({
      route,
      status: String(reply.statusCode),
      error_type: request.errorType,
    });
    metrics.duration.observe({ route }, reply.elapsedTime / 1000);
  });
  // A request whose connection closed before its answer was sent has no onResponse: counted as
  // 499 client_closed, the status its ledger row has (decision-hooks.ts). A body that stops is
  // cut by the body deadline (./body-deadline.ts) and counted as its 408 in onResponse.
  app.addHook("onRequest", async (request, reply) => {
    reply.raw.once("close", () => {
      if (reply.raw.writableFinished) return;
      const route = request.routeOptions.url ?? "unmatched";
      metrics.requests.inc({ route, status: "499", error_type: "client_closed" });
    });
  });

  installErrorHandler(app, { bodyLimit });

  const queue = new WorkQueue({ ...options.queue, cut: lifecycle.cutSignal });

  const byName = new Map<string, ServedModel>();
  for (const model of options.models)
    for (const name of [...model.names, ...(model.aliases ?? [])]) byName.set(name, model);

  for (const mount of options.mounts ?? []) await mount(app);

  registerServiceRoutes(app, {
    models: options.models,
    names: [...byName.keys()],
    lifecycle,
    metrics,
    readiness: options.readiness ?? {},
    version: options.version ?? "0.0.0",
    auth: options.gate !== undefined,
  });
  // Both decision wires: drain, the gate and the ledger around the handler (./decision-hooks.ts).
  const hooks = decisionHooks({
    lifecycle,
    gate: options.gate,
    metrics,
    modelOf: (body) => servedModelName(body, byName),
  });
  registerDecideRoute(app, { byName, queue, metrics, hooks });
  // OpenAI's Decisions wire: the same core, gate and queue; its errors in OpenAI's shape.
  await app.register(decisionsRoute({ byName, queue, metrics, hooks }));

  return app;
}

export type { FastifyInstance, FastifyReply };
