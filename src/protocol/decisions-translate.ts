import { echoProblem, quoteId, SAME_TEXT_REASON, sameTextKey, showsNothing } from "./option-ids.js";
import type {
  ChoiceValue,
  DecisionInputItem,
  DecisionQuestion,
  DecisionsRequest,
} from "./decisions.js";
import type { Decision, DecisionAnswer, DecisionUsage } from "./decisions-response.js";
import { decisionsError, DecisionsErrors } from "./decisions-errors.js";
import type { HttpError } from "./errors.js";
import type { Question, SystemOneRequest, SystemOneResponse } from "./schemas.js";

/**
 * `POST /v1/decisions` translated onto System One's request, the one the decision core answers,
 * and its answers translated back. One core, two wires: the same state and questions reach the
 * model through either, so they get the same probabilities.
 *
 * - `input`: a string is the state as it is; an array of messages and tool items is rendered as
 *   a transcript (one line per item, `role: text`), which becomes the state: evidence the
 *   questions are asked about, never instructions (the state block and the system message see
 *   to that).
 * - questions: predicate → `noul`; choice → `choice` with each value's text as its option id;
 *   score → `score` with each level's label (and `: description`) as its level. They are keyed
 *   by their index ("0", "1", …), which is never shown to the model.
 * - The request's one image (wherever it stands) goes to System One's `images`; in the text an
 *   `[image]` marks where it stood. A question whose instructions hold the image is refused on a
 *   model that takes no images; an image in the input is then a 400, as on System One.
 *
 * Why: docs/decisions/085-decisions-wire.md
 */

/** What marks the request's image in the rendered text, where it stood. */
export const IMAGE_MARK = "[image]";

/** A {@link DecisionsRequest} as the decision core takes it. */
export interface DecisionsTranslation {
  /**
   * The request in System One's shape: the input as `state`, the questions the model is asked
   * keyed by their index (`"0"`, `"1"`, …), the image in `images`.
   */
  readonly systemOne: SystemOneRequest;
  /** Indexes of the questions refused before the model (an image question on a text-only model). */
  readonly refused: readonly number[];
  /** Where the request's image stands (`input[0].content[1]`), when it has one. */
  readonly imageParam?: string;
}

/** What the translation needs to know of the model. */
export interface TranslationModel {
  /** Whether the model takes an image. */
  readonly acceptsImages: boolean;
  /** The name answered under, for messages. */
  readonly name: string;
}

/**
 * Translates a validated request onto System One's.
 * @param request - a body `DecisionsRequestSchema` accepted
 * @param model - whether the model takes images, and its name
 * @returns the System One request, the questions refused before the model, the image's place
 * @throws {@link HttpError} 400 in OpenAI's shape when the request breaks a rule the schema cannot
 *   state: a second image, an image in the input for a text-only model, a choice value given
 *   twice (or as a string and a boolean of the same text), `"__proto__"` as a value, a name,
 *   value or label that is not Unicode text, a tool output without its call, a predicate with no
 *   text
 * @example
 * ```ts
 * const { systemOne, refused } = fromDecisionsRequest(body, { acceptsImages: false, name: "decisiond-1.0-experimental" });
 * ```
 */
