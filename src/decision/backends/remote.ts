import {
  checkEngineSpecs,
  DEFAULT_ENGINE_DEADLINE_MS,
  openEnginePool,
  type EnginePool,
  type EngineKind,
  type EngineSpec,
  type RemoteOptions,
} from "../../engine/remote/index.js";
import { SystemOnePassThrough } from "./systemone.js";

/**
 * The decision backend of `serve --engine`: decisiond's own readout over a pool of remote
 * engines, or a pass-through when the engines answer `/v1/systemone` themselves.
 * Why this choice sits beside the decision layer and not in engine/remote/: docs/decisions/089
 *
 * @packageDocumentation
 */

/** What remote engines serve through: an engine pool (decisiond's readout), or a pass-through. */
export type RemoteServing =
  | { readonly kind: "engine"; readonly engine: EnginePool }
  | { readonly kind: "pass-through"; readonly passThrough: SystemOnePassThrough };

/** The kinds of engine that may answer `/v1/systemone` themselves (llama.cpp's llama-server). */
const MAY_ANSWER_DECISIONS: readonly EngineKind[] = ["llama-server"];

/**
 * Opens the remote engines of `--engine`: a pool of them, or, when they are llama-servers that
 * answer `/v1/systemone` themselves, a pass-through.
 * @throws `Error` for engines of different kinds, or of different models, or llama-servers of
 *   which only some answer `/v1/systemone`.
 * @throws `EngineUnavailableError` when none answers.
 * @example
 * ```ts
 * const serving = await openRemoteEngines(config.engines, { deadlineMs: config.engineDeadlineMs });
 * ```
 */
export async function openRemoteEngines(
  specs: readonly EngineSpec[],
  options: RemoteOptions = {},
): Promise<RemoteServing> {
  checkEngineSpecs(specs);
  if (MAY_ANSWER_DECISIONS.includes(specs[0]!.kind)) {
    const native = await Promise.all(
      specs.map((s) => SystemOnePassThrough.detect(s.url).catch(() => false)),
    );
    if (native.some(Boolean)) {
      if (!native.every(Boolean))
        throw new Error(
          "some llama-servers answer /v1/systemone natively and some do not: serve them apart",
        );
      return {
        kind: "pass-through",
        passThrough: new SystemOnePassThrough({
          urls: specs.map((s) => s.url),
          deadlineMs: options.deadlineMs || DEFAULT_ENGINE_DEADLINE_MS,
        }),
      };
    }
  }
  return { kind: "engine", engine: await openEnginePool(specs, options) };
}
