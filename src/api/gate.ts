import type { FastifyRequest } from "fastify";
import type { Admission } from "../accounts/admission.js";
import { bearerKey } from "../protocol/bearer.js";

/**
 * Admission of a request before it reaches the model (authentication, per-account concurrency,
 * allowance). `authenticate` runs in `onRequest`, before the body is read, so a request with a
 * bad key (401) or a spent allowance (429) costs neither the upload nor the parse of its body
 * (issue 47, item 1); `admit` runs once the body is complete and parsed, so a slow upload holds
 * no slot (issue 31, item 6) (the decision routes' hooks, ./decision-hooks.ts); each throws an error with its code of the error table
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
   * @param work - tokens the engine expects to evaluate, when it says (for Retry-After)
   * @throws an error with code `allowanceOverrun` (429) when the call would overrun it.
   */
  reserve?(usage: { input_tokens: number; output_tokens: number }, work?: number): Promise<void>;
  /** The client went away before its answer: free the account's slot now (usage still follows via settle). */
  release?(): void;
}

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
        reserve: (usage, work) => permit.reserve(usage, work),
      };
    },
  };
}
