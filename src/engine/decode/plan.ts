import {
  afterLead,
  branchCallSizes,
  leadCallSizes,
  leadTiledLength,
  scheduleBranches,
  type ScheduledBranch,
} from "./branch-schedule.js";
import { prefixCallSizes, prefixResumeAfter } from "./kernel-split.js";
import type { ScoreRequest } from "../types.js";

/**
 * The decode plan of a request: which tokens are taken over from the KV cache, which are
 * evaluated, in which decode calls (token counts) and on which lane, so that every token goes
 * through the attention kernel it would alone (kernel-split.ts) and tokens that branches share
 * at their start are evaluated once (branch-schedule.ts). Pure: the in-process engine
 * (engine/llama/), the llama-server backend (engine/remote/llama-server.ts) and the benchmark's
 * floor (bench/run.mjs) execute the same plan.
 */

/** What a KV-cache sequence holds of an earlier prefix when a request comes. */
export interface HeldPrefix {
  /** Leading tokens of the request's prefix that the sequence holds. */
  readonly shared: number;
  /**
   * Length of the prefix those tokens were cut into calls for (by its own call map); `undefined`
   * when not known (an evaluation broke off), and then nothing is taken over.
   */
  readonly length: number | undefined;
}

/** One branch in a lane's run, with its decode calls. */
export interface PlannedBranch extends ScheduledBranch {
  /**
   * Decode calls (token counts) that evaluate the branch's tokens from `shared` to its end; the
   * last one reads the answer position. Children are evaluated in one call each.
   */
  readonly calls: readonly number[];
}

/** What {@link planDecode} returns. */
export interface DecodePlan {
  readonly prefix: {
    /** Prefix tokens taken over from the held sequence; evaluation starts at `prefix[resume]`. */
    readonly resume: number;
    /** Decode calls that evaluate the prefix from `resume` to its end. */
    readonly calls: readonly number[];
    /** Decode calls of the whole prefix from its start (a lane that cannot copy the first). */
    readonly wholeCalls: readonly number[];
  };
  /**
   * The tokens every branch starts with, evaluated once on top of the prefix, and their calls; a
   * lone branch's tokens before its last call.
   */
  readonly lead: {
    readonly length: number;
    readonly calls: readonly number[];
    /** Its first tokens that go through the tiled kernel: all of a lone branch's lead. */
    readonly tiled: number;
  };
  /** One run of branches per lane (lane 0 first); each branch appears in exactly one run. */
  readonly lanes: readonly (readonly PlannedBranch[])[];
}

/** How an engine decodes: its KV-cache sequences for branches and its largest decode call. */
export interface DecodeLimits {
  /** Lanes (KV-cache sequences) the branches may be spread over, at least 1. */
  readonly lanes: number;
  /** Most tokens one decode call takes, at least 128. */
  readonly batchSize: number;
}

/**
 * Plans the decode calls of a request on top of what a sequence holds.
 * @param request - the prefix and the branches (each with at least one token)
 * @param held - what the sequence that evaluates the prefix holds of it
 * @returns the prefix's resume point and calls, the common lead and its calls, and each lane's
 *   branches with the point each resumes from and its calls
 * @throws `RangeError` when `limits.batchSize` is below 128
 * @example
 * ```ts
 * const plan = planDecode({ prefix, branches }, { shared: 0, length: 0 }, { lanes: 1, batchSize: 1024 });
 * plan.prefix.calls; // → [prefix.length] for a prefix of 64 to 1024 tokens
 * ```
 */
export function planDecode(
  request: Pick<ScoreRequest, "prefix" | "branches">,
  held: HeldPrefix,
  limits: DecodeLimits,
): DecodePlan {
  const length = request.prefix.length;
  const { batchSize } = limits;
  const resume =
    held.length === undefined ? 0 : prefixResumeAfter(held.shared, held.length, length);
  const schedule = scheduleBranches(request.branches, limits.lanes, batchSize);
  return {
    prefix: {
      resume,
      calls: prefixCallSizes(resume, length, batchSize),
      wholeCalls: prefixCallSizes(0, length, batchSize),
    },
    lead: {
      length: schedule.lead,
      calls: leadCallSizes(request.branches, schedule.lead, batchSize),
      tiled: leadTiledLength(request.branches, schedule.lead),
    },
    lanes: schedule.lanes.map((run) =>
      run.map(({ index, shared }) => ({
        index,
        shared,
        calls: branchCallSizes(request.branches[index]!, shared, batchSize),
      })),
    ),
  };
}

/**
 * Branch `index` of a request planned as the first of a lane's run: right after the common lead
 * of `lead` tokens. For a run resumed part way, in a later turn, on a sequence that holds the
 * prefix and the lead again but not the branch before it.
 */
export function branchAfterLead(
  request: Pick<ScoreRequest, "branches">,
  index: number,
  lead: number,
  batchSize: number,
): PlannedBranch {
  return branchFrom(request, index, afterLead(request.branches[index]!, lead), batchSize);
}

/**
 * Branch `index` of a request planned from its token `from` on, which the sequence holds: a
 * branch a turn stopped inside, between two of its decode calls, taken back in a later turn.
 * @param from - where a call of the branch ended: the start of its one-row part, or a point
 *   of its tiled part with none or at least 64 tiled tokens after it (kernel-split.ts)
 * @throws `RangeError` when `from` leaves fewer than 64 tiled tokens, no token, or a one-row
 *   call of a single token
 */
export function branchFrom(
  request: Pick<ScoreRequest, "branches">,
  index: number,
  from: number,
  batchSize: number,
): PlannedBranch {
  const { length } = request.branches[index]!.tokens;
  // Its last token is read, and a one-row call of a single token takes another kernel.
  if (from >= length || (length - from === 1 && length > 1))
    throw new RangeError(`a branch of ${length} tokens cannot resume at ${from}`);
  return { index, shared: from, calls: branchCallSizes(request.branches[index]!, from, batchSize) };
}

/**
 * The decode calls that evaluate the rest of a plan's common lead, from token `from` on: for a
 * turn that takes over the prefix and the part of the lead an earlier turn evaluated. Any cut of
 * the lead's tiled part in calls of at least 64 tokens gives the same logits (kernel-split.ts).
 * @param from - lead tokens already evaluated: 0, or where an earlier cut of the lead ended a call
 * @throws `RangeError` when `from` is not such a point
 */
export function leadCallsFrom(
  request: Pick<ScoreRequest, "branches">,
  plan: Pick<DecodePlan, "lead">,
  from: number,
  batchSize: number,
): number[] {
  return leadCallSizes(request.branches, plan.lead.length, batchSize, from);
}

/**
 * The decode calls that evaluate a prefix of `length` tokens from `from`, for a sequence that
 * kept other than the planned {@link DecodePlan.prefix} `resume` tokens.
 * @throws `RangeError` when `from` is not a point a prefix may resume from
 */
export function prefixCallsFrom(from: number, length: number, batchSize: number): number[] {
  return prefixCallSizes(from, length, batchSize);
}
