import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { isDeepStrictEqual } from "node:util";

/** One recorded HTTP exchange with an engine. */
export interface Exchange {
  readonly method: "GET" | "POST";
  readonly path: string;
  /** The JSON request body, compared as a value (absent for GET). */
  readonly body?: unknown;
  readonly status: number;
  /** The JSON answer, or a string sent as it is. */
  readonly response: unknown;
}

/** A replay server: answers each request with the recorded exchange of equal method, path and body. */
export interface Replay {
  readonly url: string;
  /** Requests that matched no exchange (a test asserts this stays empty). */
  readonly unmatched: { method: string; path: string; body: unknown }[];
  /** How many times each exchange (by index) was used. */
  readonly hits: number[];
  close(): Promise<void>;
}

/** Reads `test/fixtures/<name>.json`: `{ "source": "...", "exchanges": Exchange[] }`. */
export function loadExchanges(name: string): Exchange[] {
  const file = new URL(`../fixtures/${name}.json`, import.meta.url);
  return (JSON.parse(readFileSync(file, "utf8")) as { exchanges: Exchange[] }).exchanges;
}

/** Serves `exchanges` on a free loopback port. Unmatched requests get 404 and are recorded. */
export async function replay(exchanges: readonly Exchange[]): Promise<Replay> {
  const unmatched: Replay["unmatched"] = [];
  const hits = exchanges.map(() => 0);
  const server: Server = createServer((req, res) => {
    let raw = "";
    req.on("data", (chunk: Buffer) => (raw += chunk.toString("utf8")));
    req.on("end", () => {
      const body: unknown = raw ? JSON.parse(raw) : undefined;
      const at = exchanges.findIndex(
        (e) =>
          e.method === req.method &&
          e.path === req.url &&
          (e.method === "GET" || isDeepStrictEqual(e.body, body)),
      );
      if (at < 0) {
        unmatched.push({ method: req.method ?? "", path: req.url ?? "", body });
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ detail: "Not Found" }));
        return;
      }
      hits[at]!++;
      const exchange = exchanges[at]!;
      const text =
        typeof exchange.response === "string"
          ? exchange.response
          : JSON.stringify(exchange.response);
      res.writeHead(exchange.status, { "content-type": "application/json" });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    unmatched,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
