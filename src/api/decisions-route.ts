import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { RequestTooLargeError, StateTooLongError } from "../decision/decide.js";
import { MediaInputError } from "../media/errors.js";
import { DecisionsRequestSchema, type DecisionsRequest } from "../protocol/decisions.js";
import type { Decision } from "../protocol/decisions-response.js";
import {
  decisionsError,
  DecisionsErrors,
  invalidRequestFromZod,
  toOpenAiError,
} from "../protocol/decisions-errors.js";
import {
  decisionUsage,
  fromDecisionsRequest,
  refusedDecision,
  toDecisionAnswers,
  type DecisionsTranslation,
} from "../protocol/decisions-translate.js";
import { validationError } from "../protocol/errors.js";
import { PromptTextError } from "../protocol/prompt-text.js";
import { DECISIONS_PATH } from "../protocol/routes.js";
import { Call, type DecideRouteOptions } from "./decide-route.js";
import { jsonShapeProblems } from "./json-shape.js";
import type { ServedModel } from "./options.js";
import { servedModelName } from "./validate.js";

/**
 * `POST /v1/decisions`, OpenAI's Decisions wire, as an encapsulated plugin: the body is validated
 * against the wire's schema (src/protocol/decisions.ts), translated onto System One's request
 * (src/protocol/decisions-translate.ts), decided by the same core under the same gate (keys, one
 * request in flight per account across both wires, allowance, ledger), work queue and metrics,
 * and answered in this wire's shape. A question that cannot fit the context, or that holds an
 * image for a text-only model, is answered `{type: "refusal"}` while the others are answered.
 *
 * Every error of this route is answered in OpenAI's shape by the plugin's own error handler,
 * which lets the app's one handler (./error-handler.ts) decide status and message through the
 * error table and re-shapes its answer (`toOpenAiError`); `/v1/systemone` keeps its shapes.
 * Why: docs/decisions/085-decisions-wire.md
 *
 * @example
 * ```ts
 * await app.register(decisionsRoute({ byName, queue, metrics, hooks }));
 * // POST /v1/decisions {"model": "decisiond-1.0-experimental", "input": "…", "questions": [{"type": "predicate", "instructions": "…"}]}
 * // → 200 {"model", "answers": [{"type": "predicate", "name": null, "probability": 0.93}], "usage": {…}}
 * ```
 */
export function decisionsRoute(
  options: DecideRouteOptions,
): (app: FastifyInstance) => Promise<void> {
  return async (app) => {
    const shared = app.errorHandler;
    app.setErrorHandler(async function (error: FastifyError, request, reply) {
      const answered = await answerOf(shared, this, error, request);
      const { status, body } = toOpenAiError(answered.status, answered.body);
      return reply.code(status).headers(answered.headers).send(body);
    });

    app.route({
      method: "POST",
      url: DECISIONS_PATH,
      ...options.hooks, // drain, authenticate | admit | record the ledger row | count faults
      handler: async (request, reply): Promise<Decision | undefined> => {
        const call = new Call(request.admission?.ticket, options.metrics);
        try {
          const { body, model, name } = validate(request.body, options.byName);
          const translation = fromDecisionsRequest(body, {
            acceptsImages: model.acceptsImages,
            name,
          });
          if (Object.keys(translation.systemOne.questions).length === 0)
            return refusedDecision(name, body);
          let result;
          try {
            result = await call.run(
              { body: translation.systemOne, model, name },
              reply,
              options.queue,
              {
                unfit: "refuse",
              },
            );
          } catch (error) {
            throw wireError(error, body, translation);
          }
          if (!result) return undefined;
          const answers = toDecisionAnswers(body, translation, result.answers, result.refused);
          request.log.info(
            {
              model: name,
              questions: body.questions.length,
              refused: answers.filter((a) => a.type === "refusal").length,
              usage: result.usage,
              stats: result.stats,
              // The caller's opaque end-user id, so an operator can trace a call to its end user.
              ...(body.safety_identifier ? { safety_identifier: body.safety_identifier } : {}),
            },
            "decided",
          );
          return { model: name, answers, usage: decisionUsage(result.usage, result.stats) };
        } finally {
          call.settle();
        }
      },
    });
  };
}

