/** A decoded `data:` URL. */
export interface DataUrl {
  /** The declared media type, lower-cased, e.g. `image/png`. */
  readonly mimeType: string;
  readonly bytes: Buffer;
}

const DATA_URL = /^data:([a-z0-9.+-]+\/[a-z0-9.+-]+)((?:;[a-z0-9.+-]+=[^;,]*)*);base64,/i;

/** ASCII white space, which base64 wrapped in lines (`base64` without `-w0`, MIME) holds. */
const WHITE_SPACE = /[\t\n\f\r ]/g;

/**
 * Decodes a base64 `data:` URL (RFC 2397): the payload must be base64 (standard or URL-safe
 * alphabet, optional padding) and not empty. ASCII white space in it is skipped, as the WHATWG
 * "forgiving-base64 decode" skips it, so that base64 wrapped in lines is read; any other
 * character is refused.
 * @throws {@link Error} saying what is wrong.
 * @example `parseDataUrl("data:image/png;base64,aGVs bG8=")` decodes to the bytes of "hello"
 */
export function parseDataUrl(url: string): DataUrl {
  const head = DATA_URL.exec(url);
  if (!head) throw new Error("not a base64 data URL (data:<type>;base64,<data>)");
  const raw = url.slice(head[0].length);
  const payload = /[\t\n\f\r ]/.test(raw) ? raw.replace(WHITE_SPACE, "") : raw;
  if (payload.length === 0) throw new Error("the data URL holds no data");
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(payload) || payload.length % 4 === 1)
    throw new Error("the data URL's payload is not valid base64");
  return { mimeType: head[1]!.toLowerCase(), bytes: Buffer.from(payload, "base64") };
}
