import { existsSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { CatalogueEntry } from "./catalogue.js";
import { checkGgufFile } from "./gguf-file.js";

/** The folder of the adapters shipped with decisiond (`adapters/` at the package root). */
export function adaptersDir(): string {
  return join(dirname(fileURLToPath(import.meta.url)), "..", "..", "adapters");
}

/**
 * The LoRA adapter to serve a model with.
 * @param flag - `--adapter`: a path to a GGUF adapter, `none`, or absent for the catalogue's
 * @param entry - the model's catalogue entry; absent for a model given by path
 * @returns the adapter's absolute path, or `undefined` for none (the flag said so, or the model
 *   has no shipped adapter)
 * @throws {@link Error} when the flag names a file that does not exist or is not a GGUF file
 * @example resolveAdapter(undefined, findModel("smollm2-135m-instruct")) // → ".../adapters/smollm2-135m-instruct.decision.gguf"
 */
export function resolveAdapter(
  flag: string | undefined,
  entry: Pick<CatalogueEntry, "adapter"> | undefined,
): string | undefined {
  if (flag === "none") return undefined;
  if (flag !== undefined) {
    const path = resolve(flag);
    checkGgufFile(path, "adapter");
    return path;
  }
  if (!entry?.adapter) return undefined;
  const shipped = join(adaptersDir(), entry.adapter);
  return existsSync(shipped) ? shipped : undefined;
}

/**
 * The id a calibration profile of a model served with an adapter is filed under: the adapter's
 * file name without `.gguf` (`profiles/smollm2-135m-instruct.decision.json`).
 */
export function adapterProfileId(adapterPath: string): string {
  return basename(adapterPath).replace(/\.gguf$/i, "");
}
