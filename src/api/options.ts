import type { FastifyInstance } from "fastify";
import type { DecideHooks } from "../decision/decide.js";
import type { DecisionRequest, DecisionResult } from "../decision/types.js";
import type { MediaOptions } from "../media/request.js";
import type { Gate } from "./gate.js";
import type { Lifecycle } from "./lifecycle.js";
import type { WorkQueueOptions } from "./work-queue.js";

/** A model the service answers with, as the API layer sees it. */
export interface ServedModel {
  /** Names it is served under; the first is listed first in `GET /v1/models`. */
  readonly names: readonly string[];
  /** Further accepted names that are not listed (e.g. `jev-latest`, the official clients' default). */
  readonly aliases?: readonly string[];
  readonly description: string;
  /** YYYY-MM-DD. */
  readonly releaseDate: string;
  readonly acceptsImages: boolean;
  readonly acceptsVideos: boolean;
  /** How images and video frames are prepared for the model; required when it accepts media. */
  readonly media?: MediaOptions;
  /**
   * Answers a request.
   * @param request - the validated request, with its decoded media
   * @param signal - aborts the work (the client hung up, or the deadline passed)
   * @param hooks - called along the way (`beforeScore` reserves the call's tokens)
   * @returns the answers, usage and statistics
   * @throws {@link StateTooLongError} when it does not fit the context (→ 422)
   */
  decide(
    request: DecisionRequest,
    signal?: AbortSignal,
    hooks?: DecideHooks,
  ): Promise<DecisionResult>;
}

/** Options of {@link buildApp}. */
export interface AppOptions {
  readonly models: readonly ServedModel[];
  /** Largest accepted request body in bytes. Default {@link DEFAULT_BODY_LIMIT} (16 MiB). */
  readonly bodyLimit?: number;
  /**
   * A pino logger configuration, `false` for none. Default: info level to stdout. The
   * Authorization header is redacted; bodies (states) are never logged.
   */
  readonly logger?: boolean | { level?: string; stream?: NodeJS.WritableStream };
  /** Admission control; none means every request is admitted (auth off). */
  readonly gate?: Gate;
  /** decisiond's version, for `GET /openapi.json`. */
  readonly version?: string;
  /**
   * Plugins the composition root mounts beside the API (the web console, src/console/): each is
   * called once, after the gate and the error handler are installed and before the routes, so
   * its errors have the API's shapes. Default none.
   */
  readonly mounts?: readonly AppMount[];
  /**
   * What `/readyz` checks, by name (e.g. `store`, `engine`): each resolves when its dependency
   * answers. Default none.
   */
  readonly readiness?: Readonly<Record<string, () => Promise<void>>>;
  /** Drain state shared with the process (SIGTERM); default a fresh one. */
  readonly lifecycle?: Lifecycle;
  /** Decision requests waiting for their account's slot, for `decisiond_queue_depth`. */
  readonly queueDepth?: () => number;
  /**
   * The bound on decisions waiting for the model, and their deadline (./work-queue.ts); the
   * queue's `cut` is the lifecycle's.
   */
  readonly queue?: Omit<WorkQueueOptions, "cut">;
  /**
   * Longest time to receive a request's headers, in ms, and then its body, counted from when it
   * starts to be read; past either the server answers 408 and closes the connection. Default
   * {@link DEFAULT_REQUEST_TIMEOUT_MS}.
   */
  readonly requestTimeoutMs?: number;
  /**
   * Connections one remote address may hold open before sending a request; more are closed as
   * they open. Default 1,024 (`SILENT_CONNECTIONS_PER_ADDRESS`, ./silent-connections.ts).
   */
  readonly silentConnectionsPerAddress?: number;
  /**
   * The most connections held at once; more are closed as they open. Default from the process's
   * open-file limit (`connectionCap`, ./connection-cap.ts); none where it is not known.
   */
  readonly maxConnections?: number;
  /**
   * Answer only requests whose Host header names loopback (./host.ts): for a server without
   * authentication, against DNS rebinding. Default: on when there is no gate.
   */
  readonly loopbackHostOnly?: boolean;
  /**
   * Origins whose pages may call the API's routes from a browser (CORS, ./cors.ts): exact
   * origins, or `*` for any. Default none.
   */
  readonly corsOrigins?: readonly string[];
}

/** 30 s, the default time to receive a whole request, in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** A plugin mounted on the app by its composition root; see {@link AppOptions.mounts}. */
export type AppMount = (app: FastifyInstance) => Promise<void>;
