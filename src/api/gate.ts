import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Admission } from "../accounts/admission.js";
import { asStoreUnavailable } from "../accounts/store.js";
import { bearerKey } from "../protocol/bearer.js";

/**
 * Admission of a request before it reaches the model (authentication, per-account concurrency,
 * allowance). `authenticate` runs in `onRequest`, before the body is read, and `admit` once the
 * body is complete ({@link installGate}); each throws an error with its code of the error table
 * to refuse (src/protocol/errors.ts). The returned ticket is settled once with the usage of the
 * call (or `undefined` when it failed or never reached the model).
 */
export interface Gate {
  /**
   * Checks the request's credential in `onRequest`, before its body is read; throws an error
   * with a 401's code to refuse. Optional: without it the credential is checked by `admit`.
   */
  authenticate?(request: FastifyRequest): Promise<void>;
  /** Admits the request once its body is complete and parsed (`preHandler`). */
  admit(request: FastifyRequest): Promise<GateTicket>;
}

/** What {@link Gate.admit} returns for an admitted request. */
export interface GateTicket {
  /** The model is done with the call (or it failed): frees the account's slot. Later calls are ignored. */
  settle(usage: { input_tokens: number; output_tokens: number } | undefined): void;
  /**
   * How the call was answered (once, before the reply is written; 499 when the client left);
   * resolves when its ledger row is written, rejects when it cannot be (the answer is then
   * withheld: 503 `store_unavailable`).
   */
  finish?(outcome: { status: number; model: string | undefined }): Promise<void> | void;
  /**
   * Reserves the call's tokens against the account's allowance before the model runs.
   * @throws an error with code `allowanceOverrun` (429) when the call would overrun it.
   */
  reserve?(usage: { input_tokens: number; output_tokens: number }): Promise<void>;
  /** The client went away before its answer: free the account's slot now (usage still follows via settle). */
  release?(): void;
}

/**
 * Admission over HTTP: the gate of `POST /v1/systemone` reads `Authorization: Bearer <key>` and
 * checks the key and the account's allowance before the body is read, so a request with a bad
 * key (401) or a spent allowance (429) costs neither the upload nor the parse of a body of up to
 * the body limit (issue 47, item 1); it takes the account's slot only once the body is complete
 * and parsed, so a slow upload holds no slot (issue 31, item 6).
 */

/** The routes that are gated, on `POST`: the two decision wires, which share each account's slot. */
export const GATED_ROUTES: readonly string[] = ["/v1/systemone", "/v1/decisions"];

/**
 * A {@link Gate} over an {@link Admission}. Its refusals are the admission's errors, each with its
 * code (401 for a key, 429 for a slot or an allowance), and a store that does not answer rejects
 * with `StoreUnavailableError` (503); the app's one mapping answers them (./error-handler.ts).
 */
export function accountGate(admission: Admission): Gate {
  return {
    async authenticate(request) {
      await admission.check(bearerKey(request.headers.authorization));
    },
    async admit(request) {
      const permit = await admission.admit(bearerKey(request.headers.authorization));
      return {
        settle: (usage) => permit.settle(usage),
        finish: (result) => permit.finish(result),
        release: () => permit.release(),
        reserve: (usage) => permit.reserve(usage),
      };
    },
  };
}

const tickets = new WeakMap<FastifyRequest, GateTicket>();
const handling = new WeakSet<FastifyRequest>();

/** The ticket the gate gave a request of the gated route (`undefined` when there is no gate). */
export function admittedTicket(request: FastifyRequest): GateTicket | undefined {
  return tickets.get(request);
}

/**
 * Installs the gate on the app: admission in `onRequest` (before the body is read), the release
 * of the account's slot at the latest when the reply is sent (`onSend`; the route settles sooner,
 * when the model is done), and the ledger row with the reply's status. A client that goes away
 * before its answer frees the slot at once; its call is recorded as 499 once the route lets go
 * of the model: with the call's usage when the model finished the call anyway, else with none
 * (a call cancelled part way is not charged; the engine stops it after the decode call in flight).
 *
 * @param modelOf - the served model a parsed body names, if any (for the ledger).
 */
export function installGate(
  app: FastifyInstance,
  gate: Gate,
  modelOf: (body: unknown) => string | undefined,
): void {
  const gated = (request: FastifyRequest) =>
    request.method === "POST" && GATED_ROUTES.includes(request.routeOptions.url ?? "");

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
    if (!handling.has(request)) ticket.settle(undefined);
    if (reply.raw.writableFinished) {
      void finish(request, ticket, reply.statusCode);
      return;
    }
    // The client left first: its slot is free now, its usage is charged when the route settles.
    ticket.release?.();
    void finish(request, ticket, 499);
  };

  const closed = new WeakSet<FastifyRequest>();
  app.addHook("onRequest", async (request, reply) => {
    if (!gated(request)) return;
    reply.raw.once("close", () => {
      closed.add(request);
      const ticket = tickets.get(request);
      if (ticket) onClose(request, reply, ticket);
    });
    await gate.authenticate?.(request);
  });

  // The slot is taken once the body is complete and parsed, just before the route runs.
  app.addHook("preHandler", async (request, reply) => {
    if (!gated(request)) return;
    const ticket = await gate.admit(request);
    tickets.set(request, ticket);
    if (closed.has(request)) onClose(request, reply, ticket);
    else handling.add(request);
  });

  // The ledger row is written before the answer leaves: every answer a client got is charged.
  // When it cannot be, the answer is withheld and the error handler answers 503 instead; that
  // reply comes back through here, and is not recorded again (the store just failed).
  const recorded = new WeakSet<FastifyRequest>();
  app.addHook("onSend", async (request, reply, payload) => {
    const ticket = tickets.get(request);
    if (!ticket || recorded.has(request)) return payload;
    recorded.add(request);
    ticket.settle(undefined); // no-op after the route's own settle
    try {
      await ticket.finish?.({ status: reply.statusCode, model: modelOf(request.body) });
    } catch (error) {
      throw asStoreUnavailable(error);
    }
    return payload;
  });
}
