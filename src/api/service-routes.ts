import type { FastifyInstance } from "fastify";
import { decisionsError, DecisionsErrors } from "../protocol/decisions-errors.js";
import type { OpenAiModel } from "../protocol/decisions-response.js";
import type { ModelEntry } from "../protocol/schemas.js";
import type { Lifecycle } from "./lifecycle.js";
import type { ServiceMetrics } from "./metrics.js";
import { openApiDocument } from "./openapi.js";
import type { ServedModel } from "./options.js";

/** How long `/readyz` waits for each check, in ms. */
export const READY_CHECK_MS = 2000;

/** What the service routes read. */
export interface ServiceRoutesOptions {
  readonly models: readonly ServedModel[];
  /** Every name and alias the models answer to, for the OpenAPI document. */
  readonly names: readonly string[];
  readonly lifecycle: Lifecycle;
  readonly metrics: ServiceMetrics;
  /** What `/readyz` checks, by name. */
  readonly readiness: Readonly<Record<string, () => Promise<void>>>;
  /** decisiond's version. */
  readonly version: string;
  /** Whether requests need an API key. */
  readonly auth: boolean;
}

/**
 * Registers the routes around the decision: `GET /healthz` (alive), `GET /readyz` (every
 * dependency answers within 2 s, and not draining), `GET /metrics` (Prometheus text),
 * `GET /openapi.json`, `GET /v1/models` (System One's `models` and the OpenAI SDKs' `data`, in
 * one body) and `GET /v1/models/{model}` (one entry of `data`, the OpenAI SDKs' `models.retrieve`).
 */
export function registerServiceRoutes(app: FastifyInstance, options: ServiceRoutesOptions): void {
  const { models, lifecycle, metrics } = options;
  // Load balancers and Prometheus poll these every few seconds: their requests are not logged at
  // info (their faults still are).
  const polled = { logLevel: "warn" } as const;

  app.get("/healthz", polled, async () => ({
    status: "ok",
    models: models.map((m) => m.names[0]),
  }));

  app.get("/readyz", polled, async (_request, reply) => {
    const checks: Record<string, string> = {};
    await Promise.all(
      Object.entries(options.readiness).map(async ([name, check]) => {
        try {
          await withTimeout(
            check(),
            READY_CHECK_MS,
            `${name} did not answer within ${READY_CHECK_MS} ms`,
          );
          checks[name] = "ok";
        } catch (error) {
          checks[name] = error instanceof Error ? error.message : String(error);
        }
      }),
    );
    const ready = !lifecycle.draining && Object.values(checks).every((c) => c === "ok");
    void reply.code(ready ? 200 : 503);
    return { status: ready ? "ready" : lifecycle.draining ? "draining" : "not_ready", checks };
  });

  app.get("/metrics", polled, async (_request, reply) => {
    void reply.header("content-type", metrics.registry.contentType);
    return metrics.registry.metrics();
  });

  const openapi = openApiDocument({
    version: options.version,
    auth: options.auth,
    models: options.names,
  });
  app.get("/openapi.json", async () => openapi);

  // Both wires' clients read this list: System One's `models`, the OpenAI SDKs' `data`. Aliases
  // (`jev-latest`) are listed after the names, as System One lists a name or alias a request may
  // give; a request that gives one is answered under the model's first name.
  const listed = [
    ...new Map(
      models.flatMap((m) => [...m.names, ...(m.aliases ?? [])].map((id) => [id, m] as const)),
    ),
  ];
  const openAiModels = listed.map(([id, m]): OpenAiModel => ({
    id,
    object: "model",
    created: Math.floor((Date.parse(m.releaseDate) || 0) / 1000),
    owned_by: "decisiond",
  }));
  app.get(
    "/v1/models",
    async (): Promise<{ models: ModelEntry[]; object: "list"; data: OpenAiModel[] }> => ({
      models: listed.map(([name, m]) => ({
        name,
        description: m.names.includes(name)
          ? m.description
          : `${m.description}; an alias of ${m.names[0] ?? name}, answered under that name`,
        release_date: m.releaseDate,
      })),
      object: "list",
      data: openAiModels,
    }),
  );

  // The OpenAI SDKs' `models.retrieve(id)`: one entry of `data`, or their 404. A wildcard, for
  // ids with a "/" (a vLLM engine's `org/name`), sent encoded by the SDKs and raw by others.
  app.get<{ Params: { "*": string } }>("/v1/models/*", async (request): Promise<OpenAiModel> => {
    const model = request.params["*"];
    const found = openAiModels.find((m) => m.id === model);
    if (found) return found;
    const served = openAiModels.map((m) => m.id).join(", ");
    throw decisionsError(
      DecisionsErrors.modelNotFound,
      model === ""
        ? `Name a model after /v1/models/; served: ${served}`
        : `The model ${JSON.stringify(model)} is not served here; served: ${served}`,
      null,
    );
  });
}

/** `promise`, or a rejection with `message` after `ms` milliseconds. */
function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
