#include "cli/remote_generate.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "cli/token_json.h"
#include "client/remote_client.h"

namespace gb::cli {

namespace {
nlohmann::json token_line(const server::RemoteToken& t) {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& [token, logprob] : t.top) top.push_back({{"token", token}, {"logprob", logprob}});
  return {{"text", t.text}, {"token", t.token},
          {"logprob", std::isnan(t.logprob) ? nlohmann::json(nullptr) : nlohmann::json(t.logprob)},
          {"top_logprobs", top}, {"t_ms", t.t_ms}};
}
}  // namespace

int run_remote_generate(const RemoteGenerateArgs& a, const SamplerSettings& settings) {
  server::RemoteOptions options;
  options.url = a.url;
  options.api_key = a.api_key;
  options.model = a.model;
  auto client = server::RemoteClient::connect(options);
  if (!client) return fail(client.error().message);
  if (a.json) print_json_line({{"prompt", a.prompt}, {"remote", a.url}, {"model", (*client)->model()}});
  else if (!a.no_echo) std::fputs(a.prompt.c_str(), stdout);
  auto result = (*client)->complete(a.prompt, settings, a.max_tokens, [&](const server::RemoteToken& t) {
    if (a.json) print_json_line(token_line(t));
    else {
      std::fwrite(t.text.data(), 1, t.text.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  if (!result) return fail(result.error().message);
  const double tokens_per_s = result->tpot_ms > 0 ? 1000.0 / result->tpot_ms : 0.0;
  if (a.json) {
    print_json_line({{"done", true}, {"reason", result->finish_reason}, {"num_prompt_tokens", result->num_prompt_tokens},
                {"num_generated", result->num_generated}, {"num_cached_tokens", result->num_cached_tokens},
                {"ttft_ms", result->ttft_ms}, {"tpot_ms", result->tpot_ms}, {"tokens_per_s", tokens_per_s},
                {"text", result->text}});
  } else {
    std::fputc('\n', stdout);
    std::fprintf(stderr, "[%d tokens, %s; client ttft %.1f ms, %.1f tok/s; remote %s]\n", result->num_generated,
                 result->finish_reason.c_str(), result->ttft_ms, tokens_per_s, a.url.c_str());
  }
  return 0;
}

}  // namespace gb::cli
