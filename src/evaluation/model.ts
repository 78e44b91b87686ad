import { existsSync } from "node:fs";
import { basename, resolve } from "node:path";
import { DEFAULT_MODEL, findModel } from "../models/catalogue.js";
import { ensureModel } from "../models/pull.js";

/** A model file to evaluate and the id its calibration profile is filed under. */
export interface ResolvedModel {
  readonly modelPath: string;
  /** Catalogue name, or the file name without `.gguf` (as `serve` names it). */
  readonly modelId: string;
}

/**
 * Resolves `--model` the way `serve` does: a path to an existing file or anything ending in
 * `.gguf` is a local file; otherwise a catalogue name, pulled when not cached.
 * @throws {Error} for an unknown name or a missing file.
 */
export async function resolveModel(
  nameOrPath: string = DEFAULT_MODEL,
  progress = true,
): Promise<ResolvedModel> {
  const local = existsSync(nameOrPath) || nameOrPath.endsWith(".gguf");
  if (local) {
    const modelPath = resolve(nameOrPath);
    if (!existsSync(modelPath)) throw new Error(`no such model file: ${modelPath}`);
    return { modelPath, modelId: basename(modelPath).replace(/\.gguf$/i, "") };
  }
  const entry = findModel(nameOrPath);
  if (!entry)
    throw new Error(
      `unknown model "${nameOrPath}": give a catalogue name (decisiond pull --help) or a path to a .gguf file`,
    );
  return { modelPath: await ensureModel(entry.name, { progress }), modelId: entry.name };
}
