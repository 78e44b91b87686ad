/** A decoded `data:` URL. */
export interface DataUrl {
  /** The declared media type, lower-cased, e.g. `image/png`. */
  readonly mimeType: string;
  readonly bytes: Buffer;
}

const DATA_URL = /^data:([a-z0-9.+-]+\/[a-z0-9.+-]+)((?:;[a-z0-9.+-]+=[^;,]*)*);base64,/i;

/**
 * Decodes a base64 `data:` URL (RFC 2397) strictly: the payload must be base64 (standard or
 * URL-safe alphabet, optional padding, no other characters) and not empty.
 * @throws {@link Error} saying what is wrong.
 */
export function parseDataUrl(url: string): DataUrl {
  const head = DATA_URL.exec(url);
  if (!head) throw new Error("not a base64 data URL (data:<type>;base64,<data>)");
  const payload = url.slice(head[0].length);
  if (payload.length === 0) throw new Error("the data URL holds no data");
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(payload) || payload.length % 4 === 1)
    throw new Error("the data URL's payload is not valid base64");
  return { mimeType: head[1]!.toLowerCase(), bytes: Buffer.from(payload, "base64") };
}
