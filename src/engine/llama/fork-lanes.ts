import type { LlamaContextSequence } from "node-llama-cpp";
import type { DecodePlan } from "../decode/index.js";
import type { Token } from "../types.js";
import { evaluateCalls, type DecodeTally } from "./lanes.js";

/** node-llama-cpp's sequence with the KV-copy method its own LlamaDecisionContext uses. */
type CopyableSequence = LlamaContextSequence & {
  _copyStateFromOtherSequence(
    other: LlamaContextSequence,
    upToTokenIndex: number,
  ): Promise<boolean>;
};

/**
 * The sequences of a plan's lanes: `first` (sequence 0, holding the prefix and the lead) runs lane
 * 0; each other lane's sequence, taken from `helpers` in order, gets a copy of its KV cells
 * (`llama_memory_seq_cp`), once per request and before any branch runs (node-llama-cpp's
 * non-unified KV cache copies a whole stream of cells per copy, whatever the prefix length).
 * Where the copy is not possible, the lane evaluates the prefix and the lead itself, cut into
 * calls as sequence 0 cut them, and the tally counts them.
 * @returns one sequence per lane of `plan`, `first` first
 */
export async function forkLanes(
  first: LlamaContextSequence,
  helpers: readonly LlamaContextSequence[],
  prefix: readonly Token[],
  lead: readonly Token[],
  plan: DecodePlan,
  tally: DecodeTally,
): Promise<LlamaContextSequence[]> {
  const lanes = helpers.slice(0, plan.lanes.length - 1);
  const base = prefix.length + lead.length;
  for (const sequence of lanes) {
    const copied = await (sequence as CopyableSequence)._copyStateFromOtherSequence(first, base);
    if (!copied) {
      await sequence.clearHistory();
      await evaluateCalls(sequence, prefix, 0, plan.prefix.wholeCalls);
      await evaluateCalls(sequence, lead, 0, plan.lead.calls);
      tally.evaluatedTokens += base;
      tally.counters.prefixTokensEvaluated += base;
    }
  }
  return [first, ...lanes];
}
