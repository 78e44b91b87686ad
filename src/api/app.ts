import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { randomUUID } from "node:crypto";
import { consolePlugin, type ConsoleOptions } from "../console/plugin.js";
import { StateTooLongError } from "../decision/decide.js";
import type { DecideHooks } from "../decision/decide.js";
import type { DecisionMedia, DecisionRequest, DecisionResult } from "../decision/types.js";
import { PromptTextError } from "../engine/types.js";
import { MediaInputError } from "../media/errors.js";
import { decodeRequestMedia, type MediaOptions } from "../media/request.js";
import { installDecompression } from "./decompress.js";
import { DEFAULT_BODY_LIMIT } from "../protocol/limits.js";
import { ApiError, Errors, errorTypeOf, HttpError, validationError } from "../protocol/errors.js";
import { SystemOneRequestSchema } from "../protocol/schemas.js";
import { detailsFromZod } from "../protocol/validation.js";
import { isCommonRequest } from "./fast-check.js";
import { admittedTicket, installGate, type Gate } from "./gate.js";
import { requireLoopbackHost } from "./host.js";
import { emptyBodyError, JSON_CONTENT_TYPE, parseJsonBody } from "./json.js";
import { jsonShapeProblems } from "./json-shape.js";
import { Lifecycle } from "./lifecycle.js";
import { createMetrics } from "./metrics.js";
import { openApiDocument } from "./openapi.js";
import { toDecisionRequest } from "./translate.js";
import { DeadlineError, WorkQueue, type WorkQueueOptions } from "./work-queue.js";

export type { Gate, GateTicket } from "./gate.js";

/** The reason a request's signal aborts when its client hangs up. */
class ClientGoneError extends Error {
  override readonly name = "ClientGoneError";
  constructor() {
    super("the client closed the connection before its answer");
  }
}

/** A model the service answers with, as the API layer sees it. */
export interface ServedModel {
  /** Names it is served under; the first is listed first in `GET /v1/models`. */
  readonly names: readonly string[];
  /** Further accepted names that are not listed (e.g. `jev-latest`, the official clients' default). */
  readonly aliases?: readonly string[];
  readonly description: string;
  /** YYYY-MM-DD. */
  readonly releaseDate: string;
  readonly acceptsImages: boolean;
  readonly acceptsVideos: boolean;
  /** How images and video frames are prepared for the model; required when it accepts media. */
  readonly media?: MediaOptions;
  /**
   * Answers a request. @throws {StateTooLongError} when it does not fit the context (→ 422).
   */
  decide(
    request: DecisionRequest,
    signal?: AbortSignal,
    hooks?: DecideHooks,
  ): Promise<DecisionResult>;
}

/** Options of {@link buildApp}. */
export interface AppOptions {
  readonly models: readonly ServedModel[];
  /** Largest accepted request body in bytes. Default 16 MiB. */
  readonly bodyLimit?: number;
  /**
   * A pino logger configuration, `false` for none. Default: info level to stdout. The
   * Authorization header is redacted; bodies (states) are never logged.
   */
  readonly logger?: boolean | { level?: string; stream?: NodeJS.WritableStream };
  /** Admission control; none means every request is admitted (auth off). */
  readonly gate?: Gate;
  /** decisiond's version, for `GET /openapi.json`. */
  readonly version?: string;
  /** The web console under `/console` (src/console/); none when absent. */
  readonly console?: ConsoleOptions;
  /**
   * What `/readyz` checks, by name (e.g. `store`, `engine`): each resolves when its dependency
   * answers. Default none.
   */
  readonly readiness?: Readonly<Record<string, () => Promise<void>>>;
  /** Drain state shared with the process (SIGTERM); default a fresh one. */
  readonly lifecycle?: Lifecycle;
  /** Decision requests waiting for their account's slot, for `decisiond_queue_depth`. */
  readonly queueDepth?: () => number;
  /** The bound on decisions waiting for the model, and their deadline (./work-queue.ts). */
  readonly queue?: WorkQueueOptions;
  /**
   * Longest time to receive a whole request (headers and body), in ms; past it the server
   * answers 408 and closes the connection. Default {@link DEFAULT_REQUEST_TIMEOUT_MS}.
   */
  readonly requestTimeoutMs?: number;
  /**
   * Answer only requests whose Host header names loopback (./host.ts): for a server without
   * authentication, against DNS rebinding. Default: on when there is no gate.
   */
  readonly loopbackHostOnly?: boolean;
}

/** A request id sent by a load balancer or client that we adopt: 1–128 safe characters. */
const INCOMING_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** How long `/readyz` waits for each check, ms. */
const READY_CHECK_MS = 2000;

