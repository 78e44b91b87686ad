import { inject } from "vitest";
import { DEFAULT_MODEL } from "../../src/models/catalogue.js";
import { startService, type Service, type ServiceOptions } from "../../src/service/build.js";

/** Starts the real service on the real default model on a free loopback port. */
export function startTestService(options: Partial<ServiceOptions> = {}): Promise<Service> {
  return startService({
    modelPath: inject("modelPath"),
    modelId: DEFAULT_MODEL,
    isDefault: true,
    host: "127.0.0.1",
    port: 0,
    logger: false,
    contextSize: 2048,
    ...options,
  });
}

/** POSTs JSON and returns the status, headers and parsed body. */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON: keep the text */
  }
  return { status: res.status, headers: res.headers, body: parsed };
}
