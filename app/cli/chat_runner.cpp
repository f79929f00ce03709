#include "cli/chat_runner.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "template/chat_template.h"

namespace gb::cli {

void add_chat_options(CLI::App& sub, ChatOptions& o) {
  sub.add_option("--system", o.system, "System prompt");
  sub.add_option("--chat-format", o.format,
                 "Prompt format: model (the file's own chat template, default), chatml, llama2, llama3, plain")
      ->check(CLI::IsMember({"model", "chatml", "llama2", "llama3", "plain"}));
  sub.add_option("--chat-template", o.template_path, "A Jinja chat template file to use instead of the model's");
  sub.add_option("--template-kwargs", o.kwargs_json, "Extra template variables as JSON, e.g. '{\"enable_thinking\": false}'");
  sub.add_flag("--show-prompt", o.show_prompt, "Print each rendered prompt and its token count to stderr");
}

namespace {

Result<std::string> read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The formatter and render options the chat options ask for.
Result<std::pair<ChatFormatter, ChatRenderOptions>> chat_setup(const ChatOptions& o, const ModelSession& session) {
  std::optional<BuiltinChatFormat> forced;
  if (o.format != "model") forced = builtin_chat_format_from_name(o.format);
  std::string override_text;
  if (!o.template_path.empty()) {
    auto text = read_file_text(o.template_path);
    if (!text) return text.error();
    override_text = std::move(*text);
  }
  ChatRenderOptions options;
  if (!o.kwargs_json.empty()) {
    auto extra = json_to_value(o.kwargs_json);
    if (!extra) return make_error("--template-kwargs: " + extra.error().message);
    if (!extra->is_dict()) return make_error("--template-kwargs: expected a JSON object");
    options.extra = *extra;
  }
  return std::make_pair(chat_formatter_for(*session.model, *session.tokenizer, forced, override_text), std::move(options));
}

}  // namespace

Result<ChatRequest> render_chat_request(const ChatOptions& o, const ModelSession& session,
                                        std::vector<ChatMessage> messages, const SamplerSettings& settings) {
  auto setup = chat_setup(o, session);
  if (!setup) return setup.error();
  if (!o.system.empty()) messages.insert(messages.begin(), ChatMessage{"system", o.system, {}});
  ChatRequest chat = make_chat_request(setup->first, *session.tokenizer, messages, settings, setup->second);
  if (!chat.prompt.warning.empty()) std::fprintf(stderr, "warning: %s\n", chat.prompt.warning.c_str());
  if (o.show_prompt)
    std::fprintf(stderr, "--- prompt (%s format, %zu tokens) ---\n%s\n---\n", chat.prompt.format.c_str(),
                 chat.request.prompt_ids.size(), chat.prompt.text.c_str());
  return chat;
}

Result<std::vector<ChatMessage>> read_chat_messages(const std::string& path) {
  auto text = read_file_text(path);
  if (!text) return text.error();
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return make_error(path + ": not valid JSON");
  const nlohmann::json& list = j.is_object() && j.contains("messages") ? j["messages"] : j;
  if (!list.is_array() || list.empty()) return make_error(path + ": expected a non-empty array of messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& m = list[i];
    const std::string where = path + ": messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) return make_error(where + ": needs a \"role\" string");
    ChatMessage msg{m["role"].get<std::string>(), {}, {}};
    const nlohmann::json content = m.value("content", nlohmann::json(""));
    if (content.is_string()) {
      msg.content = content.get<std::string>();
    } else if (content.is_array()) {
      for (const nlohmann::json& part : content)
        if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string())
          msg.content += part["text"].get<std::string>();
    } else if (!content.is_null()) {
      return make_error(where + ": \"content\" must be a string or a list of text parts");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

Result<std::unique_ptr<ChatRunner>> ChatRunner::create(ModelSession session, const ChatOptions& o,
                                                       int32_t max_context) {
  std::unique_ptr<ChatRunner> r(new ChatRunner());
  auto setup = chat_setup(o, session);
  if (!setup) return setup.error();
  r->formatter_ = std::move(setup->first);
  r->render_options_ = std::move(setup->second);
  if (!r->formatter_.load_warning().empty()) std::fprintf(stderr, "warning: %s\n", r->formatter_.load_warning().c_str());
  if (!o.system.empty()) r->history_.push_back(ChatMessage{"system", o.system, {}});
  r->show_prompt_ = o.show_prompt;
  r->use_prefix_cache_ = !o.no_prefix_cache;
  EngineConfig config;
  config.max_seqs = 1;
  apply_session(session, config);
  config.max_context = max_context;
  config.record_tokens = true;
  r->session_ = std::move(session);
  r->engine_ = std::make_unique<Engine>(r->session_.model, r->session_.tokenizer, std::move(r->session_.backend), config);
  if (Status st = r->engine_->start(); !st) return st.error();
  return r;
}

Result<TurnResult> ChatRunner::turn(const std::string& user_text, const SamplerSettings& sampling,
                                    const std::function<void(const std::string&)>& on_text) {
  history_.push_back(ChatMessage{"user", user_text, {}});
  ChatRequest chat = make_chat_request(formatter_, *session_.tokenizer, history_, sampling, render_options_);
  last_prompt_ = chat.prompt;
  chat.request.use_prefix_cache = use_prefix_cache_;
  if (!chat.prompt.warning.empty()) std::fprintf(stderr, "warning: %s\n", chat.prompt.warning.c_str());
  if (show_prompt_)
    std::fprintf(stderr, "--- prompt (%s format, %zu tokens of %d) ---\n%s\n---\n", chat.prompt.format.c_str(),
                 chat.request.prompt_ids.size(), engine_->max_context(), chat.prompt.text.c_str());
  std::optional<RequestFinishedEvent> finished;
  std::string error;
  const auto on_event = [&](const TraceEvent& e) {
    if (const auto* t = std::get_if<TokenSampledEvent>(&e.body)) on_text(t->text);
    else if (const auto* f = std::get_if<RequestFinishedEvent>(&e.body)) finished = *f;
    else if (const auto* err = std::get_if<ErrorEvent>(&e.body)) error = err->message;
  };
  auto id = engine_->submit(std::move(chat.request));
  if (!id) {
    (void)engine_->drain_events();  // the rejection's ErrorEvent: the error is returned instead
    history_.pop_back();
    return id.error();
  }
  while (engine_->has_work()) {
    auto stepped = engine_->step();
    if (!stepped) return stepped.error();
    for (const TraceEvent& e : engine_->drain_events()) on_event(e);
  }
  if (!error.empty()) return make_error(error);
  if (!finished) return make_error("the request ended without a result");
  history_.push_back(assistant_history_message(finished->text));
  return TurnResult{finished->text,          finished->reason,  finished->num_prompt_tokens,
                    finished->num_cached_tokens, finished->num_generated, finished->ttft_ms, finished->tpot_ms};
}

}  // namespace gb::cli
