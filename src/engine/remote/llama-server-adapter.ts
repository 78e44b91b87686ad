import { fileName } from "./completion-answer.js";
import { EngineCallError, EngineRequestError, type EngineConnection } from "./http.js";

/** One entry of llama-server's `GET /lora-adapters` (the fields read). */
interface LoraAdapter {
  readonly id?: unknown;
  readonly path?: unknown;
  readonly scale?: unknown;
}

/** A `/completion` call's `lora` field: each loaded adapter's scale for that call. */
export type LoraScales = readonly { readonly id: number; readonly scale: number }[];

/**
 * Checks that a llama-server applies the LoRA adapter decisiond reads its answers for: the tuned
 * readout and its calibration profile belong to one adapter, and a server started without it (or
 * with another) answers every question wrongly without any error. Adapters at scale 0 are not
 * applied. A server without `/lora-adapters` (404) is not checked.
 * @param expected - the adapter file `--adapter` names (compared by file name), or `"none"`
 * @returns the scales the server applies now, for every call to pin (a `POST /lora-adapters`
 *   later changes the server's own scales, not a call's that names them); `undefined` for a server
 *   without the route or without adapters.
 * @throws {@link EngineCallError} when the server applies other adapters, naming both sides.
 * @example `const lora = await checkAppliedAdapter(http, "adapters/smollm2-135m-instruct.decision.gguf");`
 */
export async function checkAppliedAdapter(
  http: EngineConnection,
  expected: string,
  signal?: AbortSignal,
): Promise<LoraScales | undefined> {
  let listed: unknown;
  try {
    listed = await http.call<unknown>("/lora-adapters", undefined, signal);
  } catch (error) {
    if (error instanceof EngineRequestError && error.status === 404) return undefined;
    throw error;
  }
  if (!Array.isArray(listed))
    throw new EngineCallError(http.url, "/lora-adapters answered something that is not a list");
  const applied = (listed as LoraAdapter[])
    .filter((a) => typeof a.scale !== "number" || a.scale !== 0)
    .map((a) => fileName(String(a.path)));
  const wanted = expected === "none" ? [] : [fileName(expected)];
  if (applied.length === wanted.length && applied.every((name, i) => name === wanted[i])) {
    const scales = (listed as LoraAdapter[]).map((a, i) => ({
      id: typeof a.id === "number" ? a.id : i,
      scale: typeof a.scale === "number" ? a.scale : 1,
    }));
    return scales.length > 0 ? scales : undefined;
  }
  const serves = applied.length ? `applies the LoRA adapter ${applied.join(", ")}` : "applies none";
  const given = expected === "none" ? "none" : wanted[0]!;
  throw new EngineCallError(
    http.url,
    `${serves}, but decisiond reads its answers for --adapter ${given}: start llama-server with ` +
      `--lora and give decisiond --adapter with the same file (or neither)`,
  );
}