/** 30 s, the default time to receive a whole request. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export { DEFAULT_BODY_LIMIT };

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
    http: { connectionsCheckingInterval: Math.max(250, Math.min(requestTimeout / 4, 5000)) },
    logger:
      options.logger === false
        ? false
        : {
            level: (typeof options.logger === "object" && options.logger.level) || "info",
            redact: ["req.headers.authorization", 'req.headers["x-api-key"]', "req.headers.cookie"],
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
  const errorTypes = new WeakMap<object, string>();

  // When the request arrived (performance.now() ms), for Server-Timing `app` below: Fastify's own
  // `reply.elapsedTime` is 0 when request logging is off.
  const receivedAt = new WeakMap<object, number>();
  app.addHook("onRequest", async (request, reply) => {
    receivedAt.set(request, performance.now());
    reply.header("x-request-id", request.id);
    reply.header("x-typesafe-request-id", request.id);
    // An unknown route is answered before its body is read: no upload, decompression or parse.
    if (request.is404) return reply.code(404).send(notFoundBody(request));
  });

  // W3C Server-Timing `app`: milliseconds from the request's arrival to its response being
  // serialized, so a client can tell the server's own time from the network's (bench/run.mjs).
  app.addHook("onSend", async (request, reply, payload) => {
    const timing = reply.getHeader("server-timing");
    const start = receivedAt.get(request);
    if (typeof timing === "string" && start !== undefined)
      reply.header("server-timing", `${timing}, app;dur=${(performance.now() - start).toFixed(2)}`);
    return payload;
  });

  if (options.loopbackHostOnly ?? options.gate === undefined) requireLoopbackHost(app);
  installDecompression(app, bodyLimit);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    JSON_CONTENT_TYPE,
    { parseAs: "string", bodyLimit },
    (_request, body, done) => {
      try {
        done(null, parseJsonBody(String(body)));
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );

  // Metrics of every answered request: count by status and error type, latency by route.
  app.addHook("onSend", async (request, reply, payload) => {
    if (reply.statusCode >= 400 && typeof payload === "string")
      errorTypes.set(request, errorTypeOf(payload));
    return payload;
  });
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    metrics.requests.inc({
      route,
      status: String(reply.statusCode),
      error_type: errorTypes.get(request) ?? "",
    });
    metrics.duration.observe({ route }, reply.elapsedTime / 1000);
  });

  // Drain: decision requests are counted in and out; while draining they get 503 before
  // admission, so the load balancer retries them on another replica.
  app.addHook("onRequest", async (request, reply) => {
    if (request.method !== "POST" || request.routeOptions.url !== "/v1/systemone") return;
    if (lifecycle.draining) {
      void reply.header("connection", "close");
      throw new ApiError(Errors.shuttingDown, [], { headers: { "retry-after": "1" } });
    }
    lifecycle.enter();
    reply.raw.once("close", () => lifecycle.leave());
  });

  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(notFoundBody(request));
  });

  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    if (error instanceof HttpError) {
      void reply
        .code(error.statusCode)
        .headers(error.headers)
        .send(withRequestId(error.body, request.id));
      return;
    }
    if (error.code === "FST_ERR_CTP_EMPTY_JSON_BODY") {
      const empty = emptyBodyError();
      void reply.code(empty.statusCode).send(empty.body);
      return;
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      void reply.code(status).send(clientErrorBody(error, bodyLimit));
      return;
    }
    request.log.error({ err: error }, "internal fault");
    if (request.routeOptions.url === "/v1/systemone") metrics.engineErrors.inc();
    const fault = new ApiError(Errors.internal, [request.id]);
    void reply.code(fault.statusCode).send(withRequestId(fault.body, request.id));
  });

  const queue = new WorkQueue(options.queue);

  const byName = new Map<string, ServedModel>();
  for (const model of options.models)
    for (const name of [...model.names, ...(model.aliases ?? [])]) byName.set(name, model);

  if (options.gate) installGate(app, options.gate, (body) => servedModelName(body, byName));

  if (options.console) await app.register(consolePlugin, options.console);

  app.get("/healthz", async () => ({
    status: "ok",
    models: options.models.map((m) => m.names[0]),
  }));

  // Ready: not draining, and every dependency (store, engine) answers within READY_CHECK_MS.
  app.get("/readyz", async (_request, reply) => {
    const checks: Record<string, string> = {};
    await Promise.all(
      Object.entries(options.readiness ?? {}).map(async ([name, check]) => {
        try {
          await withTimeout(
            check(),
            READY_CHECK_MS,
            `${name} did not answer within ${READY_CHECK_MS} ms`,
          );
          checks[name] = "ok";
        } catch (error) {
          checks[name] = error instanceof Error ? error.message : String(error);
        }
      }),
    );
    const ready = !lifecycle.draining && Object.values(checks).every((c) => c === "ok");
    void reply.code(ready ? 200 : 503);
    return { status: ready ? "ready" : lifecycle.draining ? "draining" : "not_ready", checks };
  });

  app.get("/metrics", async (_request, reply) => {
    void reply.header("content-type", metrics.registry.contentType);
    return metrics.registry.metrics();
  });

  const openapi = openApiDocument({
    version: options.version ?? "0.0.0",
    auth: options.gate !== undefined,
    models: [...byName.keys()],
  });
  app.get("/openapi.json", async () => openapi);

  app.get("/v1/models", async () => ({
    models: options.models.flatMap((m) =>
      m.names.map((name) => ({ name, description: m.description, release_date: m.releaseDate })),
    ),
  }));

  app.post("/v1/systemone", async (request, reply) => {
    const ticket = admittedTicket(request);
    let usage: DecisionResult["usage"] | undefined;
    // The engine's work once it lets go, when the client was answered before that.
    let abandoned: Promise<DecisionResult | undefined> | undefined;
    let done: Promise<DecisionResult | undefined> | undefined;
    try {
      const { body, model, name } = validate(request.body, byName);
      // Aborted when the client hangs up: the engine drops the work (src/api/work-queue.ts).
      const controller = new AbortController();
      const hangUp = () => {
        if (!reply.raw.writableEnded) controller.abort(new ClientGoneError());
      };
      if (reply.raw.destroyed) hangUp();
      else reply.raw.on("close", hangUp);
      let result: DecisionResult;
      try {
        const media = await requestMedia(body, model);
        const started = performance.now();
        const reserve = ticket?.reserve?.bind(ticket);
        result = await queue.run(
          (signal) =>
            model.decide(
              { ...toDecisionRequest(body), ...(media ? { media } : {}) },
              signal,
              reserve ? { beforeScore: (usage) => reserve(usage) } : undefined,
            ),
          controller.signal,
          (work) => {
            done = work;
          },
        );
        // W3C Server-Timing: time spent in the engine and readout (ms), so a client can tell it
        // from the HTTP, JSON and media work around it (bench/run.mjs uses it).
        reply.header("server-timing", `decide;dur=${(performance.now() - started).toFixed(2)}`);
      } catch (error) {
        if (error instanceof ClientGoneError || error instanceof DeadlineError) abandoned = done;
        if (error instanceof PromptTextError)
          throw validationError([
            {
              loc: ["body", error.part === "prefix" ? "state" : "questions"],
              msg: error.message,
              type: "value_error",
            },
          ]);
        if (error instanceof ClientGoneError) {
          request.log.info(
            "the client closed the connection before its answer; its work was cancelled",
          );
          // Nothing to send on a closed connection; the gate records the call as 499 and
          // charges its usage once the engine lets go.
          reply.hijack();
          return;
        }
        if (error instanceof DeadlineError)
          throw new ApiError(Errors.deadlineExceeded, [error.deadlineMs], {
            headers: { "retry-after": String(Math.max(1, Math.ceil(queue.deadlineMs / 4000))) },
          });
        if (error instanceof StateTooLongError)
          throw validationError([
            {
              // Blame the state when it alone fills the context, else the longest question.
              loc:
                error.longestQuestionId !== undefined && error.stateTokens * 2 < error.contextSize
                  ? ["body", "questions", error.longestQuestionId]
                  : ["body", "state"],
              msg: error.message,
              type: "state_too_long",
            },
          ]);
        throw error;
      }
      usage = result.usage;
      metrics.tokens.inc({ direction: "input" }, result.usage.input_tokens);
      metrics.tokens.inc({ direction: "output" }, result.usage.output_tokens);
      request.log.info(
        {
          model: name,
          questions: Object.keys(body.questions).length,
          usage: result.usage,
          stats: result.stats,
        },
        "decided",
      );
      return { model: name, answers: result.answers, usage: result.usage };
    } finally {
      if (abandoned) void abandoned.then((late) => ticket?.settle(late?.usage));
      else ticket?.settle(usage);
    }
  });

  return app;
}

/** An error body with the request id added to its `detail` object (422 lists are left as they are). */
function withRequestId(body: unknown, requestId: string): unknown {
  if (typeof body !== "object" || body === null) return body;
  const detail = (body as { detail?: unknown }).detail;
  if (typeof detail !== "object" || detail === null || Array.isArray(detail)) return body;
  return { ...body, detail: { ...detail, request_id: requestId } };
}

