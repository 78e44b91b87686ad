import { Ajv, type ValidateFunction } from "ajv";
import { validationError, type ValidationDetail } from "../protocol/errors.js";
import { requestJsonSchema } from "../protocol/json-schema.js";
import { SystemOneRequestSchema, type SystemOneRequest } from "../protocol/schemas.js";
import {
  echoProblem,
  quoteId,
  SAME_TEXT_REASON,
  sameTextIds,
  showsNothing,
} from "../protocol/option-ids.js";
import { detailsFromZod } from "../protocol/validation.js";
import { jsonShapeProblems } from "./json-shape.js";
import type { ServedModel } from "./options.js";

/**
 * The one validator of `POST /v1/systemone` bodies: the JSON Schema generated from the zod
 * schemas (src/protocol/json-schema.ts), compiled once with Ajv. It decides; zod only words the
 * 422 details of a body it refused, so a valid body is walked once.
 * Why a compiled schema and not zod alone: docs/decisions/062-one-request-validator.md
 */

let compiled: ValidateFunction | undefined;

/**
 * Whether a parsed JSON body is a valid request. Compiles the schema on first use.
 * @param body - a value from `JSON.parse` that passed {@link jsonShapeProblems} (no non-finite
 *   numbers, no deeper nesting than the limit), not arbitrary JavaScript
 * @returns `true` exactly when `SystemOneRequestSchema` accepts it (test/request-validator.test.ts)
 * @example isValidRequest(JSON.parse(text)) // → true
 */
export function isValidRequest(body: unknown): body is SystemOneRequest {
  const validate = (compiled ??= new Ajv({
    strict: true,
    allowUnionTypes: true,
    discriminator: true,
    // String lengths as `.length`, not code points counted one by one: the schema's only string
    // bound is `minLength: 1` (not empty), which both decide alike, and counting walked every
    // character of a 15 MB body (30 ms holding the event loop). Ajv 8 calls the option
    // deprecated but honours it (vocabularies/validation/limitLength.js); its notice is dropped.
    unicode: false,
    logger: { log: console.log, warn: warnUnlessUnicode, error: console.error },
  }).compile(requestJsonSchema()));
  return validate(body);
}

/** Ajv's warnings, but for the deprecation notice of the `unicode` option set above. */
function warnUnlessUnicode(...args: unknown[]): void {
  if (!String(args[0]).includes("option unicode")) console.warn(...args);
}

/** A validated request and the model it names. */
export interface ValidRequest {
  /** The body as parsed; unknown fields are left in, and nothing reads them. */
  readonly body: SystemOneRequest;
  readonly model: ServedModel;
  /** The name the response reports (see {@link answeredName}). */
  readonly name: string;
}

/**
 * Validates a parsed body and resolves its model.
 * @param raw - the parsed JSON body
 * @param byName - the served models by every name and alias they answer to
 * @returns the body, its model and the name to answer under
 * @throws {@link HttpError} 422 with `detail[]`: what is wrong and where, the model unknown, or
 *   media the model does not take
 */
export function validateRequest(
  raw: unknown,
  byName: ReadonlyMap<string, ServedModel>,
): ValidRequest {
  if (raw === undefined || raw === null || typeof raw !== "object" || Array.isArray(raw))
    throw validationError([
      { loc: ["body"], msg: "The body should be a JSON object", type: "model_attributes_type" },
    ]);
  // Depth, finite numbers and reserved ids first: the validator and zod rely on them.
  const shape = jsonShapeProblems(raw);
  if (shape.length > 0) throw validationError(shape);
  let details: ValidationDetail[] = [];
  if (!isValidRequest(raw)) {
    const parsed = SystemOneRequestSchema.safeParse(raw, { reportInput: true });
    details = parsed.success ? [] : detailsFromZod(parsed.error.issues);
  }
  if (!("state" in raw))
    details = [
      { loc: ["body", "state"], msg: "Field required", type: "missing" },
      ...details.filter((d) => d.loc[1] !== "state"),
    ];
  if (details.length > 0) throw validationError(details);
  const body = raw as SystemOneRequest;
  optionIdProblems(body);
  blankTextProblems(body);
  const model = byName.get(body.model);
  if (!model)
    throw validationError([
      {
        loc: ["body", "model"],
        msg: `model ${JSON.stringify(body.model)} is not served here; served: ${[...byName.keys()].join(", ")}`,
        type: "unknown_model",
      },
    ]);
  const name = answeredName(model, body.model);
  mediaProblems(body, model, name);
  return { body, model, name };
}

/**
 * @throws {@link HttpError} 422 when a question id or a choice's option id, which the answer
 *   echoes, is not Unicode text, or two question ids, or two option ids of a choice, are the same
 *   text
 */
