import { defineConfig } from "vitest/config";

/**
 * Test files that need no model, no server process and no browser: they run in seconds
 * (`npm run test:unit`). Every other file is an integration test.
 */
const unit = [
  "test/accounts.test.ts",
  "test/backup.test.ts",
  "test/bundle.test.ts",
  "test/call-pace.test.ts",
  "test/calibration-fit.test.ts",
  "test/cleanup.test.ts",
  "test/connection-cap.test.ts",
  "test/client-question.test.ts",
  "test/client-types.test.ts",
  "test/client.test.ts",
  "test/console-api.test.ts",
  "test/cors.test.ts",
  "test/decision-labels.test.ts",
  "test/decision-math.test.ts",
  "test/decision-plan.test.ts",
  "test/decision-readout.test.ts",
  "test/decisions-wire.test.ts",
  "test/decode-plan.test.ts",
  "test/eval-format.test.ts",
  "test/eval-metrics.test.ts",
  "test/eval-runner.test.ts",
  "test/fuzz.test.ts",
  "test/json-body.test.ts",
  "test/kernel-split.test.ts",
  "test/lead-windows.test.ts",
  "test/mcp-transport.test.ts",
  "test/media.test.ts",
  "test/models.test.ts",
  "test/operations.test.ts",
  "test/outside-probe.test.ts",
  "test/package-entry.test.ts",
  "test/prefix-cache-park.test.ts",
  "test/question-types.test.ts",
  "test/remote-unit.test.ts",
  "test/request-validator.test.ts",
  "test/requantize.test.ts",
  "test/scale-orientation.test.ts",
  "test/serve-flags.test.ts",
  "test/serve-lock.test.ts",
  "test/silent-connections.test.ts",
  "test/slow-bodies.test.ts",
  "test/slow-notice.test.ts",
  "test/training-plans.test.ts",
  "test/turn-queue.test.ts",
  "test/turns.test.ts",
];

export default defineConfig({
  test: {
    reporters: ["default", ["json", { outputFile: ".vitest-report.json" }]],
    projects: [
      // The property tests run thousands of bodies: seconds on an idle machine, half a minute on a
      // loaded one. The timeout catches a hang, not a slow machine.
      { test: { name: "unit", include: unit, testTimeout: 180_000 } },
      {
        test: {
          name: "integration",
          include: ["test/**/*.test.ts"],
          exclude: unit,
          // The integration tests share one real model; running files one at a time keeps a
          // 2-core machine from thrashing and keeps the model download (globalSetup) in one place.
          fileParallelism: false,
          globalSetup: ["test/global-setup.ts"],
          testTimeout: 120_000,
          hookTimeout: 600_000,
        },
      },
    ],
  },
});
