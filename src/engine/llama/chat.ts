import {
  LlamaText,
  resolveChatWrapper,
  SpecialToken,
  SpecialTokensText,
  type ChatHistoryItem,
  type LlamaModel,
} from "node-llama-cpp";
import type { ChatMessage, ChatTemplate } from "../types.js";

/**
 * The model's chat template through node-llama-cpp's chat wrapper for it (resolved from the GGUF
 * metadata). Special tokens become their text; a BOS token is written only when the model asks
 * for one (`tokenizer.ggml.add_bos_token`), which avoids a doubled `<|im_start|>` on ChatML models
 * whose BOS is `<|im_start|>`.
 */
export function chatTemplateOf(model: LlamaModel): ChatTemplate {
  const wrapper = resolveChatWrapper(model);
  const bos = model.tokens.bosString;
  const addBos = model.tokens.shouldPrependBosToken;
  return {
    name: wrapper.wrapperName,
    async render(messages: readonly ChatMessage[]): Promise<string> {
      const chatHistory: ChatHistoryItem[] = messages.map((message) =>
        message.role === "system"
          ? { type: "system", text: message.content }
          : message.role === "user"
            ? { type: "user", text: message.content }
            : { type: "model", response: [message.content] },
      );
      chatHistory.push({ type: "model", response: [] });
      const { contextText } = wrapper.generateContextState({ chatHistory });
      return llamaTextToString(contextText, {
        BOS: addBos ? (bos ?? "") : "",
        EOS: model.tokens.eosString ?? "",
        EOT: model.tokens.eotString ?? "",
        NL: model.tokens.nlString ?? "\n",
      });
    },
  };
}

function llamaTextToString(text: LlamaText, specials: Record<string, string>): string {
  let out = "";
  for (const value of text.values) {
    if (typeof value === "string") out += value;
    else if (value instanceof SpecialTokensText) out += value.value;
    else if (value instanceof SpecialToken) out += specials[value.value] ?? "";
  }
  return out;
}