export function fromDecisionsRequest(
  request: DecisionsRequest,
  model: TranslationModel,
): DecisionsTranslation {
  const images = new ImageSlot();
  const state =
    typeof request.input === "string" ? request.input : transcript(request.input, images);
  const inputImage = images.param;
  // Every question's text first: a second image is refused wherever it stands.
  const texts = request.questions.map((question, index) => {
    const before = images.param;
    const text = instructionsText(question, index, images);
    return { text, image: images.param !== before };
  });
  if (inputImage !== undefined && !model.acceptsImages)
    throw invalid(
      `model ${model.name} does not accept images: it is a text-only model. Serve a vision model ` +
        "to send images (e.g. `decisiond serve --model smolvlm-256m-instruct`), or leave the image out",
      inputImage,
      "image_not_supported",
    );
  const questions: Record<string, Question> = {};
  const refused: number[] = [];
  request.questions.forEach((question, index) => {
    echoable(question.name, `questions[${index}].name`);
    const { text, image } = texts[index]!;
    if (image && !model.acceptsImages) refused.push(index);
    else questions[String(index)] = systemOneQuestion(question, index, text);
  });
  const systemOne: SystemOneRequest = {
    model: request.model,
    state,
    questions,
    ...(images.url !== undefined && model.acceptsImages ? { images: [images.url] } : {}),
  };
  return {
    systemOne,
    refused,
    ...(images.param !== undefined ? { imageParam: images.param } : {}),
  };
}

/**
 * The answers of a translated request in this wire's shape, in question order.
 * @param request - the request as received
 * @param translation - what {@link fromDecisionsRequest} made of it
 * @param answers - the decision core's answers, keyed by question index
 * @param refusedIds - further questions the core left unanswered (their index, as a string)
 * @returns one answer per question: its typed answer, or `{type: "refusal", name}`
 * @throws Error when a question has neither an answer nor a refusal (a core that dropped one)
 */
export function toDecisionAnswers(
  request: DecisionsRequest,
  translation: DecisionsTranslation,
  answers: SystemOneResponse["answers"],
  refusedIds: readonly string[] = [],
): DecisionAnswer[] {
  const refused = new Set([...translation.refused.map(String), ...refusedIds]);
  return request.questions.map((question, index): DecisionAnswer => {
    const name = question.name ?? null;
    const answer = answers[String(index)];
    if (!answer || refused.has(String(index))) {
      if (refused.has(String(index))) return { type: "refusal", name };
      throw new Error(`question ${index} has no answer`);
    }
    if (question.type === "predicate" && answer.type === "noul")
      return { type: "predicate", name, probability: answer.noul };
    if (question.type === "choice" && answer.type === "choice") {
      const chosen = question.choices.find((c) => optionId(c.value) === answer.choice);
      return {
        type: "choice",
        name,
        choice: chosen ? chosen.value : answer.choice,
        confidence: answer.confidence,
        probabilities: question.choices.map((c) => ({
          value: c.value,
          probability: answer.probabilities[optionId(c.value)] ?? 0,
        })),
      };
    }
    if (question.type === "score" && answer.type === "score")
      return {
        type: "score",
        name,
        score: answer.score,
        confidence: answer.confidence,
        probabilities: question.levels.map((level, value) => ({
          label: level.label,
          value,
          probability: answer.probabilities[String(value)] ?? 0,
        })),
      };
    throw new Error(`question ${index} (${question.type}) got a ${answer.type} answer`);
  });
}

/**
 * A decision's usage in the SDKs' fields.
 * @param usage - the core's usage
 * @param stats - the engine's prefix tokens and those it served from its prefix cache, when known
 * @returns input and output tokens, `cached_tokens` (served from the prefix cache),
 *   `cache_write_tokens` (prefix tokens this call evaluated, left in the cache for the next call
 *   with the same input), `reasoning_tokens` 0 (nothing is generated), their total
 * @example
 * ```ts
 * decisionUsage({ input_tokens: 120, output_tokens: 3 }, { prefixTokens: 80, cachedPrefixTokens: 80 });
 * // → input_tokens_details: { cached_tokens: 80, cache_write_tokens: 0 }, total_tokens: 123, …
 * ```
 */
export function decisionUsage(
  usage: { readonly input_tokens: number; readonly output_tokens: number },
  stats: { readonly prefixTokens?: number; readonly cachedPrefixTokens?: number } = {},
): DecisionUsage {
  const cached = Math.min(usage.input_tokens, Math.max(0, stats.cachedPrefixTokens ?? 0));
  const written =
    stats.prefixTokens === undefined
      ? 0
      : Math.min(usage.input_tokens - cached, Math.max(0, stats.prefixTokens - cached));
  return {
    input_tokens: usage.input_tokens,
    input_tokens_details: { cached_tokens: cached, cache_write_tokens: written },
    output_tokens: usage.output_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.input_tokens + usage.output_tokens,
  };
}

