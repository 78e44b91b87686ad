/**
 * The console's calls to decisiond: its JSON API under /console/api/ (src/console/api.ts) and
 * POST /v1/systemone for the playground. Same origin; the credential travels as a Bearer header,
 * never as a cookie, so no other site can make the browser act with it.
 */

import type {
  AccountView,
  ConfigView,
  CreatedKey,
  KeyView,
  SessionView,
  UsageView,
} from "../../src/protocol/console.js";
import { ClientErrorTypes, Errors, type ValidationDetail } from "../../src/protocol/errors.js";
import { type ModelEntry, type SystemOneResponse } from "../../src/protocol/schemas.js";

export type {
  AccountView,
  AllowanceView,
  ConfigView,
  CreatedKey,
  DayView,
  KeyView,
  SessionView,
  UsageTotals as Totals,
  UsageView,
} from "../../src/protocol/console.js";
export type { Answer } from "../../src/protocol/schemas.js";
export type { ValidationDetail };

/** A refused or failed call, with the server's own words. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly errorType: string,
    message: string,
    readonly details: ValidationDetail[] = [],
    readonly requestId: string | null = null,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** Sends a request and parses its JSON answer. @throws {ApiError} for any status ≥ 400. */
export async function request<T>(
  path: string,
  options: { method?: string; credential?: string | null; body?: unknown } = {},
): Promise<T> {
  const headers: Record<string, string> = {};
  if (options.credential) headers.authorization = `Bearer ${options.credential}`;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(path, {
      method: options.method ?? "GET",
      headers,
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
    });
  } catch (error) {
    throw new ApiError(
      0,
      ClientErrorTypes.network,
      `decisiond could not be reached: ${String(error)}`,
    );
  }
  const text = await response.text();
  let body: unknown = undefined;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    /* not JSON */
  }
  if (response.ok) return body as T;
  const requestId = response.headers.get("x-request-id");
  const detail = (body as { detail?: unknown } | undefined)?.detail;
  if (Array.isArray(detail))
    throw new ApiError(
      response.status,
      Errors.validation.type,
      (detail as ValidationDetail[]).map((d) => `${d.loc.join(".")}: ${d.msg}`).join("; "),
      detail as ValidationDetail[],
      requestId,
    );
  if (detail && typeof detail === "object") {
    const d = detail as { error_type?: string; message?: string };
    throw new ApiError(
      response.status,
      d.error_type ?? ClientErrorTypes.unknown,
      d.message ?? `HTTP ${response.status}`,
      [],
      requestId,
    );
  }
  throw new ApiError(
    response.status,
    ClientErrorTypes.unknown,
    `HTTP ${response.status} ${text.slice(0, 200)}`,
  );
}

/** The console API, for one credential. */
export function consoleApi(credential: string | null) {
  const call = <T>(path: string, method = "GET", body?: unknown) =>
    request<T>(`/console/api${path}`, { method, credential, body });
  const query = (params: Record<string, string | number | undefined>) => {
    const entries = Object.entries(params).filter(([, v]) => v !== undefined && v !== "");
    return entries.length === 0
      ? ""
      : "?" + new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString();
  };
  return {
    session: () => call<SessionView>("/session"),
    accounts: () => call<{ accounts: AccountView[] }>("/accounts").then((r) => r.accounts),
    keys: (account?: string) =>
      call<{ keys: KeyView[] }>(`/keys${query({ account })}`).then((r) => r.keys),
    createKey: (body: { account?: string; label?: string }) =>
      call<CreatedKey>("/keys", "POST", body),
    revokeKey: (id: number) =>
      call<KeyView & { already_revoked: boolean }>(`/keys/${id}/revoke`, "POST"),
    usage: (account: string | undefined, days: number) =>
      call<UsageView>(`/usage${query({ account, days })}`),
  };
}

export type ConsoleApi = ReturnType<typeof consoleApi>;

/** What the server offers before sign-in. */
export const fetchConfig = () => request<ConfigView>("/console/api/config");

/** Served models. */
export const fetchModels = () =>
  request<{ models: ModelEntry[] }>("/v1/models").then((r) => r.models);

/** The answer of POST /v1/systemone. */
export type DecisionResponse = SystemOneResponse;

/** POST /v1/systemone with `key` (none when the server runs with --auth off). */
export const decide = (key: string | null, body: unknown) =>
  request<DecisionResponse>("/v1/systemone", { method: "POST", credential: key, body });
