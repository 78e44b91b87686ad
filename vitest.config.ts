import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The integration tests share one real model; running files one at a time keeps a 2-core
    // machine from thrashing and keeps the model download (globalSetup) to a single place.
    fileParallelism: false,
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 120_000,
    reporters: ["default", ["json", { outputFile: ".vitest-report.json" }]],
    hookTimeout: 600_000,
  },
});
