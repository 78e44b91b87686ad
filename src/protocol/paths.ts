import { homedir as osHomedir } from "node:os";
import { isAbsolute, join } from "node:path";

/**
 * Where decisiond's files and tools live on one machine, shared by the server (which writes them)
 * and its clients (which read them), so neither imports the other: the configuration of places,
 * read from the environment here (`DECISIOND_HOME`, `XDG_CONFIG_HOME`, `HOME`,
 * `DECISIOND_FFMPEG`, `DECISIOND_FFPROBE`).
 */

/** What {@link keyFilePath} reads; defaults to the process's environment and home. */
export interface PathOptions {
  env?: NodeJS.ProcessEnv;
  /** The home directory, for `~/.config`; default `$HOME`, else `os.homedir()`. */
  homedir?: string;
}

/**
 * The key file: `$XDG_CONFIG_HOME/decisiond/api_key` when `XDG_CONFIG_HOME` is set (and absolute,
 * as the XDG spec requires), else `~/.config/decisiond/api_key`.
 *
 * @returns an absolute path; the file may not exist.
 */
export function keyFilePath(options: PathOptions = {}): string {
  const env = options.env ?? process.env;
  const xdg = env.XDG_CONFIG_HOME;
  const home = options.homedir ?? (env.HOME || osHomedir());
  const configHome = xdg && isAbsolute(xdg) ? xdg : join(home, ".config");
  return join(configHome, "decisiond", "api_key");
}

/**
 * The ffmpeg or ffprobe binary the environment names (`DECISIOND_FFMPEG`, `DECISIOND_FFPROBE`);
 * `undefined` when it names none (media/tools.ts then looks for a packaged build, then the PATH).
 * @example `toolOverride("ffmpeg", { DECISIOND_FFMPEG: "/usr/bin/ffmpeg" })` → "/usr/bin/ffmpeg"
 */
export function toolOverride(
  tool: "ffmpeg" | "ffprobe",
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  return env[tool === "ffmpeg" ? "DECISIOND_FFMPEG" : "DECISIOND_FFPROBE"] || undefined;
}

/**
 * The Hugging Face hub the environment names for model downloads, as the hub's own tools read
 * it: `HF_ENDPOINT` (base URL) and `HF_TOKEN` (bearer token); each `undefined` when unset or
 * empty (models/pull.ts then uses the public hub, without an `Authorization` header).
 * @example `huggingFaceHub({ HF_TOKEN: "hf_x" })` → `{ endpoint: undefined, token: "hf_x" }`
 */
export function huggingFaceHub(env: NodeJS.ProcessEnv = process.env): {
  endpoint: string | undefined;
  token: string | undefined;
} {
  return { endpoint: env.HF_ENDPOINT || undefined, token: env.HF_TOKEN || undefined };
}

/**
 * The directory decisiond keeps its state in: downloaded models, calibration profiles, the
 * SQLite store. `$DECISIOND_HOME` when set, otherwise `~/.cache/decisiond`.
 *
 * @returns an absolute path; it is not created here.
 */
export function decisiondHome(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.DECISIOND_HOME;
  return fromEnv && fromEnv.length > 0 ? fromEnv : join(osHomedir(), ".cache", "decisiond");
}
