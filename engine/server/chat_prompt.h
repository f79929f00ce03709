// How the server turns chat messages into prompt text. The one place to swap in
// the model's own Jinja chat template once the engine renders templates; until
// then the workbench's built-in formats (ChatML, Llama-2 [INST], Llama-3 headers,
// plain), picked from the markers the model's tokenizer.chat_template spells out.
// BOS is added by the caller when it encodes the text.
// Threads: pure functions.
#pragma once

#include <string>
#include <vector>

#include "model/model.h"
#include "server/openai_request.h"

namespace gb::server {

enum class ChatPromptFormat { Plain, ChatMl, Llama2, Llama3 };

const char* chat_prompt_format_name(ChatPromptFormat format);
// Recognises the format a Jinja template spells out; Plain when it names none.
ChatPromptFormat detect_chat_prompt_format(const std::string& chat_template);
// The prompt for `messages`, ending where the assistant's next reply starts.
std::string render_chat_prompt(ChatPromptFormat format, const std::vector<ChatMessage>& messages);

// The server's entry point: the prompt text for `messages` under `model`'s format.
std::string chat_prompt_for_model(const Model& model, const std::vector<ChatMessage>& messages);

}  // namespace gb::server
