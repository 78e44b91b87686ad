import type { LlamaModel } from "node-llama-cpp";
import type { ChatTemplate } from "../types.js";

/**
 * The chat format of Idefics3-family models (SmolVLM): `<|im_start|>User: …<end_of_utterance>\n`
 * … `Assistant:`. Their Jinja template iterates over typed content parts, which node-llama-cpp's
 * Jinja wrapper (plain-string content) cannot render, so it would fall back to ChatML, a format
 * these models were not trained on. Recognised by `<end_of_utterance>` in the GGUF's template.
 * @returns `undefined` for other templates.
 */
export function idefics3TemplateOf(model: LlamaModel): ChatTemplate | undefined {
  const template = (model.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } })
    .tokenizer?.chat_template;
  if (typeof template !== "string" || !template.includes("<end_of_utterance>")) return undefined;
  const role = (r: string) => r.charAt(0).toUpperCase() + r.slice(1);
  return {
    name: "Idefics3",
    render: async (messages) =>
      "<|im_start|>" +
      messages.map((m) => `${role(m.role)}: ${m.content}<end_of_utterance>\n`).join("") +
      "Assistant:",
  };
}
