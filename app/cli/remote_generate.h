// `glassbox-cli generate --remote URL`: one completion from another
// OpenAI-compatible server (server/remote_client.h) instead of a local model.
// Prints text like generate, or with --json one line per token -- its text, the
// token string, logprob and top alternatives as the server reported them, and
// the client-side time -- then a summary line. Token ids and sampler stages
// are not available over the API and are not printed.
#pragma once

#include <string>

#include "sampling/sampler_settings.h"

namespace gb::cli {

struct RemoteGenerateArgs {
  std::string url;
  std::string api_key;
  std::string model;  // "" -> the server's first model
  std::string prompt;
  int32_t max_tokens = 256;
  bool json = false;
  bool no_echo = false;
};

int run_remote_generate(const RemoteGenerateArgs& args, const SamplerSettings& settings);

}  // namespace gb::cli
