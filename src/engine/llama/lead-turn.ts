import type { LlamaContextSequence } from "node-llama-cpp";
import { leadCallsFrom, leadWindows, type DecodePlan } from "../decode/index.js";
import { countBranchTokens, evaluateCalls, type DecodeTally } from "./lanes.js";
import { workLeft, YIELDED, type Progress, type TurnOptions } from "./turns.js";
import { discardWindows, type LeadWindowsRunner } from "./windowed-lead.js";
import type { ScoreRequest } from "../types.js";

/**
 * A request's lead in its turns with the in-process engine's model: the tokens every branch
 * starts with, into sequence 0 on top of the prefix, in windows when the request has them
 * (windowed-lead.ts), giving the model up between decode calls or windows (docs/decisions/103).
 */

/** Where {@link runLeadTurn} evaluates the lead, and how it parks what sequence 0 holds. */
export interface LeadTurnOptions extends TurnOptions {
  /** Sequence 0, holding the prefix and the lead's first `from` tokens. */
  readonly sequence: LlamaContextSequence;
  /** Evaluates a lead's windows; `undefined`: windows are not used. */
  readonly windows: LeadWindowsRunner | undefined;
  /** The turn's tally; the request's `evaluatedTokens` take it when the turn gives way. */
  readonly tally: DecodeTally;
  readonly signal: AbortSignal | undefined;
}

/**
 * The common lead of a request's branches, into sequence 0 on top of the prefix: from `from`
 * (0, or `progress.leadDone` in a turn that took back the prefix and part of the lead) until it
 * is whole, or until the turn gives the model up between two decode calls to a request with less
 * work waiting. A one-question request is almost all lead (its question and options, thousands
 * of tokens with many described options), so without this it would hold the model for all of
 * it. It gives way only when it can park the prefix and the lead so far. Its calls are paced as
 * a prefix's are (call-pace.ts, `options.pace`): the first as the engine's last timed call says,
 * then what fits in the call budget; for a request that gave way before, at most
 * `CONTENDED_CALL_TOKENS`. Any cut of the lead's tiled part gives the same logits
 * (kernel-split.ts). A lead the request cuts into
 * windows (`ScoreRequest.windows`) has them evaluated first, unless sequence 0 holds them
 * already (windowed-lead.ts); the turn may give way between two windows.
 * @param progress - updated: `leadDone`, `windows`, `leadLayout`, `windowsOff`, and on giving way `parked`,
 *   `parkedWithLead`, `workLeft` and `evaluatedTokens`
 * @returns `true` once the lead is whole, {@link YIELDED} when the turn gave way
 * @throws the signal's reason when aborted (checked before each call)
 */
export async function runLeadTurn(
  request: ScoreRequest,
  plan: DecodePlan,
  progress: Progress,
  from: number,
  options: LeadTurnOptions,
): Promise<true | typeof YIELDED> {
  const { sequence, tally, signal } = options;
  const lead = request.branches[0]?.tokens ?? [];
  const pace = options.pace;
  let giveWay = options.giveWay;
  const leadWork = workLeft(request, plan.lead.length, request.prefix.length, undefined, false);
  // Gives way: parks the prefix and the lead's first `done` tokens (`evaluated` of the lead's
  // tokens are done, with the windows kept in `progress`).
  const parked = async (done: number, evaluated = done) => {
    progress.parked = await options.park();
    if (progress.parked === undefined) return (giveWay = undefined);
    progress.parkedWithLead = true;
    progress.leadDone = done;
    progress.workLeft = leadWork - evaluated;
    progress.evaluatedTokens += tally.evaluatedTokens;
    return true;
  };
  let at = from;
  const ends = options.windows?.enabled ? leadWindows(request.windows, plan.lead) : undefined;
  const windowed = ends !== undefined && at < ends.at(-1)!;
  if (windowed) {
    progress.leadHeld = 0;
    const done = (progress.windows ??= { evaluated: 0 });
    const end = ends.at(-1)!;
    for (;;) {
      const stop = giveWay && ((left: number) => giveWay!(leadWork - (end - left)));
      const turn = { prefixLength: request.prefix.length, lead, ends, tally, signal };
      const run = await options.windows!.run(done, { ...turn, ...options, giveWay: stop });
      // Between two windows sequence 0 holds the prefix; the windows evaluated are in `done`.
      if (run === "stopped" && (await parked(0, ends[done.evaluated - 1] ?? 0))) return YIELDED;
      if (run === "stopped") continue;
      progress.windows = undefined;
      if (run === "failed") progress.windowsOff = options.windows!.offMs;
      at = run === "whole" ? end : 0;
      progress.leadLayout = run === "whole" ? ends : undefined;
      break;
    }
  } else {
    // Windows turned off (another request's failed) while this one was parked: what it wrote goes.
    await discardWindows(progress.windows);
    progress.windows = undefined;
  }
  progress.leadHeld = at;
  for (let k = 0; at < plan.lead.length; k++) {
    if (k > 0 && giveWay?.(leadWork - at) && (await parked(at))) return YIELDED;
    const size = leadCallsFrom(request, plan, at, pace.tokens)[0]!;
    const start = at;
    const depth = request.prefix.length + start + size;
    await pace.time(size, depth, () => evaluateCalls(sequence, lead, start, [size], signal));
    countBranchTokens(tally, size);
    at += size;
    progress.leadHeld = at;
  }
  progress.leadDone = undefined;
  return true;
}
