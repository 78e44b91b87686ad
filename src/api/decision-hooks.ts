import type { FastifyReply, FastifyRequest } from "fastify";
import { asStoreUnavailable } from "../accounts/store.js";
import { ApiError, Errors } from "../protocol/errors.js";
import type { Gate, GateTicket } from "./gate.js";
import type { Lifecycle } from "./lifecycle.js";
import type { ServiceMetrics } from "./metrics.js";

/**
 * The life of a decision request around its handler, as the route-level hooks both decision
 * routes declare (./decide-route.ts, ./decisions-route.ts), in the order they run:
 *
 * - `onRequest`: **drain** (503 `shutting_down` while the service drains; else the request is
 *   counted in flight until its connection closes), then **authenticate** (the key and the
 *   allowance, 401 / 429, before the body is read);
 * - `preHandler`: **admit** (the account's slot, once the body is complete and parsed);
 * - `onSend`: **record** (the ledger row, written before the answer leaves: every answer a client
 *   got is charged; when it cannot be, the answer is withheld for 503 `store_unavailable`);
 * - `onResponse`: **count faults** (a 500 is an engine error in the metrics).
 *
 * A client that goes away before its answer frees its account's slot at once; its call is
 * recorded as 499 once the route lets go of the model: with the call's usage when the model
 * finished it anyway, else with none (a call cancelled part way is not charged).
 * The gate's state lives on the request (`request.admission`, ./request-state.ts).
 */

/** The headers of a refusal at the door while draining. */
const DOOR_CLOSED = { "retry-after": "1", connection: "close" };

type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
type SendHook = (
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
) => Promise<unknown>;

/** The route-level hooks of a decision route, spread into its route options. */
export interface DecisionHooks {
  readonly onRequest: Hook[];
  readonly preHandler: Hook[];
  readonly onSend: SendHook[];
  readonly onResponse: Hook[];
}

/** What the decision hooks need from the app. */
export interface DecisionHooksOptions {
  readonly lifecycle: Lifecycle;
  /** Admission control; none (every request admitted, no ledger) when absent. */
  readonly gate: Gate | undefined;
  readonly metrics: ServiceMetrics;
  /** The served model a parsed body names, if any (for the ledger). */
  readonly modelOf: (body: unknown) => string | undefined;
}

/**
 * The hooks of the decision routes.
 * @example `app.route({ method: "POST", url: SYSTEMONE_PATH, ...hooks, handler });`
 */
export function decisionHooks(options: DecisionHooksOptions): DecisionHooks {
  const { lifecycle, gate, metrics, modelOf } = options;

  const drain: Hook = async (_request, reply) => {
    // A refusal at the door while draining is routine (an ApiError, not logged as a fault); a
    // decision cut part way is a ShutdownError (logged at warn). Both close the connection.
    if (lifecycle.draining) throw new ApiError(Errors.shuttingDown, {}, { headers: DOOR_CLOSED });
    lifecycle.enter();
    reply.raw.once("close", () => lifecycle.leave());
  };

  // An internal fault, or an engine that did not answer (a remote one's 503).
  const countFaults: Hook = async (request, reply) => {
    if (reply.statusCode === 500 || request.errorType === Errors.engineUnreachable.type)
      metrics.engineErrors.inc();
  };

  if (!gate) return { onRequest: [drain], preHandler: [], onSend: [], onResponse: [countFaults] };

  /**
   * Records the call once its connection closed: as 499 when the client left first, else a
   * no-op (the row went before the answer, in `onSend`). A failure is logged: no reply can carry it.
   */
  const finish = async (request: FastifyRequest, ticket: GateTicket, status: number) => {
    try {
      await ticket.finish?.({ status, model: modelOf(request.body) });
    } catch (error) {
      request.log.error({ err: error }, "could not record the call in the usage ledger");
    }
  };

  const onClose = (request: FastifyRequest, reply: FastifyReply, ticket: GateTicket) => {
    // The route settles itself once the model lets go; anything earlier never reached it.
    if (!request.admission?.handling) ticket.settle(undefined);
    if (reply.raw.writableFinished) {
      void finish(request, ticket, reply.statusCode);
      return;
    }
    // The client left first: its slot is free now, its usage is charged when the route settles.
    ticket.release?.();
    void finish(request, ticket, 499);
  };

  const authenticate: Hook = async (request, reply) => {
    const state = { ticket: undefined, handling: false, closed: false, recorded: false };
    request.admission = state;
    reply.raw.once("close", () => {
      state.closed = true;
      if (state.ticket) onClose(request, reply, state.ticket);
    });
    await gate.authenticate?.(request);
  };

  // The slot is taken once the body is complete and parsed, just before the handler runs.
  const admit: Hook = async (request, reply) => {
    const state = request.admission!;
    state.ticket = await gate.admit(request);
    if (state.closed) onClose(request, reply, state.ticket);
    else state.handling = true;
  };

  // When the row cannot be written the error handler answers 503 instead; that reply comes back
  // through here, and is not recorded again (the store just failed).
  const record: SendHook = async (request, reply, payload) => {
    const state = request.admission;
    if (!state?.ticket || state.recorded) return payload;
    state.recorded = true;
    // A no-op after the route's own settle; first for a 503 whose work was abandoned (deadline,
    // cut): a call cancelled part way is not charged.
    state.ticket.settle(undefined);
    try {
      await state.ticket.finish?.({ status: reply.statusCode, model: modelOf(request.body) });
    } catch (error) {
      throw asStoreUnavailable(error);
    }
    return payload;
  };

  return {
    onRequest: [drain, authenticate],
    preHandler: [admit],
    onSend: [record],
    onResponse: [countFaults],
  };
}
