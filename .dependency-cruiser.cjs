// The import rules of DESIGN.md's module table, checked by `npm run lint`.
// Why these rules and this tool: docs/decisions/089
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "engine-knows-no-questions",
      comment:
        "engine/ knows nothing of questions or HTTP: it imports neither decision/ nor api/ " +
        "(a backend that answers decisions itself belongs in decision/backends/)",
      severity: "error",
      from: { path: "^src/engine/" },
      to: { path: "^src/(decision|api)/" },
    },
    {
      name: "api-knows-no-engine",
      comment:
        "api/ knows nothing of prompts or tokens: it imports no engine/ (an engine error the API " +
        "answers lives where both may import it, or is mapped by the composition root)",
      severity: "error",
      from: { path: "^src/api/" },
      to: { path: "^src/engine/" },
    },
    {
      name: "protocol-is-a-leaf",
      comment: "protocol/ (the wires) imports nothing of ours but itself",
      severity: "error",
      from: { path: "^src/protocol/" },
      to: { path: "^src/", pathNot: "^src/protocol/" },
    },
    {
      name: "client-is-light",
      comment: "client/ imports no server code: only protocol/ and its own files",
      severity: "error",
      from: { path: "^src/client/" },
      to: { path: "^src/", pathNot: "^src/(protocol|client)/" },
    },
    {
      name: "mcp-is-light",
      comment: "mcp/ imports no server code: only protocol/, client/ and its own files",
      severity: "error",
      from: { path: "^src/mcp/" },
      to: { path: "^src/", pathNot: "^src/(protocol|client|mcp)/" },
    },
    {
      name: "light-packages-stay-light",
      comment:
        "protocol/, client/ and mcp/ ship without the server's packages (no model runtime, no " +
        "database, no HTTP server): of npm packages they import only zod and the MCP SDK",
      severity: "error",
      from: { path: "^src/(protocol|client|mcp)/" },
      to: {
        dependencyTypes: ["npm", "npm-dev", "npm-optional", "npm-peer", "npm-no-pkg"],
        pathNot: "^node_modules/(zod|@modelcontextprotocol/sdk)/",
      },
    },
    {
      name: "decode-through-its-index",
      comment: "engine/decode/ is one module: other code imports its index, not its layers",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/engine/decode/" },
      to: { path: "^src/engine/decode/", pathNot: "^src/engine/decode/index\\.ts$" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    // Type-only imports count: knowing a module's types is knowing the module.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { conditionNames: ["import", "require", "node", "default", "types"] },
  },
};
