import type { FastifyInstance, FastifyReply } from "fastify";
import type { DecisionMedia, DecisionRequest, DecisionResult } from "../decision/types.js";
import { decodeRequestMedia } from "../media/request.js";
import { SYSTEMONE_PATH } from "../protocol/routes.js";
import type { SystemOneResponse } from "../protocol/schemas.js";
import type { DecisionHooks } from "./decision-hooks.js";
import type { GateTicket } from "./gate.js";
import type { ServiceMetrics } from "./metrics.js";
import type { ServedModel } from "./options.js";
import { toDecisionRequest } from "../decision/from-wire.js";
import { validateRequest, type ValidRequest } from "./validate.js";
import { DeadlineError, type WorkQueue } from "./work-queue.js";

/** The reason a request's signal aborts when its client hangs up. */
class ClientGoneError extends Error {
  override readonly name = "ClientGoneError";
  constructor() {
    super("the client closed the connection before its answer");
  }
}

/** What the decision route needs from the app. */
export interface DecideRouteOptions {
  /** The served models by every name and alias they answer to. */
  readonly byName: ReadonlyMap<string, ServedModel>;
  /** The bound on decisions waiting for the model, and their deadline. */
  readonly queue: WorkQueue;
  readonly metrics: ServiceMetrics;
  /** Drain, the gate and the ledger around the handler (./decision-hooks.ts). */
  readonly hooks: DecisionHooks;
}

/**
 * Registers `POST /v1/systemone`. Its life, in order: while the service drains, 503; the key and
 * the allowance checked before the body is read (401, 429); the body read, bounded and parsed
 * (./json-scan.ts, ./json.ts); the account's slot taken (429); then the handler: validate
 * (./validate.ts), decode the media, let the model decide under the work queue's bound and
 * deadline, answer `{model, answers, usage}`; the ledger row written before the answer leaves
 * (503 when it cannot be), or as 499 when the client left first. Errors are thrown to the app's
 * one error handler (./error-handler.ts). The gate's ticket is settled with the call's usage once
 * the model lets go, also when the client left first.
 */
export function registerDecideRoute(app: FastifyInstance, options: DecideRouteOptions): void {
  app.route({
    method: "POST",
    url: SYSTEMONE_PATH,
    ...options.hooks, // drain, authenticate | admit | record the ledger row | count faults
    handler: async (request, reply): Promise<SystemOneResponse | undefined> => {
      const call = new Call(request.admission?.ticket, options.metrics);
      try {
        const valid = validateRequest(request.body, options.byName);
        const result = await call.run(valid, reply, options.queue);
        if (!result) return undefined;
        const { body, name } = valid;
        const questions = Object.keys(body.questions).length;
        request.log.info(
          { model: name, questions, usage: result.usage, stats: result.stats },
          "decided",
        );
        return { model: name, answers: result.answers, usage: result.usage };
      } finally {
        call.settle();
      }
    },
  });
}

/**
 * One decision call: its media, its run on the model, and the settling of its gate ticket (both
 * wires' routes run their calls through it).
 */
export class Call {
  private usage: DecisionResult["usage"] | undefined;
  /** The engine's work once it lets go, when the client was answered before that. */
  private abandoned: Promise<DecisionResult | undefined> | undefined;

  constructor(
    private readonly ticket: GateTicket | undefined,
    private readonly metrics: ServiceMetrics,
  ) {}

  /**
   * Decodes the media and runs the model; aborted when the client hangs up. Counts the answer's
   * tokens in the metrics; when the client left first, logs that and takes the reply over
   * (nothing to send on a closed connection: the gate records the call as 499 and charges its
   * usage once the engine lets go), so the route returns `undefined` as it is.
   * @param options - how the core treats a question that cannot fit (default: fail the call)
   * @returns the result, `undefined` when the client left first
   * @throws the model's and the queue's errors ({@link DeadlineError}, …), and
   *   {@link MediaInputError} for media that cannot be used
   */
  async run(
    { body, model }: ValidRequest,
    reply: FastifyReply,
    queue: WorkQueue,
    options: Pick<DecisionRequest, "unfit"> = {},
  ): Promise<DecisionResult | undefined> {
    const controller = new AbortController();
    const hangUp = () => {
      if (!reply.raw.writableEnded) controller.abort(new ClientGoneError());
    };
    if (reply.raw.destroyed) hangUp();
    else reply.raw.on("close", hangUp);
    let done: Promise<DecisionResult | undefined> | undefined;
    try {
      const media = await queue.untilCut(requestMedia(body, model));
      const started = performance.now();
      const reserve = this.ticket?.reserve?.bind(this.ticket);
      const result = await queue.run(
        (signal) =>
          model.decide(
            { ...toDecisionRequest(body), ...(media ? { media } : {}), ...options },
            signal,
            reserve ? { beforeScore: (usage, work) => reserve(usage, work) } : undefined,
          ),
        controller.signal,
        (work) => {
          done = work;
        },
      );
      // W3C Server-Timing: time spent in the engine and readout (ms), so a client can tell it
      // from the HTTP, JSON and media work around it (bench/run.mjs uses it); and the windows a
      // long option list was read in, when it was planned in windows.
      const timing = `decide;dur=${(performance.now() - started).toFixed(2)}`;
      const windows = result.stats.listWindows;
      reply.header("server-timing", windows ? `${timing}, windows;desc=${windows.read}` : timing);
      if (windows) this.countWindows(windows, reply);
      this.usage = result.usage;
      this.metrics.tokens.inc({ direction: "input" }, result.usage.input_tokens);
      this.metrics.tokens.inc({ direction: "output" }, result.usage.output_tokens);
      return result;
    } catch (error) {
      if (error instanceof ClientGoneError || error instanceof DeadlineError) this.abandoned = done;
      if (!(error instanceof ClientGoneError)) throw error;
      reply.log.info("the client closed the connection before its answer; its work was cancelled");
      reply.hijack();
      return undefined;
    }
  }

  /** Counts a windowed plan's reading; says so when the engine turned windows off. */
  private countWindows(
    windows: NonNullable<DecisionResult["stats"]["listWindows"]>,
    reply: FastifyReply,
  ): void {
    this.metrics.listWindows.inc({ read: windows.read > 0 ? "windows" : "whole" });
    if (windows.off === undefined) return;
    reply.log.warn(
      { listWindows: windows },
      `long option lists are read whole for the next ${Math.ceil(windows.off / 1000)} s: the engine could not merge a state of windows (docs/decisions/113-option-lines-in-windows.md)`,
    );
  }

  /**
   * Frees the account's slot with the call's usage: now, or once abandoned work lets go (the
   * call of a client that left: a 503's ledger row has settled it with none first).
   */
  settle(): void {
    if (this.abandoned) void this.abandoned.then((late) => this.ticket?.settle(late?.usage));
    else this.ticket?.settle(this.usage);
  }
}

/**
 * The request's image or video frames, decoded for the model (media/).
 * @throws {@link MediaInputError} when the data cannot be used (→ 422)
 */
async function requestMedia(
  body: ValidRequest["body"],
  model: ServedModel,
): Promise<DecisionMedia | undefined> {
  if (!body.images && !body.videos) return undefined;
  if (!model.media) throw new Error("a model that accepts media needs media options");
  return decodeRequestMedia(body, model.media);
}