/** A decision with no model work: every question refused. */
export function refusedDecision(model: string, request: DecisionsRequest): Decision {
  return {
    model,
    answers: request.questions.map((q) => ({ type: "refusal", name: q.name ?? null })),
    usage: decisionUsage({ input_tokens: 0, output_tokens: 0 }),
  };
}

/** The option id a choice value is shown under: its text (`true` for the boolean true). */
export function optionId(value: ChoiceValue): string {
  return typeof value === "string" ? value : String(value);
}

/** A choice value quoted for a message: a string as {@link quoteId} shows it, else as JSON. */
function shownValue(value: ChoiceValue): string {
  return typeof value === "string" ? quoteId(value) : JSON.stringify(value);
}

/** A 400 of this wire. */
function invalid(message: string, param: string, code: string): HttpError {
  return decisionsError(DecisionsErrors.invalidRequest, `${param}: ${message}`, param, code);
}

/** The request's one image: its data URL and where it stands. */
class ImageSlot {
  url: string | undefined;
  param: string | undefined;

  /**
   * Takes the image at `param`.
   * @returns {@link IMAGE_MARK}, for the text
   * @throws {@link HttpError} 400 when the request already has one
   */
  take(url: string, param: string): string {
    if (this.param !== undefined)
      throw invalid(
        `send one image per request; this is a second one (the first is at ${this.param})`,
        param,
        "too_many_images",
      );
    this.url = url;
    this.param = param;
    return IMAGE_MARK;
  }
}

/** A content part as text: text as it is, JSON compact, an image as {@link IMAGE_MARK}. */
type Part =
  | { readonly type: "input_text" | "output_text"; readonly text: string }
  | { readonly type: "input_image"; readonly image_url: string }
  | { readonly type: "input_json"; readonly data: unknown }
  | { readonly type: "refusal"; readonly refusal: string };

function partText(part: Part, param: string, images: ImageSlot): string {
  switch (part.type) {
    case "input_text":
    case "output_text":
      return part.text;
    case "input_json":
      return JSON.stringify(part.data);
    case "input_image":
      return images.take(part.image_url, param);
    case "refusal":
      return `(refused: ${part.refusal})`;
  }
}

/** A message's or output's content as text: a string as it is, parts one per line. */
function contentText(content: string | readonly Part[], param: string, images: ImageSlot): string {
  if (typeof content === "string") return content;
  return content.map((part, i) => partText(part, `${param}[${i}]`, images)).join("\n");
}

/**
 * An input array as a transcript: one entry per item, in order.
 * - a message: `role: text` (`assistant (commentary): …` with a phase)
 * - a function call: `function call name [call_id]: arguments`; its output:
 *   `function output name [call_id]: output` (a custom tool's: `tool call` / `tool output`)
 * @throws {@link HttpError} 400 when an output names no earlier call of its kind, or for a second image
 */
