import { decisiondHome } from "../protocol/paths.js";
import { join } from "node:path";

export { decisiondHome };

/** Where pulled model files live: `<home>/models`. */
export function modelsDir(home: string = decisiondHome()): string {
  return join(home, "models");
}
