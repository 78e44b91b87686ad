import type { DebiasMode, ReadoutSettings } from "../decision/decide.js";

/**
 * The settings of a service, as `decisiond serve` reads them from its flags and `DECISIOND_*`
 * variables; each one absent takes the default named on it.
 */
export interface ServiceSettings {
  /** Address to bind. Default `127.0.0.1`. */
  readonly host?: string;
  /** Port to listen on; 0 picks a free one. Default 8080. */
  readonly port?: number;
  /** Largest request body, bytes. Default: the app's (api/app.ts). */
  readonly bodyLimit?: number;
  /** Longest time to receive a whole request, ms. Default: the app's (30 s). */
  readonly requestTimeoutMs?: number;
  /** Origins whose pages may call the API from a browser (CORS), or `*`. Default none. */
  readonly corsOrigins?: readonly string[];
  /** Decisions admitted at once (running + waiting) before 503. Default: the app's (16). */
  readonly queueCapacity?: number;
  /** Longest a decision may wait and run, ms; 0 for none. Default: the app's (300 s). */
  readonly deadlineMs?: number;
  /** `false` for no log; else pino at `level` (default `info`). */
  readonly logger?: boolean | { level?: string };
  /** Tokens per request (prefix + longest question). Default: the engine's. */
  readonly contextSize?: number;
  /** CPU threads. Default: the engine's (physical cores). */
  readonly threads?: number;
  /** Question branches evaluated side by side (text models). Default: the engine's. */
  readonly parallelBranches?: number;
  /** Most tokens one decode call takes. Default: the engine's. */
  readonly batchSize?: number;
  /** Bytes of the engine's prefix cache; 0 turns it off. Default: the engine's (512 MiB). */
  readonly prefixCacheBytes?: number;
  /** Vision only: side of the square images fed to the projector. Default: the projector's. */
  readonly imageSize?: number;
  /** Vision only: frames sampled from a video. Default 8, capped so frames fill at most half the context. */
  readonly videoFrames?: number;
  /** Vision only: longest video accepted, in seconds. Default 60. */
  readonly videoMaxSeconds?: number;
  /** Vision only: largest decoded image or video frame, in pixels. Default 40 megapixels. */
  readonly maxImagePixels?: number;
  /** Option-order debiasing of choice questions. Default `off`. */
  readonly debias?: DebiasMode;
  /** Most tokens one request may put through the model (→ 422 beyond). Default: twice the context. */
  readonly maxRequestTokens?: number;
  /**
   * Choice labels, contextual calibration, in-context examples, question contrast: only the ones
   * to change, over the Decider's defaults (over `TUNED_READOUT` with an adapter).
   */
  readonly readout?: ReadoutSettings;
}
