// A chat turn as an engine request: the conversation rendered by the model's own
// chat template (or a built-in format, see template/chat_prompt.h), tokenized
// with control tokens recognised outside the message contents, stopping on every
// end-of-generation token of the vocabulary, and with the template's hash in the
// prefix-cache isolation key (KV computed under one template is never reused
// under another). The CLI (`generate --chat`, `chat`) and the workbench both build
// their requests here. Threads: pure functions of their arguments.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "template/chat_prompt.h"

namespace gb {

struct Model;

struct ChatRequest {
  ChatPrompt prompt;          // rendered text, format used, warning if it fell back
  GenerationRequest request;  // prompt_ids, stop ids, isolation key filled in
};

// The formatter for a model: its tokenizer.chat_template unless `forced` names a
// built-in format or `template_override` gives other template text; bos_token and
// eos_token are the tokenizer's own pieces.
ChatFormatter chat_formatter_for(const Model& model, const Tokenizer& tokenizer,
                                 std::optional<BuiltinChatFormat> forced = std::nullopt,
                                 const std::string& template_override = {});

ChatRequest make_chat_request(const ChatFormatter& formatter, const Tokenizer& tokenizer,
                              const std::vector<ChatMessage>& messages, const SamplerSettings& sampling,
                              const ChatRenderOptions& options = {});

// Whether the rendered prompt ends inside a thinking region (the template opened
// "<think>" in the generation prompt): the reasoning budget then counts from the
// first generated token.
bool prompt_opens_reasoning(const ChatPrompt& prompt, const ReasoningBudgetSettings& markers);

// The history entry for a finished assistant turn: the answer without its
// <think> block (templates that keep reasoning get it as reasoning_content).
ChatMessage assistant_history_message(const std::string& generated_text);

}  // namespace gb
