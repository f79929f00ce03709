// `glassbox-cli generate`: stream a completion to stdout, or one JSON object per
// token with --json (see docs/trace-format.md for the fields).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "cli/model_session.h"
#include "runtime/generator.h"

namespace gb::cli {
namespace {

struct GenerateArgs {
  ModelOptions model;
  std::string prompt;
  GenerateOptions gen;
  bool json = false;
};

void print_json(const nlohmann::json& j) {
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

int run_generate(const GenerateArgs& a) {
  auto session = open_model_session(a.model);
  if (!session) return fail(session.error().message);
  const std::vector<TokenId> prompt_ids = session->tokenizer->encode(a.prompt, true);
  Generator generator(session->model, session->tokenizer, *session->backend, session->context_length);

  if (a.json) print_json({{"prompt_ids", prompt_ids}, {"prompt", a.prompt}});
  else {
    // Like llama2.c, echo the prompt, then stream the continuation.
    const std::string prompt_text = session->tokenizer->decode(prompt_ids);
    std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
    std::fflush(stdout);
  }
  auto stats = generator.generate(prompt_ids, a.gen, [&](const GeneratedToken& t) {
    if (a.json) {
      nlohmann::json top = nlohmann::json::array();
      for (const LogitCandidate& c : t.top) top.push_back({{"id", c.id}, {"logit", c.logit}, {"logprob", c.logprob}});
      print_json({{"id", t.id}, {"text", t.text}, {"logprob", t.logprob}, {"position", t.position}, {"top", top}});
    } else {
      std::fwrite(t.text.data(), 1, t.text.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  if (!stats) return fail(stats.error().message);
  if (a.json) {
    print_json({{"done", true},
                {"reason", finish_reason_name(stats->reason)},
                {"num_prompt_tokens", stats->num_prompt_tokens},
                {"num_generated", stats->num_generated},
                {"ttft_ms", stats->ttft_ms},
                {"tpot_ms", stats->tpot_ms},
                {"tokens_per_s", stats->tokens_per_s},
                {"trailing_text", stats->trailing_text}});
  } else {
    std::fwrite(stats->trailing_text.data(), 1, stats->trailing_text.size(), stdout);
    std::fputc('\n', stdout);
    std::fprintf(stderr, "\n[%d tokens, ttft %.1f ms, %.1f tok/s, %s]\n", stats->num_generated, stats->ttft_ms,
                 stats->tokens_per_s, finish_reason_name(stats->reason));
  }
  return 0;
}

const CommandRegistrar registrar("generate", "Generate text from a prompt", [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<GenerateArgs>();
  add_model_options(sub, a->model);
  sub.add_option("--prompt,-p", a->prompt, "Prompt text (BOS is added)");
  sub.add_option("--max-tokens,-n", a->gen.max_tokens, "Maximum tokens to generate")->check(CLI::NonNegativeNumber);
  sub.add_option("--temperature", a->gen.temperature, "Sampling temperature (0 = greedy)");
  sub.add_option("--seed", a->gen.seed, "Random seed");
  sub.add_option("--top-n", a->gen.top_n, "Candidates reported per token in --json")->check(CLI::Range(1, 1000));
  sub.add_flag("--json", a->json, "One JSON object per line: prompt_ids, then each token, then a summary");
  return [a] { return run_generate(*a); };
});

}  // namespace
}  // namespace gb::cli
