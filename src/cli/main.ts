#!/usr/bin/env node
import { Command } from "commander";
import { readFileSync } from "node:fs";
import { registerAskCommand } from "./ask.js";
import { registerCalibrateCommand } from "./calibrate.js";
import { registerEvalCommand } from "./eval.js";
import { registerKeysCommand } from "./keys.js";
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
  .version(pkg.version);

registerServeCommand(program);
registerPullCommand(program);
registerKeysCommand(program);
registerUsageCommands(program);
registerAskCommand(program);
registerMcpCommand(program);
registerEvalCommand(program);
registerCalibrateCommand(program);
registerRenderCommand(program);

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`decisiond: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
