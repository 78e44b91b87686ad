import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CalibrationProfile } from "../decision/calibration.js";
import { promptFingerprint } from "../decision/fingerprint.js";
import { TUNED_READOUT, type ReadoutSettings } from "../decision/options.js";
import { adapterProfileId } from "./adapters.js";

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

/** A model bundle as the composition root (src/service/build.ts) serves it. */
export interface ModelBundle {
  /** Model id (catalogue name, the file name for a `--model PATH`, or the engine's). */
  readonly modelId: string;
  /** Absolute path of the base GGUF; `""` when a remote engine holds the model. */
  readonly modelPath: string;
  /** Absolute path of the LoRA adapter; `undefined` for the base alone. */
  readonly adapterPath: string | undefined;
  /** The calibration profile applied to its answers; `undefined` for none. */
  readonly profile: CalibrationProfile | undefined;
  /** The readout the bundle is served with by default: {@link TUNED_READOUT} with an adapter, else none. */
  readonly readout: Readonly<ReadoutSettings>;
}

/**
 * Puts a model bundle together: its calibration profile (the adapter's with an adapter, see
 * {@link loadCalibrationProfile}) and, with an adapter, the check that it was trained on the prompt
 * format this code renders. Opens no engine: a refused bundle costs no model load.
 * @param model - the model's id and files; `modelPath` `""` when a remote engine holds it
 * @param calibration - a profile to apply instead of the bundle's own, or `"none"`
 * @throws {@link PromptFormatMismatchError} when the adapter's fingerprint differs from this code's
 * @throws SyntaxError when a profile file exists but is not valid JSON
 * @example `const bundle = await modelBundle({ modelId, modelPath, adapterPath });`
 */
export async function modelBundle(
  model: { readonly modelId: string; readonly modelPath: string; readonly adapterPath?: string },
  calibration?: CalibrationProfile | "none",
): Promise<ModelBundle> {
  const { modelId, modelPath, adapterPath } = model;
  if (adapterPath) await checkAdapterBundle(adapterPath, TUNED_READOUT);
  const profile =
    calibration === "none"
      ? undefined
      : (calibration ??
        (adapterPath
          ? loadCalibrationProfile(adapterProfileId(adapterPath), adapterPath)
          : loadCalibrationProfile(modelId, modelPath)));
  return { modelId, modelPath, adapterPath, profile, readout: adapterPath ? TUNED_READOUT : {} };
}

/**
 * The calibration profile of a model: `<model file>.calibration.json` beside the model file,
 * else `profiles/<model id>.json` shipped with decisiond; `undefined` when neither exists.
 * @param modelId - the id the profile is filed under (an adapter's: {@link adapterProfileId})
 * @param modelPath - the model's (or adapter's) file; `""` for none
 * @throws SyntaxError when a profile file exists but is not valid JSON.
 * @example loadCalibrationProfile("smollm2-135m-instruct", "") // → profiles/smollm2-135m-instruct.json, if shipped
 */
export function loadCalibrationProfile(
  modelId: string,
  modelPath: string,
): CalibrationProfile | undefined {
  const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
  for (const file of [
    ...(modelPath ? [`${modelPath}.calibration.json`] : []),
    join(packageRoot, "profiles", `${modelId}.json`),
  ]) {
    if (existsSync(file)) return JSON.parse(readFileSync(file, "utf8")) as CalibrationProfile;
  }
  return undefined;
}
