import { existsSync } from "node:fs";
import { basename, resolve } from "node:path";
import type { ServeConfig } from "../cli/serve-config.js";
import type { ServiceSettings } from "../cli/service-settings.js";
import { renderMediaText } from "../decision/prompt.js";
import { openLlamaEngine } from "../engine/llama/index.js";
import type { Engine } from "../engine/types.js";
import { openVisionEngine } from "../engine/vision/index.js";
import type { MediaOptions } from "../media/request.js";
import { DEFAULT_VIDEO_FRAMES, DEFAULT_VIDEO_MAX_SECONDS } from "../media/video.js";
import { resolveAdapter } from "../models/adapters.js";
import { checkGgufFile } from "../models/gguf-file.js";
import { mergedModelFile } from "../models/merge-adapter.js";
import { CATALOGUE, DEFAULT_MODEL, findModel, type CatalogueEntry } from "../models/catalogue.js";
import { ensureEntry, ensureModel } from "../models/pull.js";

/**
 * The model side of a service, as the composition root (./build.ts) opens it: the files a
 * configuration names (pulled when not cached), the engine that loads them (also `eval`'s and
 * `calibrate`'s), and the media a vision model takes.
 *
 * @packageDocumentation
 */

/** How a catalogue model is served: its name (the default's also as the public name) and card. */
export interface ServedCard {
  readonly modelId?: string | undefined;
  readonly description?: string | undefined;
  readonly releaseDate?: string | undefined;
  readonly isDefault?: boolean;
}

/**
 * Loads a bundle's model in-process: the vision engine with a projector, else the text engine
 * with the bundle's adapter, added into a copy of the model's weights once
 * (models/merge-adapter.ts `mergedModelFile`, kept under `<home>/models/merged/`) so requests do
 * not pay for it per token; applied at run time instead where it cannot be added (a weight type
 * the merge does not write, a folder it cannot write). `serve`, `eval` and `calibrate` all open
 * their model here.
 * @param settings - the engine's settings (context, threads, …); absent ones take the engine's defaults
 * @param media - the projector of a vision model
 * @throws the engine's error when the model cannot load
 * @example `const engine = await openModelEngine(bundle, { contextSize: 2048 });`
 */
export async function openModelEngine(
  bundle: { readonly modelId: string; readonly modelPath: string; readonly adapterPath?: string },
  settings: Pick<
    ServiceSettings,
    "contextSize" | "threads" | "parallelBranches" | "batchSize" | "prefixCacheBytes" | "imageSize"
  >,
  media: { readonly mmprojPath?: string } = {},
): Promise<Engine> {
  if (media.mmprojPath)
    return openVisionEngine({
      modelPath: bundle.modelPath,
      mmprojPath: media.mmprojPath,
      id: bundle.modelId,
      contextSize: settings.contextSize,
      threads: settings.threads,
      batchSize: settings.batchSize,
      imageSize: settings.imageSize,
    });
  return openLlamaEngine({
    ...(await adapterWeights(bundle.modelPath, bundle.adapterPath)),
    id: bundle.modelId,
    contextSize: settings.contextSize,
    threads: settings.threads,
    parallelBranches: settings.parallelBranches,
    batchSize: settings.batchSize,
    prefixCacheBytes: settings.prefixCacheBytes,
  });
}

/**
 * The files an engine loads for a model and adapter: the model with the adapter added into it
 * (`mergedModelFile`), else both, for llama.cpp to apply the adapter per token; the model alone
 * without an adapter.
 * @example `openLlamaEngine({ ...(await adapterWeights(modelPath, adapterPath)), id })`
 */
export async function adapterWeights(
  modelPath: string,
  adapterPath: string | undefined,
): Promise<{ modelPath: string; adapterPath?: string; mergedAdapter?: string }> {
  if (!adapterPath) return { modelPath };
  try {
    return {
      modelPath: await mergedModelFile(modelPath, adapterPath),
      mergedAdapter: basename(adapterPath),
    };
  } catch {
    // Unmergeable, or the cache cannot be written: llama.cpp applies the adapter per token.
    return { modelPath, adapterPath };
  }
}

/**
 * How the served model takes media: images at the engine's projector size, and a video's frames
 * capped so that they fill at most half of the context (the rest is for the state and questions).
 */
export async function mediaOptions(
  engine: Engine,
  options: Pick<ServiceSettings, "videoFrames" | "videoMaxSeconds" | "maxImagePixels">,
): Promise<MediaOptions> {
  const { imageSize, imageTokens, contextSize } = engine.model;
  if (!imageSize || !imageTokens) throw new Error("a vision engine must report its image size");
  const wanted = options.videoFrames ?? DEFAULT_VIDEO_FRAMES;
  // A frame's cost: its image positions plus its caption, measured on the widest caption.
  const caption = renderMediaText({
    kind: "video",
    frames: Array.from({ length: Math.max(wanted, 2) }, () => ({
      image: { data: new Uint8Array(), mimeType: "image/png" as const },
      seconds: 1000,
    })),
    durationSeconds: 1000,
  }).before[1]!;
  const perFrame = imageTokens + (await engine.tokenize(caption)).length;
  const fit = Math.max(1, Math.floor(contextSize / 2 / perFrame));
  return {
    imageSize,
    videoFrames: Math.min(wanted, fit),
    videoMaxSeconds: options.videoMaxSeconds ?? DEFAULT_VIDEO_MAX_SECONDS,
    maxPixels: options.maxImagePixels,
  };
}

/** The files `serve` loads: the model's, its projector's and its adapter's, and its entry. */
export interface ModelFiles {
  readonly modelPath: string;
  readonly mmprojPath: string | undefined;
  readonly adapterPath: string | undefined;
  /** The catalogue entry; `undefined` for a `--model PATH`. */
  readonly entry: CatalogueEntry | undefined;
}

/**
 * The files of `--model`, `--mmproj` and `--adapter`, pulling a catalogue model (and its
 * projector) when it is not cached.
 * @throws Error for an unknown model name, or a model or projector file that does not exist or
 *   is not a GGUF file.
 */
export async function modelFiles(config: ServeConfig): Promise<ModelFiles> {
  const local = existsSync(config.model) || config.model.endsWith(".gguf");
  const entry = local ? undefined : findModel(config.model);
  if (!local && !entry) {
    throw new Error(
      `unknown model "${config.model}": give a catalogue name (decisiond pull --help) or a path to a .gguf file`,
    );
  }
  const modelPath = local
    ? resolve(config.model)
    : await ensureModel(config.model, { progress: true });
  if (local) checkGgufFile(modelPath, "model");
  const mmprojPath = config.mmproj
    ? resolve(config.mmproj)
    : entry?.mmproj
      ? await ensureEntry(entry.mmproj, { progress: true })
      : undefined;
  if (mmprojPath && config.mmproj) checkGgufFile(mmprojPath, "projector");
  return { modelPath, mmprojPath, adapterPath: resolveAdapter(config.adapter, entry), entry };
}

/** How a catalogue model is served: its name (the default's also as the public name) and card. */
export function servedEntry(entry: CatalogueEntry | undefined): ServedCard {
  return {
    modelId: entry?.name,
    description: entry?.description,
    releaseDate: entry?.releaseDate,
    isDefault: entry?.name === DEFAULT_MODEL,
  };
}

/** The catalogue entry whose file an engine serves (by file name), if any. */
export function catalogueEntryOfFile(path: string): CatalogueEntry | undefined {
  const file = path.split(/[\\/]/).pop();
  return CATALOGUE.find((entry) => entry.file === file);
}
