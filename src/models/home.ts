import { homedir } from "node:os";
import { join } from "node:path";

/**
 * The directory decisiond keeps its state in: downloaded models, calibration profiles, the
 * SQLite store. `$DECISIOND_HOME` when set, otherwise `~/.cache/decisiond`.
 *
 * @returns an absolute path; it is not created here.
 */
export function decisiondHome(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.DECISIOND_HOME;
  return fromEnv && fromEnv.length > 0 ? fromEnv : join(homedir(), ".cache", "decisiond");
}

/** Where pulled model files live: `<home>/models`. */
export function modelsDir(home: string = decisiondHome()): string {
  return join(home, "models");
}
