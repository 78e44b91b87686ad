import sharp from "sharp";
import { llamaNode, type LlamaNodeContext, type LlamaNodeTokenProb } from "./llama-node.js";
import {
  DONE_LINE,
  type FromWorker,
  type ToWorker,
  type WorkerBranch,
  type WorkerBranchScore,
  type WorkerCompletionStats,
  type WorkerInit,
  type WorkerScore,
} from "./protocol.js";

/**
 * The vision engine's worker process: llama.cpp's multimodal library through
 * `@fugood/llama.node`, driven over IPC by ./index.ts. It runs in its own process because
 * llama.node prints its log, prompts included, to stdout and stderr: the engine discards stdout
 * and reads stderr only for llama.cpp's `image slice encoded in N ms` lines, so states never reach
 * the service's logs, and a native crash ends this process instead of the service.
 */

/** The text mtmd replaces with an image (`mtmd_default_marker()`). */
export const MEDIA_MARKER = "<__media__>";

/**
 * Sampling parameters that leave the next-token distribution as the softmax of the raw logits
 * over the whole vocabulary: temperature 1; top-k, top-p, min-p, typical-p, top-n-σ, XTC, DRY,
 * mirostat and the repetition penalties at their neutral values, at which llama.cpp's samplers
 * return without touching the candidates (common/sampling.cpp, src/llama-sampler.cpp).
 * llama.node's own defaults are not neutral (top-k 40, top-p 0.95, min-p 0.05, XTC 0.1, DRY
 * 1.75), so every field is given.
 */
export const NEUTRAL_SAMPLING = {
  temperature: 1,
  top_k: 0,
  top_p: 1,
  min_p: 0,
  typical_p: 1,
  top_n_sigma: -1,
  xtc_probability: 0,
  xtc_threshold: 0,
  dry_multiplier: 0,
  mirostat: 0,
  penalty_last_n: 0,
  penalty_repeat: 1,
  penalty_freq: 0,
  penalty_present: 0,
} as const;

/**
 * Samples per answer position. llama.node sends a token's probabilities only when the sampled
 * token does not end generation; when it does, the same position (now cached) is sampled again
 * with another seed. The probabilities are the same each time; only the sampled token differs.
 */
const MAX_ATTEMPTS = 32;

let context: LlamaNodeContext | undefined;

function send(message: FromWorker): void {
  process.send!(message);
}

async function init(message: WorkerInit): Promise<void> {
  const module = llamaNode();
  const ctx = await module.loadModel({
    model: message.modelPath,
    // mtmd refuses a prompt of n_ctx positions or more; one spare position keeps the documented
    // limit (prefix + images + branch ≤ contextSize) exact.
    n_ctx: message.contextSize + 1,
    n_batch: message.batchSize,
    n_ubatch: message.batchSize,
    ...(message.threads ? { n_threads: message.threads } : {}),
    n_gpu_layers: message.gpu ? -1 : 0,
    n_parallel: 1,
    ctx_shift: false,
  });
  context = ctx;
  let initialized = false;
  let reason = "llama.node refused it";
  try {
    initialized = ctx.initMultimodal({ path: message.mmprojPath, use_gpu: message.gpu });
  } catch (error) {
    reason = (error as Error).message;
  }
  if (!initialized)
    throw new Error(
      `cannot load the projector ${message.mmprojPath} for ${message.modelPath} (${reason}); ` +
        "is it this model's projector?",
    );
  if (!ctx.getMultimodalSupport().vision)
    throw new Error(`the projector ${message.mmprojPath} has no vision encoder`);
  const info = await module.loadLlamaModelInfo(message.mmprojPath);
  const imageSize = message.imageSize ?? Number(info["clip.vision.image_size"]);
  if (!Number.isInteger(imageSize) || imageSize <= 0)
    throw new Error(
      `the projector ${message.mmprojPath} declares no fixed image size; give one (--image-size)`,
    );
  const imageTokens = await measureImageTokens(ctx, imageSize);
  if (imageTokens > message.batchSize)
    throw new Error(
      `one image takes ${imageTokens} positions, more than the batch size ${message.batchSize}`,
    );
  if (!(await ctx.parallel.enable({ n_parallel: 1, n_batch: message.batchSize })))
    throw new Error("llama.node refused to enable queued completions");
  send({ type: "ready", imageSize, imageTokens });
}

/**
 * Context positions one `size`×`size` image occupies: mtmd's tokenization of a lone media
 * marker (image embeddings plus the projector's delimiter tokens) less that of empty text (BOS).
 */
async function measureImageTokens(ctx: LlamaNodeContext, size: number): Promise<number> {
  const png = await sharp({
    create: { width: size, height: size, channels: 3, background: { r: 127, g: 127, b: 127 } },
  })
    .png()
    .toBuffer();
  const url = `data:image/png;base64,${png.toString("base64")}`;
  const withImage = await ctx.tokenize(MEDIA_MARKER, { media_paths: [url] });
  const empty = await ctx.tokenize("");
  return withImage.tokens.length - empty.tokens.length;
}

