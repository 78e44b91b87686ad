#!/usr/bin/env node
import { runMcpStdio } from "./server.js";

/**
 * The MCP server alone, without the rest of the `decisiond` command (which loads the model
 * runtime): `node dist/mcp/main.js`. Same behaviour and environment as `decisiond mcp`.
 */
runMcpStdio().catch((error: unknown) => {
  process.stderr.write(
    `decisiond mcp: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
