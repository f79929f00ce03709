#include "runtime/chat_request.h"

#include <algorithm>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace gb {

ChatFormatter chat_formatter_for(const Model& model, const Tokenizer& tokenizer,
                                 std::optional<BuiltinChatFormat> forced, const std::string& template_override) {
  const std::string bos = tokenizer.bos_id() >= 0 ? tokenizer.token_piece(tokenizer.bos_id()) : std::string();
  const std::string eos = tokenizer.eos_id() >= 0 ? tokenizer.token_piece(tokenizer.eos_id()) : std::string();
  const std::string& text = template_override.empty() ? model.chat_template : template_override;
  return ChatFormatter::create(text, bos, eos, forced);
}

ChatRequest make_chat_request(const ChatFormatter& formatter, const Tokenizer& tokenizer,
                              const std::vector<ChatMessage>& messages, const SamplerSettings& sampling,
                              const ChatRenderOptions& options) {
  ChatRequest out;
  out.prompt = formatter.render(messages, options);
  out.request.prompt_ids = tokenize_chat_prompt(tokenizer, out.prompt);
  out.request.sampling = sampling;
  for (TokenId id : end_of_generation_ids(tokenizer)) {
    auto& stops = out.request.sampling.stop_token_ids;
    if (std::find(stops.begin(), stops.end(), id) == stops.end()) stops.push_back(id);
  }
  out.request.isolation.template_version = out.prompt.template_hash;
  out.request.sampling.reasoning.starts_inside = prompt_opens_reasoning(out.prompt, sampling.reasoning);
  return out;
}

bool prompt_opens_reasoning(const ChatPrompt& prompt, const ReasoningBudgetSettings& markers) {
  if (markers.open_marker.empty() || markers.close_marker.empty()) return false;
  // Only the template's own text after the last message counts: a "<think>" the
  // user typed does not open anything.
  const size_t tail = prompt.content_spans.empty() ? 0 : prompt.content_spans.back().second;
  const std::string_view text = std::string_view(prompt.text).substr(std::min(tail, prompt.text.size()));
  const size_t open = text.rfind(markers.open_marker);
  if (open == std::string_view::npos) return false;
  const size_t close = text.rfind(markers.close_marker);
  return close == std::string_view::npos || close < open;
}

ChatMessage assistant_history_message(const std::string& generated_text) {
  const ReasoningSplit split = split_reasoning(generated_text);
  ChatMessage m;
  m.role = "assistant";
  m.content = split.answer;
  m.reasoning = split.reasoning;
  return m;
}

}  // namespace gb
