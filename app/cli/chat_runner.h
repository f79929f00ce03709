// The CLI's chat path, shared by `generate --chat` (one user turn) and `chat`
// (an interactive conversation): the engine renders each turn with the model's
// own chat template (runtime/chat_request.h), one Engine serves every turn so
// turn n+1 reuses the KV blocks of turn n through the prefix cache.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/model_session.h"
#include "runtime/chat_request.h"

namespace CLI {
class App;
}

namespace gb::cli {

struct ChatOptions {
  std::string system;           // system prompt ("" = none)
  std::string format = "model"; // model | chatml | llama2 | llama3 | plain
  std::string template_path;    // a template file used instead of the model's
  std::string kwargs_json;      // extra template variables, e.g. {"enable_thinking": false}
  bool show_prompt = false;     // print the rendered prompt and its token count to stderr
  bool no_prefix_cache = false; // recompute every turn's prompt (for measuring what the cache saves)
};

// Adds --system, --chat-format, --chat-template, --template-kwargs, --show-prompt.
void add_chat_options(CLI::App& sub, ChatOptions& options);

// One chat prompt: `messages` after --system, rendered by the model's own
// template (or --chat-format / --chat-template, with --template-kwargs) and
// tokenized (runtime/chat_request.h); a fallback warning and, with
// --show-prompt, the prompt go to stderr. `generate --chat` and `compare --chat`
// both build their prompts here.
Result<ChatRequest> render_chat_request(const ChatOptions& options, const ModelSession& session,
                                        std::vector<ChatMessage> messages, const SamplerSettings& settings);

// A messages file: a JSON array of {"role", "content"} objects, or an object
// with such a "messages" array; content is a string or a list of
// {"type": "text", "text": ...} parts (joined).
Result<std::vector<ChatMessage>> read_chat_messages(const std::string& path);

struct TurnResult {
  std::string text;  // generated text (control tokens never appear)
  std::string reason;
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;
  int32_t num_generated = 0;
  double ttft_ms = 0.0;
  double tpot_ms = 0.0;
};

class ChatRunner {
 public:
  static Result<std::unique_ptr<ChatRunner>> create(ModelSession session, const ChatOptions& options,
                                                    int32_t max_context);
  // Runs one assistant turn after `user_text`, streaming text to `on_text`.
  Result<TurnResult> turn(const std::string& user_text, const SamplerSettings& sampling,
                          const std::function<void(const std::string&)>& on_text);
  const ChatFormatter& formatter() const { return formatter_; }
  const std::vector<ChatMessage>& history() const { return history_; }
  const ChatPrompt& last_prompt() const { return last_prompt_; }

 private:
  ChatRunner() = default;
  ModelSession session_;
  std::unique_ptr<Engine> engine_;
  ChatFormatter formatter_;
  ChatRenderOptions render_options_;
  std::vector<ChatMessage> history_;
  ChatPrompt last_prompt_;
  bool show_prompt_ = false;
  bool use_prefix_cache_ = true;
};

}  // namespace gb::cli
