import type { FastifyInstance } from "fastify";
import {
  decodeJsonBytes,
  JSON_CONTENT_TYPE,
  parseJsonBody,
  unacceptableCharset,
} from "../api/json.js";
import { ApiError, Errors } from "../protocol/errors.js";

/**
 * Makes the routes registered on `scope` (and its children) take no body: a JSON Content-Type
 * with an empty body (or only whitespace) is no body, as the same request without the header is.
 * A body that is not empty is parsed as the app parses JSON: 415 for a charset other than UTF-8,
 * 422 when it is not JSON or not UTF-8.
 * @param scope - an encapsulated scope holding only body-less routes; routes that need a body keep
 *   the app's parser, which refuses an empty body with 422
 * @example `await app.register(async (scope) => { acceptEmptyJsonBody(scope); scope.post(…); });`
 */
export function acceptEmptyJsonBody(scope: FastifyInstance): void {
  scope.removeContentTypeParser(JSON_CONTENT_TYPE);
  scope.addContentTypeParser(JSON_CONTENT_TYPE, { parseAs: "buffer" }, (request, body, done) => {
    try {
      const charset = unacceptableCharset(request.headers["content-type"]);
      if (charset !== undefined) throw new ApiError(Errors.unsupportedCharset, [charset]);
      // trim() also drops a byte order mark, which parseJsonBody ignores.
      const text = decodeJsonBytes(body as Buffer);
      done(null, text.trim() === "" ? undefined : parseJsonBody(text));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}
