import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/**
 * The service's Prometheus metrics (prom-client), served at `GET /metrics` in the text format.
 * Names follow Prometheus conventions: `_total` counters, base units (seconds).
 *
 * | metric | type | labels |
 * |---|---|---|
 * | `decisiond_requests_total` | counter | `route`, `status`, `error_type` ("" when none; 499 `client_closed`: the client left before its answer) |
 * | `decisiond_request_duration_seconds` | histogram | `route` |
 * | `decisiond_tokens_total` | counter | `direction` (`input`/`output`) |
 * | `decisiond_requests_in_flight` | gauge | — (decision requests being handled) |
 * | `decisiond_queue_depth` | gauge | — (decision requests waiting for their account's slot) |
 * | `decisiond_engine_errors_total` | counter | — (decisions that failed in the engine or readout, or whose engine did not answer) |
 * | `decisiond_list_windows_total` | counter | `read` (`windows`/`whole`: decisions whose option lines were planned in windows, decision 113, by how the engine read them) |
 * | `decisiond_draining` | gauge | — (1 after SIGTERM) |
 *
 * plus prom-client's default process metrics (`process_*`, `nodejs_*`).
 */
export interface ServiceMetrics {
  readonly registry: Registry;
  readonly requests: Counter<"route" | "status" | "error_type">;
  readonly duration: Histogram<"route">;
  readonly tokens: Counter<"direction">;
  readonly inFlight: Gauge;
  readonly queueDepth: Gauge;
  readonly engineErrors: Counter;
  readonly listWindows: Counter<"read">;
  readonly draining: Gauge;
}

/** What the gauges read when scraped. */
export interface MetricsSources {
  /** Decision requests being handled now. */
  inFlight(): number;
  /** Decision requests waiting for their account's slot. */
  queueDepth(): number;
  /** Whether the service is draining. */
  draining(): boolean;
}

/**
 * A fresh registry with the service's metrics (one per app, so tests and several apps in one
 * process do not share counters).
 */
export function createMetrics(sources: MetricsSources): ServiceMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    requests: new Counter({
      name: "decisiond_requests_total",
      help: "HTTP requests answered (499: the client left first), by route, status and error_type",
      labelNames: ["route", "status", "error_type"] as const,
      registers,
    }),
    duration: new Histogram({
      name: "decisiond_request_duration_seconds",
      help: "Time from a request's arrival to its answer, in seconds",
      labelNames: ["route"] as const,
      // Up to the default deadline (300 s): a long list on a small CPU takes minutes.
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers,
    }),
    tokens: new Counter({
      name: "decisiond_tokens_total",
      help: "Tokens of answered decision requests, as their usage reports",
      labelNames: ["direction"] as const,
      registers,
    }),
    inFlight: new Gauge({
      name: "decisiond_requests_in_flight",
      help: "Decision requests being handled",
      registers,
      collect() {
        this.set(sources.inFlight());
      },
    }),
    queueDepth: new Gauge({
      name: "decisiond_queue_depth",
      help: "Decision requests waiting for their account's slot",
      registers,
      collect() {
        this.set(sources.queueDepth());
      },
    }),
    engineErrors: new Counter({
      name: "decisiond_engine_errors_total",
      help: "Decision requests that failed in the engine or the readout (500), or whose engine did not answer (503 engine_unreachable)",
      registers,
    }),
    listWindows: new Counter({
      name: "decisiond_list_windows_total",
      help: "Decisions whose option lines were planned in windows, by how the engine read them: in windows, or whole",
      labelNames: ["read"] as const,
      registers,
    }),
    draining: new Gauge({
      name: "decisiond_draining",
      help: "1 while the service drains before exit (SIGTERM), else 0",
      registers,
      collect() {
        this.set(sources.draining() ? 1 : 0);
      },
    }),
  };
}
