import { fileName, type LoraScales } from "./completion-answer.js";
import { EngineCallError, EngineRequestError, type EngineConnection } from "./http.js";

/** One entry of llama-server's `GET /lora-adapters` (the fields read). */
interface LoraAdapter {
  readonly id?: unknown;
  readonly path?: unknown;
}

/**
 * Checks that a llama-server has loaded the LoRA adapter decisiond reads its answers for, and
 * says the scales every call names: that adapter at 1 (as the embedded engine adds it into the
 * weights) and every other loaded adapter at 0, whatever the server's own scales are
 * (`--lora-scaled`, `--lora-init-without-apply`, a `POST /lora-adapters` before or after): the
 * tuned readout and its calibration profile belong to one adapter at full scale, and a server
 * that answers without it answers every question wrongly without any error. A server without
 * `/lora-adapters` (404) is not checked.
 * @param expected - the adapter file `--adapter` names (compared by file name), or `"none"`
 * @returns every call's `lora` field; `undefined` for a server without the route or without
 *   adapters.
 * @throws {@link EngineCallError} when the server has not loaded the expected adapter, naming
 *   both sides.
 * @example `const lora = await checkLoadedAdapter(http, "adapters/smollm2-135m-instruct.decision.gguf");`
 */
export async function checkLoadedAdapter(
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
  const loaded = (listed as LoraAdapter[]).map((a, i) => ({
    id: typeof a.id === "number" ? a.id : i,
    name: fileName(String(a.path)),
  }));
  const wanted = expected === "none" ? undefined : fileName(expected);
  const applied = loaded.find((a) => a.name === wanted);
  if (wanted !== undefined && !applied) {
    const loads = loaded.length ? `loads ${loaded.map((a) => a.name).join(", ")}` : "loads none";
    throw new EngineCallError(
      http.url,
      `${loads}, but decisiond reads its answers for --adapter ${wanted}: start llama-server ` +
        `with --lora and give decisiond --adapter with the same file (or neither)`,
    );
  }
  const scales = loaded.map((a) => ({ id: a.id, scale: a === applied ? 1 : 0 }));
  return scales.length > 0 ? scales : undefined;
}
