// Chat formatting in the engine: a conversation -> prompt text -> token ids, the
// same for the CLI (`generate --chat`, `chat`) and the workbench.
//
//   ChatFormatter   the model's own chat template (tokenizer.chat_template) by
//                   default; a built-in format (ChatML, Llama-2, Llama-3, plain) for
//                   files without one, when forced, or as the fallback when the
//                   model's template fails to parse or raises (with a warning that
//                   names the error, its line and column).
//   tokenize_chat_prompt   control tokens spelled by the template (<|im_start|>,
//                   <|eot_id|>, <s>, ...) become their ids; inside message
//                   contents (what the user typed) they stay plain text.
//   end_of_generation_ids   every token that ends a turn (EOS, <|eot_id|>,
//                   <|im_end|>, <|end|>, <end_of_turn>, ...), for stop_token_ids.
//   split_reasoning  <think>...</think> apart from the answer.
// Threads: a ChatFormatter is immutable after create(); any thread may render.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/ids.h"
#include "template/chat_template.h"

namespace gb {

class Tokenizer;

enum class BuiltinChatFormat { Plain, ChatMl, Llama2, Llama3 };

std::string_view builtin_chat_format_name(BuiltinChatFormat format);
std::optional<BuiltinChatFormat> builtin_chat_format_from_name(std::string_view name);
// The built-in format a template's text spells out (ChatML markers, Llama-3
// headers, [INST]); Plain when it names none.
BuiltinChatFormat detect_builtin_chat_format(std::string_view chat_template);
// The Jinja source of a built-in format (rendered by the same interpreter).
std::string_view builtin_chat_format_source(BuiltinChatFormat format);

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant" | "tool"
  std::string content;
  std::string reasoning;  // the assistant's <think> text, passed as reasoning_content when non-empty
  // More fields of the message as the template sees it (a Dict, or undefined):
  // an assistant's tool_calls, a tool answer's tool_call_id and name (the server).
  jinja::Value fields;
};

struct ChatPrompt {
  std::string text;            // the rendered prompt
  std::string format;          // "model" or a built-in format's name
  std::string template_hash;   // SHA-256 of the template text used (isolation key)
  std::string warning;         // why the model's template was not used, if it was not
  // Byte ranges of `text` that hold message contents verbatim (user-typed text):
  // control-token spellings inside them are not parsed.
  std::vector<std::pair<size_t, size_t>> content_spans;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // Extra template variables (enable_thinking, tools ...): a Dict, or undefined.
  jinja::Value extra;
  std::optional<std::tm> now;
};

class ChatFormatter {
 public:
  // `model_template` is the file's tokenizer.chat_template ("" if none);
  // `forced` picks a built-in format instead of it. bos/eos are the token texts
  // the template sees as bos_token / eos_token.
  static ChatFormatter create(const std::string& model_template, std::string bos_token, std::string eos_token,
                              std::optional<BuiltinChatFormat> forced = std::nullopt);

  ChatPrompt render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options = {}) const;

  // "model" when the model's template is in use, else the built-in format's name.
  std::string format_name() const;
  bool uses_model_template() const { return model_ != nullptr; }
  BuiltinChatFormat fallback() const { return fallback_; }
  // Set when the model's template did not compile (syntax error with position).
  const std::string& load_warning() const { return load_warning_; }

 private:
  std::shared_ptr<const ChatTemplate> model_;     // null: built-in only
  std::shared_ptr<const ChatTemplate> builtin_;   // always compiled
  BuiltinChatFormat fallback_ = BuiltinChatFormat::Plain;
  std::string bos_token_, eos_token_;
  std::string load_warning_;
};

// Prompt text -> ids: control and user-defined tokens of the vocabulary are
// matched whole outside `content_spans`; the text between them is encoded
// normally. No BOS is added: templates spell theirs (as transformers'
// apply_chat_template(tokenize=True) does).
std::vector<TokenId> tokenize_chat_prompt(const Tokenizer& tokenizer, const ChatPrompt& prompt);

// Ids whose sampling ends the assistant's turn.
std::vector<TokenId> end_of_generation_ids(const Tokenizer& tokenizer);

struct ReasoningSplit {
  std::string reasoning;  // text inside <think>...</think> (trimmed of the markers)
  std::string answer;     // the rest: what goes back into the history
  bool open = false;      // <think> started but not closed yet (still reasoning)
};
// Splits generated text at the model's reasoning markers (<think> / </think>); a
// closing marker without an opening one (templates that put <think> in the
// prompt) counts everything before it as reasoning.
ReasoningSplit split_reasoning(std::string_view text, std::string_view open_marker = "<think>",
                               std::string_view close_marker = "</think>");

}  // namespace gb
