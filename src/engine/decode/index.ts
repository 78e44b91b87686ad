/**
 * Decode planning: how a request's tokens go through the model, shared by every engine that
 * evaluates token by token (the in-process engine, engine/llama/; the llama-server backend,
 * engine/remote/llama-server.ts) and by the benchmark's floor (bench/run.mjs), so that they
 * make the same decode calls. Pure functions, in three layers:
 *
 * - kernel-split.ts: where a sequence's decode calls are cut, so that a token goes through the
 *   attention kernel it would alone (the call maps);
 * - branch-schedule.ts: which lane evaluates which branch, in what order, so that the tokens
 *   branches share at their start are evaluated once;
 * - plan.ts: a request's whole plan on top of what a KV-cache sequence holds ({@link planDecode}).
 *
 * Engines import this index only; the layers' own tests reach into them.
 * Why the calls are cut so, with the measurements: docs/decisions/054.
 *
 * @packageDocumentation
 */
export { branchCallSizes, sharedStart } from "./branch-schedule.js";
export { FA_TILE_ROWS, prefixTiledEnd } from "./kernel-split.js";
export { leadWindows, windowsAgree } from "./lead-windows.js";
export {
  branchAfterLead,
  branchFrom,
  leadCallsFrom,
  planDecode,
  prefixCallsFrom,
  type DecodeLimits,
  type DecodePlan,
  type HeldPrefix,
  type PlannedBranch,
} from "./plan.js";