/** `promise`, or a rejection with `message` after `ms`. */
function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Validates a parsed body and resolves its model. @throws {HttpError} 422 with `detail[]`. */
function validate(
  raw: unknown,
  byName: ReadonlyMap<string, ServedModel>,
): { body: ReturnType<typeof SystemOneRequestSchema.parse>; model: ServedModel; name: string } {
  if (raw === undefined || raw === null || typeof raw !== "object" || Array.isArray(raw))
    throw validationError([
      { loc: ["body"], msg: "The body should be a JSON object", type: "model_attributes_type" },
    ]);
  // Depth, finite numbers and reserved ids first: both validators below rely on them.
  const shape = jsonShapeProblems(raw);
  if (shape.length > 0) throw validationError(shape);
  // The common body passes a compiled check that zod would accept it unchanged (./fast-check.ts);
  // any other goes through zod, which also words the 422 details.
  const parsed = isCommonRequest(raw)
    ? { success: true as const, data: raw, error: undefined }
    : SystemOneRequestSchema.safeParse(raw, { reportInput: true });
  let details = parsed.success ? [] : detailsFromZod(parsed.error.issues);
  if (!("state" in raw))
    details = [
      { loc: ["body", "state"], msg: "Field required", type: "missing" },
      ...details.filter((d) => d.loc[1] !== "state"),
    ];
  if (details.length > 0) throw validationError(details);
  const body = parsed.data!;
  const model = byName.get(body.model);
  if (!model)
    throw validationError([
      {
        loc: ["body", "model"],
        msg: `model ${JSON.stringify(body.model)} is not served here; served: ${[...byName.keys()].join(", ")}`,
        type: "unknown_model",
      },
    ]);
  const name = answeredName(model, body.model);
  if (body.images && body.videos)
    throw validationError([
      {
        loc: ["body", "videos"],
        msg: "Send one image or one video, not both",
        type: "value_error",
      },
    ]);
  if (body.images && !model.acceptsImages)
    throw validationError([
      {
        loc: ["body", "images"],
        msg:
          `model ${name} does not accept images: it is a text-only model. Serve a vision model to ` +
          "send images, e.g. `decisiond serve --model smolvlm-256m-instruct` (its projector is " +
          "pulled with it), or a GGUF with its projector: `decisiond serve --model FILE.gguf --mmproj MMPROJ.gguf`",
        type: "value_error",
      },
    ]);
  if (body.videos && !model.acceptsVideos)
    throw validationError([
      {
        loc: ["body", "videos"],
        msg:
          `model ${name} does not accept videos: it is a text-only model. Serve a vision model to ` +
          "send videos, e.g. `decisiond serve --model smolvlm-256m-instruct`",
        type: "value_error",
      },
    ]);
  return { body, model, name };
}

