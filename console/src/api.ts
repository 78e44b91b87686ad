/**
 * The console's calls to decisiond: its JSON API under /console/api/ (src/console/api.ts) and
 * POST /v1/systemone for the playground. Same origin; the credential travels as a Bearer header,
 * never as a cookie, so no other site can make the browser act with it.
 */

/** A key as the console API lists it. */
export interface KeyView {
  id: number;
  account: string;
  prefix: string;
  label: string | null;
  created_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface AllowanceView {
  tokens: number;
  period: "day" | "month" | "total";
  used: number;
  remaining: number;
  renews_at: string | null;
}

export interface AccountView {
  name: string;
  created_at: string | null;
  allowance: AllowanceView | null;
  active_keys: number;
}

export interface DayView {
  date: string;
  calls: number;
  failed_calls: number;
  input_tokens: number;
  output_tokens: number;
}

export interface Totals {
  calls: number;
  failed_calls: number;
  input_tokens: number;
  output_tokens: number;
}

export interface UsageView {
  account: string;
  days: DayView[];
  window: Totals;
  all_time: Totals;
  allowance: AllowanceView | null;
}

export type SessionView = { role: "admin" } | { role: "account"; account: string; key: KeyView };

export interface ConfigView {
  auth: boolean;
  admin_sign_in: boolean;
}

export type CreatedKey = KeyView & { key: string; account_created: boolean };

/** One 422 detail. */
export interface ValidationDetail {
  loc: (string | number)[];
  msg: string;
  type: string;
}

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
    throw new ApiError(0, "network_error", `decisiond could not be reached: ${String(error)}`);
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
      "validation_error",
      (detail as ValidationDetail[]).map((d) => `${d.loc.join(".")}: ${d.msg}`).join("; "),
      detail as ValidationDetail[],
      requestId,
    );
  if (detail && typeof detail === "object") {
    const d = detail as { error_type?: string; message?: string };
    throw new ApiError(
      response.status,
      d.error_type ?? "error",
      d.message ?? `HTTP ${response.status}`,
      [],
      requestId,
    );
  }
  throw new ApiError(response.status, "error", `HTTP ${response.status} ${text.slice(0, 200)}`);
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
  request<{ models: { name: string; description: string }[] }>("/v1/models").then((r) => r.models);

/** The answers of POST /v1/systemone. */
export type Answer =
  | { type: "noul"; noul: number }
  | { type: "choice"; choice: string; probabilities: Record<string, number>; confidence: number }
  | {
      type: "score";
      score: number;
      legend: Record<string, string>;
      probabilities: Record<string, number>;
      confidence: number;
    };

export interface DecisionResponse {
  model: string;
  answers: Record<string, Answer>;
  usage: { input_tokens: number; output_tokens: number };
}

/** POST /v1/systemone with `key` (none when the server runs with --auth off). */
export const decide = (key: string | null, body: unknown) =>
  request<DecisionResponse>("/v1/systemone", { method: "POST", credential: key, body });
