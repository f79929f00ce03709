#include "cli/chat_runner.h"

#include <CLI/CLI.hpp>
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

Result<std::unique_ptr<ChatRunner>> ChatRunner::create(ModelSession session, const ChatOptions& o,
                                                       int32_t max_context) {
  std::unique_ptr<ChatRunner> r(new ChatRunner());
  std::string override_text;
  if (!o.template_path.empty()) {
    std::ifstream in(o.template_path, std::ios::binary);
    if (!in) return make_error(o.template_path + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    override_text = ss.str();
  }
  std::optional<BuiltinChatFormat> forced;
  if (o.format != "model") forced = builtin_chat_format_from_name(o.format);
  r->formatter_ = chat_formatter_for(*session.model, *session.tokenizer, forced, override_text);
  if (!r->formatter_.load_warning().empty()) std::fprintf(stderr, "warning: %s\n", r->formatter_.load_warning().c_str());
  if (!o.kwargs_json.empty()) {
    auto extra = json_to_value(o.kwargs_json);
    if (!extra) return make_error("--template-kwargs: " + extra.error().message);
    if (!extra->is_dict()) return make_error("--template-kwargs: expected a JSON object");
    r->render_options_.extra = *extra;
  }
  if (!o.system.empty()) r->history_.push_back(ChatMessage{"system", o.system, {}});
  r->show_prompt_ = o.show_prompt;
  r->use_prefix_cache_ = !o.no_prefix_cache;
  EngineConfig config;
  config.max_seqs = 1;
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
  engine_->set_event_sink([&](const TraceEvent& e) {
    if (const auto* t = std::get_if<TokenSampledEvent>(&e.body)) on_text(t->text);
    else if (const auto* f = std::get_if<RequestFinishedEvent>(&e.body)) finished = *f;
    else if (const auto* err = std::get_if<ErrorEvent>(&e.body)) error = err->message;
  });
  auto id = engine_->submit(std::move(chat.request));
  if (!id) {
    history_.pop_back();
    return id.error();
  }
  while (engine_->has_work()) {
    auto stepped = engine_->step();
    if (!stepped) return stepped.error();
    (void)engine_->drain_events();
  }
  if (!error.empty()) return make_error(error);
  if (!finished) return make_error("the request ended without a result");
  history_.push_back(assistant_history_message(finished->text));
  return TurnResult{finished->text,          finished->reason,  finished->num_prompt_tokens,
                    finished->num_cached_tokens, finished->num_generated, finished->ttft_ms, finished->tpot_ms};
}

}  // namespace gb::cli
