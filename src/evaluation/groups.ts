import { DATASETS } from "./datasets.js";

// Why these groups, and how they are run: docs/decisions/088-broad-mix-and-transfer.md
/**
 * The task groups of the leave-group-out protocol (issue 48): related datasets that a transfer
 * run leaves out of training together and is then evaluated on, so a group measures answers to
 * tasks of a kind the adapter never saw. Names are `decisiond eval convert` dataset names.
 * None of them is among the datasets the shipped adapter of issue 30 was trained on, so a run
 * that continues from it is still a transfer run for every group.
 */
export const TASK_GROUPS: Readonly<Record<string, readonly string[]>> = {
  /** Routing a user's request among a product's intents. */
  intents: ["atis", "snips", "hwu64"],
  /** Whether and how much two sentences mean the same. */
  similarity: ["mrpc", "stsb", "sick", "sick-entailment"],
  /** The emotion of a short text. */
  emotions: ["emotion", "goemotions"],
  /** Multiple-choice science questions. */
  science: ["arc", "openbookqa", "qasc"],
  /** Whether a statement or an answer is true. */
  truth: ["liar", "commonsenseqa2", "mctaco"],
};

/**
 * The datasets of a group.
 * @throws {@link Error} naming the known groups when `name` is not one
 * @example groupDatasets("intents") // → ["atis", "snips", "hwu64"]
 */
export function groupDatasets(name: string): readonly string[] {
  const datasets = TASK_GROUPS[name];
  if (!datasets)
    throw new Error(`unknown task group "${name}"; known: ${Object.keys(TASK_GROUPS).join(", ")}`);
  return datasets;
}

/** Every dataset name that some group lists must be a converter's name. */
export function checkGroups(): void {
  const known = new Set(DATASETS.map((d) => d.name));
  for (const [group, names] of Object.entries(TASK_GROUPS))
    for (const name of names)
      if (!known.has(name)) throw new Error(`task group ${group} names no dataset "${name}"`);
}
