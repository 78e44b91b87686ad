// What decisiond's prompt head (system message and in-context examples, src/decision/prompt.ts)
// costs a long state: the head's own tokens are read once and cached, but every state token
// still attends to them. Evaluates the same state tokens (≈ the 2048-token bench state) in a
// fresh sequence, once after the head and once with nothing before it, taking turns; prints the
// medians and their ratio.
//
// Usage: npm run build && node bench/head-cost.mjs [--runs 5] [--tokens 2091]
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { Decider } from "../dist/decision/decide.js";
import { openLlamaEngine } from "../dist/engine/llama/index.js";
import { commonPrefixLength } from "../dist/engine/llama/prefix-cache.js";
import { ensureModel } from "../dist/models/pull.js";
import { median } from "./stats.mjs";

const { values: args } = parseArgs({
  options: { runs: { type: "string", default: "5" }, tokens: { type: "string", default: "2091" } },
});
const RUNS = Number(args.runs);
const TOKENS = Number(args.tokens);
const MODEL = "smollm2-135m-instruct";
const modelPath = await ensureModel(MODEL);
const llama = await getLlama({ gpu: "auto", logLevel: LlamaLogLevel.error });
const threads = llama.cpuMathCores;

// The head: the prefix tokens two requests with different states share.
const engine = await openLlamaEngine({ modelPath, id: MODEL, threads, contextSize: 8192 });
const decider = new Decider(engine);
const question = [
  [
    "q0",
    {
      type: "choice",
      options: [
        ["billing", null],
        ["shipping", null],
      ],
    },
  ],
];
const one = (await decider.plan({ state: "Case 1.", questions: question })).prefix;
const two = (await decider.plan({ state: "Case 2.", questions: question })).prefix;
const head = one.slice(0, commonPrefixLength(one, two));
await engine.close();

const model = await llama.loadModel({ modelPath });
const text = Array.from(
  { length: 400 },
  (_, i) => `Case ${i}: the parcel arrived late and the box was damaged.`,
).join(" ");
const state = model.tokenize(text).slice(0, TOKENS);
const context = await model.createContext({ contextSize: 8192, batchSize: 1024, threads });
const sequence = context.getSequence();
const ms = { head: [], none: [] };
for (let run = 0; run < RUNS; run++)
  for (const kind of run % 2 ? ["none", "head"] : ["head", "none"]) {
    await sequence.clearHistory();
    if (kind === "head") await sequence.evaluateWithoutGeneratingNewTokens(head);
    const started = performance.now();
    await sequence.evaluateWithoutGeneratingNewTokens(state);
    ms[kind].push(performance.now() - started);
  }
console.log(
  `${MODEL}, ${threads} threads: ${state.length} state tokens after the ${head.length}-token head ` +
    `${median(ms.head).toFixed(0)} ms, with no head ${median(ms.none).toFixed(0)} ms ` +
    `(${(median(ms.head) / median(ms.none)).toFixed(3)}×; medians of ${RUNS})`,
);
