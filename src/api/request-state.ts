import type { FastifyInstance } from "fastify";
import type { InexactInteger } from "../protocol/json-scan.js";
import type { GateTicket } from "./gate.js";

/**
 * What the app keeps on a request while it is answered, declared once on Fastify's request
 * (`decorateRequest`, typed by the module augmentation below) instead of in maps beside it.
 *
 * @packageDocumentation
 */

/** The gate's state of a decision request (./decision-hooks.ts). */
export interface AdmissionState {
  /** The gate's ticket once the request is admitted; `undefined` before. */
  ticket: GateTicket | undefined;
  /** The route took the call over: it settles the ticket itself once the model lets go. */
  handling: boolean;
  /** The connection closed (answered, or the client left). */
  closed: boolean;
  /** The ledger row went with the answer (`onSend`); a later reply is not recorded again. */
  recorded: boolean;
}

declare module "fastify" {
  interface FastifyRequest {
    /** `performance.now()` when the request arrived, for Server-Timing `app`. */
    receivedAt: number;
    /** The `error_type` of the request's error answer, for the metrics; "" for none. */
    errorType: string;
    /**
     * The gate's state of a decision request; `null` on other routes and on a server without a
     * gate (`--auth off`).
     */
    admission: AdmissionState | null;
    /** The integers a JSON body's scan found that a float would round (./json-scan.ts). */
    inexactIntegers: readonly InexactInteger[] | null;
  }
}

/**
 * Declares the request state on the app, before any hook sets it.
 * @example declareRequestState(app);
 */
export function declareRequestState(app: FastifyInstance): void {
  app.decorateRequest("receivedAt", 0);
  app.decorateRequest("errorType", "");
  app.decorateRequest("admission", null);
  app.decorateRequest("inexactIntegers", null);
}