function transcript(items: readonly DecisionInputItem[], images: ImageSlot): string {
  const calls = new Map<string, string>();
  return items
    .map((item, i) => {
      const param = `input[${i}]`;
      if ("role" in item) {
        const phase = item.role === "assistant" && item.phase ? ` (${item.phase})` : "";
        return `${item.role}${phase}: ${contentText(item.content, `${param}.content`, images)}`;
      }
      const named = (name: string, namespace?: string | null) =>
        namespace ? `${namespace}.${name}` : name;
      switch (item.type) {
        case "function_call":
        case "custom_tool_call": {
          const name = named(item.name, item.namespace);
          calls.set(`${item.type}:${item.call_id}`, name);
          const kind = item.type === "function_call" ? "function call" : "tool call";
          const body = item.type === "function_call" ? item.arguments : item.input;
          return `${kind} ${name} [${item.call_id}]: ${body}`;
        }
        case "function_call_output":
        case "custom_tool_call_output": {
          const callType =
            item.type === "function_call_output" ? "function_call" : "custom_tool_call";
          const name = calls.get(`${callType}:${item.call_id}`);
          if (name === undefined)
            throw invalid(
              `no earlier ${callType} item has call_id ${JSON.stringify(item.call_id)}; each output must follow its call`,
              `${param}.call_id`,
              "invalid_value",
            );
          const kind = item.type === "function_call_output" ? "function output" : "tool output";
          return `${kind} ${name} [${item.call_id}]: ${contentText(item.output, `${param}.output`, images)}`;
        }
      }
    })
    .join("\n");
}

/** A question's instructions as text; its image, if any, taken into the slot. */
function instructionsText(question: DecisionQuestion, index: number, images: ImageSlot): string {
  const { instructions } = question;
  if (typeof instructions === "string") return instructions;
  const param = `questions[${index}].instructions`;
  return instructions.map((part, i) => partText(part, `${param}[${i}]`, images)).join("\n");
}

/** @throws {@link HttpError} 400 when `text`, which the answer echoes, is not Unicode text. */
function echoable(text: string | null | undefined, param: string): void {
  const problem = text ? echoProblem(text) : undefined;
  if (problem) throw invalid(problem, param, "invalid_value");
}

/** Whether text is empty or shows nothing (`showsNothing`). */
function blank(text: string): boolean {
  return text.length === 0 || showsNothing(text);
}

/**
 * One question in System One's shape.
 * @throws {@link HttpError} 400 for a predicate without text, or choices that read the same
 */
function systemOneQuestion(
  question: DecisionQuestion,
  index: number,
  instructions: string,
): Question {
  // Instructions or a description that shows nothing (spaces, invisible characters) is absent.
  const asked = blank(instructions) ? {} : { instructions };
  switch (question.type) {
    case "predicate":
      if (!("instructions" in asked))
        throw invalid(
          "a predicate needs a statement to judge",
          `questions[${index}].instructions`,
          "invalid_value",
        );
      return { type: "noul", ...asked };
    case "choice": {
      const criteria: Record<string, string | null> = {};
      const seen = new Map<string, number>();
      question.choices.forEach((choice, j) => {
        const id = optionId(choice.value);
        const param = `questions[${index}].choices[${j}].value`;
        echoable(id, param);
        if (id === "__proto__")
          throw invalid(
            '"__proto__" cannot be a choice value (it is reserved in JavaScript objects)',
            param,
            "invalid_value",
          );
        const earlier = seen.get(sameTextKey(id));
        if (earlier !== undefined) {
          const other = question.choices[earlier]!.value;
          throw invalid(
            other === choice.value
              ? `each choice must be unique; ${JSON.stringify(choice.value)} is also choice ${earlier}`
              : `${shownValue(choice.value)} and choice ${earlier}'s ${shownValue(other)} ${typeof choice.value === typeof other ? `read the same (${SAME_TEXT_REASON})` : "read the same to the model"}; use one of them`,
            param,
            "duplicate_choice",
          );
        }
        seen.set(sameTextKey(id), j);
        // A plain assignment is safe: "__proto__", the one id it would not store, was refused above.
        criteria[id] = choice.description && !blank(choice.description) ? choice.description : null;
      });
      return { type: "choice", ...asked, criteria };
    }
    case "score":
      question.levels.forEach(({ label }, j) =>
        echoable(label, `questions[${index}].levels[${j}].label`),
      );
      return {
        type: "score",
        ...asked,
        criteria: question.levels.map((level) =>
          level.description ? `${level.label}: ${level.description}` : level.label,
        ),
      };
  }
}
