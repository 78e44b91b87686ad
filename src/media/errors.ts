/**
 * A media input that cannot be used, with where it is in the request body (FastAPI-style `loc`,
 * e.g. `["body", "images", 0]`) and what is wrong. The API answers it with 422.
 */
export class MediaInputError extends Error {
  constructor(
    readonly loc: readonly (string | number)[],
    message: string,
    /** Error type for the 422 body, e.g. `value_error`. */
    readonly type = "value_error",
  ) {
    super(message);
    this.name = "MediaInputError";
  }
}
