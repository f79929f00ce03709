// `glassbox-cli chat --model M`: an interactive terminal chat. Each line on stdin
// is a user turn; the reply streams to stdout. The prompt is the model's own chat
// template (or --chat-format), rendered by the engine; one engine serves the whole
// conversation, so each turn reuses the KV cache of the previous ones.
// Commands: /prompt shows the last rendered prompt, /exit (or end of input) quits.
// --stats prints each turn's TTFT, prompt and cached token counts to stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "cli/chat_runner.h"
#include "cli/command_registry.h"
#include "cli/sampler_options.h"

namespace gb::cli {
namespace {

struct ChatArgs {
  ModelOptions model;
  SamplerOptions sampler;
  ChatOptions chat;
  int32_t max_tokens = 512;
  bool stats = false;
};

int run_chat(ChatArgs& a) {
  auto settings = finish_sampler_options(a.sampler);
  if (!settings) return fail(settings.error().message);
  settings->max_tokens = a.max_tokens;
  auto session = open_model_session(a.model);
  if (!session) return fail(session.error().message);
  const int32_t context = session->context_length;
  auto runner = ChatRunner::create(std::move(*session), a.chat, context);
  if (!runner) return fail(runner.error().message);
  const bool interactive = isatty(STDIN_FILENO) != 0;
  std::fprintf(stderr, "chat format: %s (/prompt shows the prompt, /exit quits)\n",
               (*runner)->formatter().format_name().c_str());
  std::string line;
  int turn = 0;
  while (true) {
    if (interactive) std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line.empty()) continue;
    if (line == "/prompt") {
      std::fwrite((*runner)->last_prompt().text.data(), 1, (*runner)->last_prompt().text.size(), stdout);
      std::fputc('\n', stdout);
      continue;
    }
    auto result = (*runner)->turn(line, *settings, [](const std::string& text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    if (!result) return fail(result.error().message);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    ++turn;
    if (a.stats)
      std::fprintf(stderr, "[turn %d: %d prompt tokens, %d cached, %d generated, %s; ttft %.2f ms]\n", turn,
                   result->num_prompt_tokens, result->num_cached_tokens, result->num_generated, result->reason.c_str(),
                   result->ttft_ms);
  }
  return 0;
}

const CommandRegistrar chat_command("chat", "Interactive chat with a model's own chat template", [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<ChatArgs>();
  add_model_options(sub, a->model);
  add_chat_options(sub, a->chat);
  add_sampler_options(sub, a->sampler);
  sub.add_option("--max-tokens,-n", a->max_tokens, "Maximum tokens per reply")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub.add_flag("--stats", a->stats, "Print each turn's TTFT and prompt/cached token counts to stderr");
  sub.add_flag("--no-prefix-cache", a->chat.no_prefix_cache, "Recompute each turn's whole prompt (to measure the cache)");
  return [a] { return run_chat(*a); };
});

}  // namespace
}  // namespace gb::cli
