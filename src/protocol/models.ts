/**
 * Public model names: what clients send in `model` and read back in responses.
 */

/**
 * The name the catalogue's default model is served under, and the model clients ask for when
 * they name none.
 */
export const PUBLIC_MODEL_NAME = "decisiond-1.0-experimental";

/**
 * The model name the official System One clients send by default; every served model accepts it
 * without listing it, and answers under its own first name.
 */
export const CLIENT_DEFAULT_ALIAS = "jev-latest";
