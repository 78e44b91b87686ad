import http from "node:http";

/**
 * POSTs a JSON `body` (a string) to `url` (path and query kept) over the node:http `agent`;
 * resolves with `{ status, headers, text }`, rejects on a socket error. The benchmarks' HTTP
 * client: node:http with a keep-alive agent, since undici's fetch adds about a millisecond.
 */
export function postJson(url, agent, body) {
  const { port, pathname, search } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        path: pathname + search,
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode,
            headers: res.headers,
            text: Buffer.concat(chunks).toString("utf8"),
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}
