import type { Command } from "commander";
import { DEFAULT_BASE_URL, DEFAULT_MODEL_NAME } from "../client/config.js";

/**
 * Adds `mcp`: an MCP server on stdin/stdout with one tool, `decide`, for agents (Claude Code,
 * Claude Desktop, Cursor, VS Code...). It talks to a running decisiond over HTTP, configured by
 * `SERVICE_BASE_URL`, `SERVICE_API_KEY` or the key file, and `DECISIOND_MODEL`. Nothing but MCP
 * messages is written to stdout; diagnostics go to stderr.
 */
export function registerMcpCommand(program: Command): Command {
  return program
    .command("mcp")
    .description("run an MCP stdio server with a `decide` tool that asks a running decisiond")
    .option(
      "--model <name>",
      `model used when a tool call names none (env DECISIOND_MODEL; default ${DEFAULT_MODEL_NAME})`,
    )
    .addHelpText(
      "after",
      `\nEnvironment:\n` +
        `  SERVICE_BASE_URL  the decisiond to ask (default ${DEFAULT_BASE_URL})\n` +
        `  SERVICE_API_KEY   API key; otherwise read from $XDG_CONFIG_HOME/decisiond/api_key\n` +
        `                    (~/.config/decisiond/api_key), which must have mode 0600\n` +
        `  DECISIOND_MODEL   default model name\n`,
    )
    .action(async (flags: { model?: string }) => {
      // Loaded here so that other commands do not load the MCP SDK.
      const { runMcpStdio } = await import("../mcp/server.js");
      await runMcpStdio(flags.model ? { defaultModel: flags.model } : {});
    });
}
