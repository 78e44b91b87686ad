// Why here, where engines and the API both may import it: docs/decisions/089
/**
 * Thrown by an engine that takes its prompt as text (the vision engine, the vLLM engine) when
 * request text would not reach the model as the planned tokens, e.g. a state containing the text
 * of a control token such as `<|im_end|>`, which that engine's tokenizer would read as the control
 * token. The API answers it as a validation error of the state or of the questions.
 */
export class PromptTextError extends Error {
  constructor(
    /** The part of the request the text came from. */
    readonly part: "prefix" | "branch",
    /** The offending text, shortened. */
    readonly text: string,
  ) {
    super(
      `the ${part === "prefix" ? "state" : "question"} contains text the model would read as ` +
        `control tokens (${JSON.stringify(text)}); remove it or use a text-only model`,
    );
    this.name = "PromptTextError";
  }
}