/**
 * The request's image or video frames, decoded for the model (media/).
 * @throws {HttpError} 422 at `["body", "images" | "videos", 0]` when the data cannot be used.
 */
async function requestMedia(
  body: ReturnType<typeof SystemOneRequestSchema.parse>,
  model: ServedModel,
): Promise<DecisionMedia | undefined> {
  if (!body.images && !body.videos) return undefined;
  if (!model.media) throw new Error("a model that accepts media needs media options");
  try {
    return await decodeRequestMedia(body, model.media);
  } catch (error) {
    if (error instanceof MediaInputError)
      throw validationError([{ loc: [...error.loc], msg: error.message, type: error.type }]);
    throw error;
  }
}

/** The served name a parsed body's `model` resolves to, as the route answers it; `undefined` if none. */
function servedModelName(
  body: unknown,
  byName: ReadonlyMap<string, ServedModel>,
): string | undefined {
  const requested =
    typeof body === "object" && body !== null ? (body as { model?: unknown }).model : undefined;
  if (typeof requested !== "string") return undefined;
  const model = byName.get(requested);
  return model ? answeredName(model, requested) : undefined;
}

/** The name a response reports: the requested one when listed, else the model's first (aliases). */
function answeredName(model: ServedModel, requested: string): string {
  return model.names.includes(requested) ? requested : model.names[0]!;
}

/** The 404 body of a request to no route. */
function notFoundBody(request: FastifyRequest) {
  return new ApiError(Errors.routeNotFound, [request.method, request.url]).body;
}

/** Bodies of Fastify's own 4xx errors (size, media type, empty body), in the API's error shape. */
function clientErrorBody(error: Error & { statusCode?: number; code?: string }, bodyLimit: number) {
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ApiError(Errors.requestTooLarge, [bodyLimit, (bodyLimit / 1048576).toFixed(0)])
        .body;
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new ApiError(Errors.unsupportedMediaType).body;
    default:
      return new ApiError(Errors.invalidRequest, [error.message]).body;
  }
}

export type { FastifyInstance, FastifyReply };
