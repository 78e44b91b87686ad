import type { ChatMessage, Token } from "../engine/types.js";
import {
  labelStyleOf,
  type LabelTokenizer,
  type PromptModel,
  type TailPrompt,
} from "./label-style.js";
import type { DeciderOptions } from "./options.js";
import {
  CONTENT_FREE_STATES,
  PROMPT_EXAMPLES,
  type PromptExample,
  renderQuestion,
  renderStateBlock,
  SYSTEM_MESSAGE,
  TEMPLATE_MARKER,
} from "./prompt.js";
import { questionTypeOf } from "./questions/index.js";

/**
 * The static parts of the prompt, tokenized once per `Decider`: the chat template around the
 * user turn, with the system message and the in-context examples in its head.
 */
export interface PreparedPrompt extends TailPrompt {
  /** Template tokens before the user's content (system message, examples, user-turn opening). */
  readonly head: Token[];
  /** The prefix of each content-free state, in {@link CONTENT_FREE_STATES} order. */
  readonly contentFreePrefixes: readonly Token[][];
}

/**
 * Renders and tokenizes the static parts of the prompt: the assistant-turn opening first (an
 * example's reply label is read against it), then the head with the system message and, unless
 * `examples: false`, the examples as finished turns, then a prefix per content-free state.
 * @param labels - the label tokenizer the requests will use (an example is labelled as they are)
 * @throws what the engine's tokenizer or chat template throws; `Error` when the chat template
 *   drops the user message
 * @example
 * ```ts
 * const prepared = await preparePrompt(engine, new LabelTokenizer(engine), {});
 * ```
 */
export async function preparePrompt(
  model: PromptModel,
  labels: LabelTokenizer,
  options: Pick<DeciderOptions, "systemMessage" | "examples" | "labels" | "maxWordLabelTokens">,
): Promise<PreparedPrompt> {
  const system = options.systemMessage ?? SYSTEM_MESSAGE;
  // The tail first: reading an example's reply labels needs it.
  const tailText = splitAtMarker(
    await model.chatTemplate.render([
      { role: "system", content: system },
      { role: "user", content: TEMPLATE_MARKER },
    ]),
  ).after;
  const tail = await model.tokenize(tailText, { special: true });
  const partial = { tail, tailText };
  const examples: ChatMessage[] = [];
  if (options.examples !== false)
    for (const example of PROMPT_EXAMPLES)
      examples.push(...(await exampleTurns(example, partial, labels, options)));
  const { before } = splitAtMarker(
    await model.chatTemplate.render([
      { role: "system", content: system },
      ...examples,
      { role: "user", content: TEMPLATE_MARKER },
    ]),
  );
  const head = await model.tokenize(before, { special: true });
  const contentFreePrefixes: Token[][] = [];
  for (const state of CONTENT_FREE_STATES)
    contentFreePrefixes.push([...head, ...(await model.tokenize(renderStateBlock(state)))]);
  return { head, tail, tailText, contentFreePrefixes };
}

/**
 * An in-context example as a user turn (state block and question, rendered as a request's) and
 * an assistant turn holding the reply the readout reads: the option id after the answer cue for
 * word-labelled choices, otherwise the label of the answer.
 */
async function exampleTurns(
  example: PromptExample,
  tail: TailPrompt,
  labels: LabelTokenizer,
  options: Pick<DeciderOptions, "labels" | "maxWordLabelTokens">,
): Promise<ChatMessage[]> {
  const { question, answer } = example;
  const kind = questionTypeOf(question);
  const style = await labelStyleOf(kind, question, tail, labels, options);
  // Shown as a request with this question is shown: a choice's options in id order.
  const order = kind.canonicalOrder(question);
  const shown = style.labelsAt(order);
  const user =
    renderStateBlock(example.state) + renderQuestion(kind, question, shown, order, style.words);
  return [
    { role: "user", content: user },
    { role: "assistant", content: `${style.cue}${shown[order.indexOf(answer)]!}` },
  ];
}

/**
 * A rendered chat split around {@link TEMPLATE_MARKER}.
 * @throws `Error` when the marker is missing (the template dropped the user message)
 */
export function splitAtMarker(rendered: string): { before: string; after: string } {
  const at = rendered.indexOf(TEMPLATE_MARKER);
  if (at < 0) throw new Error("the chat template dropped the user message");
  return { before: rendered.slice(0, at), after: rendered.slice(at + TEMPLATE_MARKER.length) };
}

/**
 * Waits for `promise`, or rejects with the signal's reason as soon as `signal` aborts; the
 * promise itself is not cancelled (it may be shared).
 */
export function untilAborted<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