/** What an error handler answered: status, headers and body. */
interface Answered {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * What `handler` answers for `error`, captured instead of sent: the app's one error handler
 * writes `reply.code(…).headers(…).send(body)`; a reply that records those calls stands in.
 * @returns its status, headers and body; a 500 with no body if it sent nothing
 */
async function answerOf(
  handler: FastifyInstance["errorHandler"],
  instance: FastifyInstance,
  error: FastifyError,
  request: FastifyRequest,
): Promise<Answered> {
  const answered: Answered = { status: 500, headers: {}, body: undefined };
  const reply = {
    request,
    log: request.log,
    code(status: number) {
      answered.status = status;
      return reply;
    },
    status(status: number) {
      answered.status = status;
      return reply;
    },
    header(name: string, value: unknown) {
      answered.headers[name.toLowerCase()] = String(value);
      return reply;
    },
    headers(values: Record<string, unknown>) {
      for (const [name, value] of Object.entries(values)) reply.header(name, value);
      return reply;
    },
    send(body: unknown) {
      answered.body = body;
      return reply;
    },
  };
  // The handler may be async (a promise) or not (void).
  const done: unknown = handler.call(instance, error, request, reply as unknown as FastifyReply);
  if (done instanceof Promise) await done;
  return answered;
}

/** A validated body, its served model and the name it is answered under. */
interface ValidDecisions {
  readonly body: DecisionsRequest;
  readonly model: ServedModel;
  readonly name: string;
}

/**
 * Validates a parsed body and resolves its model.
 * @throws {@link HttpError} 400 naming the first problem (`param`), 404 `model_not_found`
 */
function validate(raw: unknown, byName: ReadonlyMap<string, ServedModel>): ValidDecisions {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    throw validationError([
      { loc: ["body"], msg: "The body should be a JSON object", type: "invalid_type" },
    ]);
  // Depth and finite numbers first: zod relies on them.
  const shape = jsonShapeProblems(raw);
  if (shape.length > 0) throw validationError(shape);
  const parsed = DecisionsRequestSchema.safeParse(raw, { reportInput: true });
  if (!parsed.success) throw invalidRequestFromZod(parsed.error.issues);
  // The body as parsed (unknown fields are left in, and nothing reads them): zod's output would
  // copy the JSON parts' data, and lose a "__proto__" key of theirs.
  const body = raw as DecisionsRequest;
  const model = byName.get(body.model);
  if (!model)
    throw decisionsError(
      DecisionsErrors.modelNotFound,
      `The model ${JSON.stringify(body.model)} is not served here; served: ${[...byName.keys()].join(", ")}`,
      "model",
    );
  return { body, model, name: servedModelName(body, byName)! };
}

/**
 * The decision core's request errors in this wire's words, placed in its body; others as they are.
 * A question is named by its place (`questions[2]`), and its name when it has one: the core's id
 * for it is that index, which would read like a name.
 * @param translation - for the image's place
 */
function wireError(
  error: unknown,
  body: DecisionsRequest,
  translation: DecisionsTranslation,
): unknown {
  const naming = (id: string) => {
    const name = body.questions[Number(id)]?.name;
    return name ? `question ${JSON.stringify(name)} (questions[${id}])` : `questions[${id}]`;
  };
  if (error instanceof StateTooLongError)
    return decisionsError(
      DecisionsErrors.contextLengthExceeded,
      `input: the input does not fit the model's context (${error.messageNaming(naming)})`,
      "input",
    );
  if (error instanceof RequestTooLargeError) {
    const param =
      error.heaviestQuestionId === undefined
        ? "questions"
        : `questions[${error.heaviestQuestionId}]`;
    const message = `${param}: ${error.messageNaming(naming)}`;
    return decisionsError(DecisionsErrors.tooManyTokens, message, param);
  }
  if (error instanceof PromptTextError) {
    const param = error.part === "prefix" ? "input" : "questions";
    return decisionsError(
      DecisionsErrors.invalidRequest,
      `${param}: ${error.message}`,
      param,
      "invalid_prompt_text",
    );
  }
  if (error instanceof MediaInputError) {
    const param = translation.imageParam ?? null;
    return decisionsError(
      DecisionsErrors.invalidImage,
      param === null ? error.message : `${param}: ${error.message}`,
      param,
    );
  }
  return error;
}