/** Thrown when llama.node reports a full context. */
class ContextFull extends Error {}

/** Thrown when planned tokens do not come back from their own text. */
class TextMismatch extends Error {
  constructor(
    readonly part: "prefix" | "branch",
    text: string,
  ) {
    super(text);
  }
}

/**
 * The prompt text of planned tokens: llama.cpp's pieces concatenated (`tokens_to_str`, no space
 * clean-up), checked to tokenize back to the same tokens the way the completion will tokenize
 * them (special tokens parsed). Text that would not, such as a state holding `<|im_end|>`, is
 * refused rather than sent as a control token.
 * @throws {@link TextMismatch} showing the text where the tokens differ.
 */
async function textOf(tokens: readonly number[], part: "prefix" | "branch"): Promise<string> {
  if (tokens.length === 0) return "";
  const text = await context!.detokenize([...tokens]);
  if (text.includes(MEDIA_MARKER)) throw new TextMismatch(part, MEDIA_MARKER);
  const again = Array.from((await context!.tokenize(text)).tokens);
  let i = 0;
  while (i < tokens.length && again[i] === tokens[i]) i++;
  if (i < tokens.length || again.length !== tokens.length) {
    const shown = await context!.detokenize(again.slice(i, i + 6));
    throw new TextMismatch(part, shown.slice(0, 40));
  }
  return text;
}

/** One queued completion of one token: probabilities by token id. */
async function nextTokenProbs(
  prompt: string,
  images: readonly string[],
  stats: WorkerCompletionStats[],
): Promise<Map<number, number>> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    let received: readonly LlamaNodeTokenProb[] | undefined;
    const { promise } = await context!.parallel.completion(
      {
        prompt,
        ...(images.length > 0 ? { media_paths: [...images] } : {}),
        ...NEUTRAL_SAMPLING,
        n_predict: 1,
        n_probs: 1 << 30,
        seed: attempt,
      },
      (_id, data) => {
        if (data.probs) received = data.probs;
      },
    );
    const result = await promise;
    if (result.context_full) throw new ContextFull("the prompt does not fit the context");
    stats.push({ cached: result.timings.cache_n, evaluated: result.timings.prompt_n });
    if (received) {
      const probs = new Map<number, number>();
      for (const entry of received) probs.set(entry.tok, entry.prob);
      return probs;
    }
  }
  throw new Error(
    `the model ended generation at the answer position in ${MAX_ATTEMPTS} samples; its label probabilities could not be read`,
  );
}

async function score(message: WorkerScore): Promise<void> {
  const completions: WorkerCompletionStats[] = [];
  let prefix = "";
  const evaluate = async (branch: WorkerBranch, path: string): Promise<WorkerBranchScore> => {
    const text = path + (await textOf(branch.tokens, "branch"));
    const probs = await nextTokenProbs(prefix + text, message.images, completions);
    const logprobs = branch.candidates.map((candidate) => {
      const p = probs.get(candidate);
      if (p === undefined) throw new Error(`llama.cpp returned no probability for ${candidate}`);
      // float32 probabilities underflow to 0 far in the tail; keep the logarithm finite.
      return Math.log(Math.max(p, Number.MIN_VALUE));
    });
    if (!branch.children) return { logprobs };
    const children: WorkerBranchScore[] = [];
    for (const child of branch.children) children.push(await evaluate(child, text));
    return { logprobs, children };
  };
  try {
    const pieces: string[] = [];
    for (const [i, segment] of message.prefix.entries()) {
      if (i > 0) pieces.push(MEDIA_MARKER);
      pieces.push(await textOf(segment, "prefix"));
    }
    prefix = pieces.join("");
    const branches: WorkerBranchScore[] = [];
    for (const branch of message.branches) branches.push(await evaluate(branch, ""));
    done(message.id);
    send({ type: "result", id: message.id, branches, completions });
  } catch (error) {
    done(message.id);
    send({
      type: "error",
      id: message.id,
      message: (error as Error).message,
      ...(error instanceof ContextFull ? { kind: "context" as const } : {}),
      ...(error instanceof TextMismatch ? { kind: "text" as const, part: error.part } : {}),
    });
  }
}

/** Marks the end of a request's log lines on stderr (written synchronously: stderr is a pipe). */
function done(id: number): void {
  process.stderr.write(`${DONE_LINE} ${id}\n`);
}

async function close(): Promise<void> {
  if (context) {
    context.parallel.disable();
    await context.release();
  }
  process.disconnect?.();
  process.exit(0);
}

// Requests are handled one at a time, in arrival order: the slot holds one KV cache.
let tail: Promise<void> = Promise.resolve();
process.on("message", (message: ToWorker) => {
  tail = tail.then(async () => {
    switch (message.type) {
      case "init":
        try {
          await init(message);
        } catch (error) {
          send({ type: "error", message: (error as Error).message });
        }
        return;
      case "score":
        return score(message);
      case "close":
        return close();
    }
  });
});
process.on("disconnect", () => process.exit(0));
