import { existsSync } from "node:fs";
import { basename, resolve } from "node:path";
import { DEFAULT_MODEL, findModel } from "../models/catalogue.js";
import { adapterProfileId, resolveAdapter } from "../models/adapters.js";
import { checkGgufFile } from "../models/gguf-file.js";
import { ensureModel } from "../models/pull.js";

/** A model file to evaluate and the id its calibration profile is filed under. */
export interface ResolvedModel {
  readonly modelPath: string;
  /** Catalogue name, or the file name without `.gguf` (as `serve` names it). */
  readonly modelId: string;
  /** The LoRA adapter applied on top (see models/adapters.ts resolveAdapter); none when absent. */
  readonly adapterPath?: string;
  /** The id its calibration profile is filed under: the adapter's when there is one. */
  readonly profileId: string;
}

/**
 * Resolves `--model` the way `serve` does: a path to an existing file or anything ending in
 * `.gguf` is a local file; otherwise a catalogue name, pulled when not cached.
 * @throws {@link Error} for an unknown name or a missing file.
 */
export async function resolveModel(
  nameOrPath: string = DEFAULT_MODEL,
  progress = true,
  adapter?: string,
): Promise<ResolvedModel> {
  const local = existsSync(nameOrPath) || nameOrPath.endsWith(".gguf");
  if (local) {
    const modelPath = resolve(nameOrPath);
    checkGgufFile(modelPath, "model");
    return withAdapter(
      { modelPath, modelId: basename(modelPath).replace(/\.gguf$/i, "") },
      resolveAdapter(adapter, undefined),
    );
  }
  const entry = findModel(nameOrPath);
  if (!entry)
    throw new Error(
      `unknown model "${nameOrPath}": give a catalogue name (decisiond pull --help) or a path to a .gguf file`,
    );
  return withAdapter(
    { modelPath: await ensureModel(entry.name, { progress }), modelId: entry.name },
    resolveAdapter(adapter, entry),
  );
}

function withAdapter(
  model: { modelPath: string; modelId: string },
  adapterPath: string | undefined,
): ResolvedModel {
  return adapterPath
    ? { ...model, adapterPath, profileId: adapterProfileId(adapterPath) }
    : { ...model, profileId: model.modelId };
}
