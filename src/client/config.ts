import { closeSync, fstatSync, openSync, readFileSync } from "node:fs";
import { PUBLIC_MODEL_NAME } from "../protocol/models.js";
import { keyFilePath, type PathOptions } from "../protocol/paths.js";
import { ClientConfigError } from "./errors.js";

/** Where clients look for the service when `SERVICE_BASE_URL` is not set. */
export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";

/** The model clients ask for when neither a flag nor `DECISIOND_MODEL` names one. */
export const DEFAULT_MODEL_NAME = PUBLIC_MODEL_NAME;

/** How a client reaches the service. */
export interface ClientConfig {
  /** Base URL without a trailing slash, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** The API key sent as `Authorization: Bearer <key>`; `undefined` sends no header (auth off). */
  apiKey: string | undefined;
  /** Where the key came from. */
  keySource: "env" | "file" | "none";
  /** The key file path that was (or would have been) read. */
  keyFile: string;
}

/** What {@link resolveClientConfig} reads; defaults to the process's environment and home. */
export type ResolveOptions = PathOptions;

export { keyFilePath };

/**
 * Resolves the base URL and API key every client uses:
 * - key: `SERVICE_API_KEY` when set and non-empty; otherwise the key file (see {@link keyFilePath});
 *   otherwise none (no `Authorization` header; a server run with `--auth off` accepts that);
 * - base URL: `SERVICE_BASE_URL`, default {@link DEFAULT_BASE_URL}.
 *
 * The key file is read only when the environment has no key, and only if no one but its owner can
 * read or write it (mode 0600 or narrower), like ssh's private keys.
 *
 * @throws {@link ClientConfigError} when the key file's mode is wider than 0600 (the message names the
 *   `chmod 600` that fixes it), when it cannot be read or is empty, or when `SERVICE_BASE_URL` is
 *   not an http(s) URL.
 */
export function resolveClientConfig(options: ResolveOptions = {}): ClientConfig {
  const env = options.env ?? process.env;
  const baseUrl = normalizeBaseUrl(env.SERVICE_BASE_URL || DEFAULT_BASE_URL);
  const keyFile = keyFilePath(options);
  const fromEnv = env.SERVICE_API_KEY?.trim();
  if (fromEnv) return { baseUrl, apiKey: fromEnv, keySource: "env", keyFile };
  const fromFile = readKeyFile(keyFile);
  return fromFile === undefined
    ? { baseUrl, apiKey: undefined, keySource: "none", keyFile }
    : { baseUrl, apiKey: fromFile, keySource: "file", keyFile };
}

/** The model to ask for: `DECISIOND_MODEL` when set, else {@link DEFAULT_MODEL_NAME}. */
export function defaultModel(env: NodeJS.ProcessEnv = process.env): string {
  return env.DECISIOND_MODEL || DEFAULT_MODEL_NAME;
}

/**
 * Milliseconds between the MCP server's progress notifications: `DECISIOND_MCP_PROGRESS_MS` when
 * it is a number other than 0, else `undefined` (the server's default).
 * @example `mcpProgressIntervalMs({ DECISIOND_MCP_PROGRESS_MS: "200" })` → 200
 */
export function mcpProgressIntervalMs(env: NodeJS.ProcessEnv = process.env): number | undefined {
  return Number(env.DECISIOND_MCP_PROGRESS_MS) || undefined;
}

/**
 * A base URL checked and without trailing slashes. A path prefix is kept (a service behind a
 * reverse proxy at `https://host/decisiond`).
 * @throws {@link ClientConfigError} when it is not an http(s) URL.
 */
export function normalizeBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ClientConfigError(
      `SERVICE_BASE_URL "${value}" is not a URL; expected e.g. ${DEFAULT_BASE_URL}`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new ClientConfigError(
      `SERVICE_BASE_URL "${value}" should start with http:// or https://`,
    );
  if (url.search || url.hash)
    throw new ClientConfigError(`SERVICE_BASE_URL "${value}" should have no query or fragment`);
  return url.href.replace(/\/+$/, "");
}

/**
 * The key in `path`, trimmed; `undefined` when there is no such file.
 * @throws {@link ClientConfigError} when the mode is wider than 0600, or the file is unreadable or empty.
 */
function readKeyFile(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw new ClientConfigError(
      `cannot read the API key file ${path}: ${(error as Error).message}. ` +
        `Make it readable by you (chmod 600 ${path}), or set SERVICE_API_KEY instead.`,
      path,
    );
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile())
      throw new ClientConfigError(`the API key file ${path} is not a regular file`, path);
    // Windows has no POSIX modes: Node reports 0666 for every file, so the check means nothing there.
    if (process.platform !== "win32" && (stats.mode & 0o077) !== 0) {
      const mode = (stats.mode & 0o777).toString(8).padStart(4, "0");
      throw new ClientConfigError(
        `refusing to use the API key file ${path}: its mode is ${mode}, so other users can read or change it. ` +
          `Fix it with: chmod 600 ${path} (or set SERVICE_API_KEY instead).`,
        path,
      );
    }
    const key = readFileSync(fd, "utf8").trim();
    if (!key)
      throw new ClientConfigError(
        `the API key file ${path} is empty; write the key into it or delete it (no key: no Authorization header)`,
        path,
      );
    return key;
  } finally {
    closeSync(fd);
  }
}