function optionIdProblems(body: SystemOneRequest): void {
  const notText = (loc: string[], what: string, id: string) => {
    const problem = echoProblem(id);
    if (problem) throw validationError([{ loc, msg: `${what} ${problem}`, type: "value_error" }]);
  };
  // The answers are keyed by question id: two that read the same would come back alike.
  const questionIds = Object.keys(body.questions);
  const sameQuestions = sameTextIds(questionIds);
  if (sameQuestions) {
    const [earlier, later] = sameQuestions.map((i) => questionIds[i]!);
    throw validationError([
      {
        loc: ["body", "questions", later!],
        msg: `Question ids ${quoteId(earlier!)} and ${quoteId(later!)} read the same (${SAME_TEXT_REASON}); use one of them`,
        type: "value_error",
      },
    ]);
  }
  for (const [id, question] of Object.entries(body.questions)) {
    notText(["body", "questions", id], "Question id", id);
    if (question.type !== "choice") continue;
    const ids = Object.keys(question.criteria);
    for (const option of ids)
      notText(["body", "questions", id, "criteria", option], "Option id", option);
    const same = sameTextIds(ids);
    if (!same) continue;
    const [earlier, later] = same.map((i) => ids[i]!);
    throw validationError([
      {
        loc: ["body", "questions", id, "criteria", later!],
        msg: `Option ids ${quoteId(earlier!)} and ${quoteId(later!)} read the same (${SAME_TEXT_REASON}); use one of them`,
        type: "value_error",
      },
    ]);
  }
}

/**
 * @throws {@link HttpError} 422 when a question's instructions, an option's description or a
 *   level is a string that shows nothing (only spaces or invisible characters): the schema
 *   refuses `""`, and such text asks the model as little; `null` (or leaving it out) says "none"
 */
function blankTextProblems(body: SystemOneRequest): void {
  const blank = (loc: (string | number)[], what: string, text: unknown) => {
    if (typeof text === "string" && showsNothing(text))
      throw validationError([
        {
          loc,
          msg: `${what} ${quoteId(text)} shows nothing: it holds only spaces or invisible characters; write it, or send null`,
          type: "value_error",
        },
      ]);
  };
  for (const [id, question] of Object.entries(body.questions)) {
    const at: (string | number)[] = ["body", "questions", id];
    blank([...at, "instructions"], "Instructions", question.instructions);
    if (question.type === "choice")
      for (const [option, text] of Object.entries(question.criteria))
        blank([...at, "criteria", option], "A description", text);
    else if (question.type === "noul")
      for (const side of ["true", "false"] as const)
        blank([...at, "criteria", side], "A description", question.criteria?.[side]);
    else
      for (const [level, text] of question.criteria.entries())
        blank([...at, "criteria", level], "A level", text);
  }
}

/**
 * @throws {@link HttpError} 422 when the body sends both media, or media the model does not take,
 *   or `assets` (System One's newer image placeholders, which the TypeSafe Python SDK sends):
 *   not read here, so refused rather than answered without the image
 */
function mediaProblems(body: SystemOneRequest, model: ServedModel, name: string): void {
  const { assets } = body as { assets?: unknown };
  if (assets !== undefined && assets !== null)
    throw validationError([
      {
        loc: ["body", "assets"],
        msg: model.acceptsImages
          ? '"assets" (image placeholders) is not supported by this server: send one image as a ' +
            'base64 data URL in "images", e.g. "images": ["data:image/png;base64,…"]'
          : `model ${name} does not accept images: it is a text-only model, and "assets" ` +
            "(image placeholders) is not supported either: send one image as a base64 data URL " +
            'in "images" to a vision model, e.g. `decisiond serve --model smolvlm-256m-instruct`',
        type: "value_error",
      },
    ]);
  if (body.images && body.videos)
    throw validationError([
      {
        loc: ["body", "videos"],
        msg: "Send one image or one video, not both",
        type: "value_error",
      },
    ]);
  if (body.images && !model.acceptsImages)
    throw validationError([
      {
        loc: ["body", "images"],
        msg:
          `model ${name} does not accept images: it is a text-only model. Serve a vision model to ` +
          "send images, e.g. `decisiond serve --model smolvlm-256m-instruct` (its projector is " +
          "pulled with it), or a GGUF with its projector: `decisiond serve --model FILE.gguf --mmproj MMPROJ.gguf`",
        type: "value_error",
      },
    ]);
  if (body.videos && !model.acceptsVideos)
    throw validationError([
      {
        loc: ["body", "videos"],
        msg:
          `model ${name} does not accept videos: it is a text-only model. Serve a vision model to ` +
          "send videos, e.g. `decisiond serve --model smolvlm-256m-instruct`",
        type: "value_error",
      },
    ]);
}

/**
 * The served name a parsed body's `model` resolves to, as the route answers it.
 * @returns the name, `undefined` when the body names no served model
 */
export function servedModelName(
  body: unknown,
  byName: ReadonlyMap<string, ServedModel>,
): string | undefined {
  const requested =
    typeof body === "object" && body !== null ? (body as { model?: unknown }).model : undefined;
  if (typeof requested !== "string") return undefined;
  const model = byName.get(requested);
  return model ? answeredName(model, requested) : undefined;
}

/** The name a response reports: the requested one when listed, else the model's first (aliases). */
function answeredName(model: ServedModel, requested: string): string {
  return model.names.includes(requested) ? requested : model.names[0]!;
}
