import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { serveOptions, toServeConfig, type ServeFlags } from "../src/cli/serve-config.js";

/**
 * `decisiond serve`'s flags as an operator writes them: numbers in decimal digits, timers Node
 * can keep, and no 0 that would quietly mean something else (an outside probe's first day,
 * /work/runs/probe33: `--port 1e3` bound port 1000, `--drain-timeout 3000000000` exited at once
 * and dropped the request in flight with no ledger row, `--body-limit 0` meant 16 MiB).
 */
function parse(argv: string[]): ReturnType<typeof toServeConfig> {
  const command = new Command().exitOverride().configureOutput({ writeErr: () => {} });
  for (const option of serveOptions()) command.addOption(option);
  command.parse(argv, { from: "user" });
  return toServeConfig(command.opts<ServeFlags>(), {});
}

/** The message commander gives for `argv`, which must be refused. */
function refusal(argv: string[]): string {
  try {
    parse(argv);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`${argv.join(" ")} was accepted`);
}

describe("serve's numeric flags", () => {
  it("take decimal digits only", () => {
    for (const [flag, value] of [
      ["--port", "1e3"],
      ["--port", "0x50"],
      ["--port", "80.0"],
      ["--threads", "+4"],
      ["--queue", "1e2"],
      ["--deadline", "1e99"],
      ["--admission-wait", "0.5"],
    ] as const)
      expect(refusal([flag, value])).toContain(`"${value}"`);
    expect(parse(["--port", "1000", "--threads", "4"]).service).toMatchObject({
      port: 1000,
      threads: 4,
    });
  });

  it("refuse timers longer than Node keeps, naming the range", () => {
    for (const flag of [
      "--deadline",
      "--admission-wait",
      "--request-timeout",
      "--drain-timeout",
      "--engine-deadline",
    ])
      expect(refusal([flag, "3000000000"])).toMatch(/from \d+ to 2147483647 \(24\.8 days/);
    const config = parse(["--deadline", "2147483647", "--drain-timeout", "2147483647"]);
    expect(config.service.deadlineMs).toBe(2147483647);
    expect(config.drainTimeoutMs).toBe(2147483647);
  });

  it("refuse a 0 that would not mean none", () => {
    expect(refusal(["--body-limit", "0"])).toContain("at least 1 byte");
    expect(refusal(["--request-timeout", "0"])).toContain("hold a connection open forever");
    expect(refusal(["--drain-timeout", "999"])).toContain("answered 503 and recorded");
    expect(refusal(["--engine-deadline", "0"])).toContain("from 1 to");
    const config = parse([
      "--body-limit",
      "1KiB",
      "--request-timeout",
      "1",
      "--drain-timeout",
      "1000",
    ]);
    expect(config.service).toMatchObject({ bodyLimit: 1024, requestTimeoutMs: 1 });
    expect(config.drainTimeoutMs).toBe(1000);
    // 0 stays "none" where the help says so.
    expect(parse(["--deadline", "0", "--admission-wait", "0"])).toMatchObject({
      service: { deadlineMs: 0 },
      admissionWaitMs: 0,
    });
  });
});
