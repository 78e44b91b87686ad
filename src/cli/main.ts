#!/usr/bin/env node
import { Command, InvalidArgumentError, type CommanderError } from "commander";
import { readFileSync } from "node:fs";
import { EXIT_USAGE, registerAskCommand } from "./ask.js";
import { registerBackupCommand } from "./backup.js";
import { registerCalibrateCommand } from "./calibrate.js";
import { registerEvalCommand } from "./eval.js";
import { printable, registerKeysCommand } from "./keys.js";
import { registerMcpCommand } from "./mcp.js";
import { registerPullCommand } from "./pull.js";
import { registerRenderCommand } from "./render.js";
import { registerServeCommand } from "./serve.js";
import { registerUsageCommands } from "./usage.js";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

const program = new Command()
  .name("decisiond")
  .description(
    "self-hosted decision service: typed answers from a local model's next-token probabilities",
  )
  .version(pkg.version)
  .addHelpText("after", "\nExit status: 0 done, 1 failed, 2 usage error (a flag or argument).\n")
  // Inherited by every command registered below: a flag or argument commander refuses exits 2,
  // help and version 0, and an error a command raises itself keeps its own status.
  .exitOverride((error: CommanderError) => {
    if (error.code === "commander.error") process.exit(error.exitCode);
    process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE);
  })
  // Commander quotes a refused value as it came: its control characters and direction overrides
  // are written as escapes, so that they cannot drive or reorder the terminal.
  .configureOutput({
    outputError: (text, write) => write(text.split("\n").map(printable).join("\n")),
  });

registerServeCommand(program);
registerPullCommand(program);
registerKeysCommand(program);
registerUsageCommands(program);
registerBackupCommand(program);
registerAskCommand(program);
registerMcpCommand(program);
registerEvalCommand(program);
registerCalibrateCommand(program);
registerRenderCommand(program);

// What a command's action throws: a flag or argument it refuses (`InvalidArgumentError`) is a
// usage error, anything else a failure.
program.parseAsync(process.argv).catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`decisiond: ${message.split("\n").map(printable).join("\n")}\n`);
  process.exit(error instanceof InvalidArgumentError ? EXIT_USAGE : 1);
});
