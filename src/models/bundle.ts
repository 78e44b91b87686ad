import { existsSync, readFileSync } from "node:fs";
import { promptFingerprint } from "../decision/fingerprint.js";
import type { ReadoutSettings } from "../decision/options.js";

/**
 * The model bundle (DESIGN.md): a base GGUF, the LoRA adapter trained on it, the adapter's
 * calibration profile and the fingerprint of the prompt format it was trained on. The adapter's
 * summary (`<adapter>.json`, written by `npm run train`) carries the fingerprint.
 */

/** What the file beside a shipped adapter (`<adapter>.json`, the training summary) says of it. */
export interface AdapterBundle {
  /**
   * The fingerprint of the prompt format the adapter was trained on (decision/fingerprint.ts);
   * absent in adapters trained before bundles carried it.
   */
  readonly promptFingerprint?: string;
}

/**
 * Reads the summary beside an adapter: `name.decision.gguf` → `name.decision.json`.
 * @returns its fields, or `undefined` when there is no such file
 * @throws {@link Error} naming the file when it is not a JSON object
 */
export function readAdapterBundle(adapterPath: string): AdapterBundle | undefined {
  const path = adapterPath.replace(/\.gguf$/i, "") + ".json";
  if (!existsSync(path)) return undefined;
  const value: unknown = JSON.parse(readFileSync(path, "utf8"));
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new Error(`${path}: an adapter's summary must be a JSON object`);
  const fingerprint = (value as Record<string, unknown>).promptFingerprint;
  return typeof fingerprint === "string" ? { promptFingerprint: fingerprint } : {};
}

/** An adapter trained on another prompt format than the one this decisiond renders. */
export class PromptFormatMismatchError extends Error {
  constructor(adapterPath: string, trained: string, rendered: string) {
    super(
      `the adapter ${adapterPath} was trained on prompts of format ${trained.slice(0, 12)}, ` +
        `but this decisiond renders format ${rendered.slice(0, 12)}: its answers would be read ` +
        `from prompts it never saw. Retrain it on this code (npm run train) or serve without it ` +
        `(--adapter none).`,
    );
    this.name = "PromptFormatMismatchError";
  }
}

/**
 * Checks that an adapter was trained on the prompt format this code renders for the readout it
 * is served with (decision/fingerprint.ts). An adapter whose summary has no fingerprint (trained
 * before bundles carried one, or by hand) passes: there is nothing to check it against.
 * @param readout - the readout the adapter is trained for (`TUNED_READOUT`)
 * @throws {@link PromptFormatMismatchError} when the fingerprints differ
 * @example await checkAdapterBundle("adapters/smollm2-135m-instruct.decision.gguf", TUNED_READOUT);
 */
export async function checkAdapterBundle(
  adapterPath: string,
  readout: ReadoutSettings,
): Promise<void> {
  const trained = readAdapterBundle(adapterPath)?.promptFingerprint;
  if (trained === undefined) return;
  const rendered = await promptFingerprint(readout);
  if (trained !== rendered) throw new PromptFormatMismatchError(adapterPath, trained, rendered);
}
