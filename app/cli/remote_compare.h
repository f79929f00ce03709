// `glassbox-cli score --remote URL` and `compare --remote URL`: the Score and
// Compare tools against another OpenAI-compatible server
// (server/remote_client.h), as far as its API allows.
//   score:   POST /v1/completions {echo: true, logprobs: N, max_tokens: 0} gives
//            each prompt token's log-probability and top-N alternatives (vLLM
//            and Glassbox answer it; llama-server refuses echo, and the error
//            says so). Entropy and KL need the whole distribution: not available.
//   compare: each lane is one request with n = samples, the lane's sampler
//            fields and one seed (Glassbox and vLLM give choice j seed + j); a
//            server without n gets one request per sample, seed + j. Statistics
//            come from the token strings and their logprobs; entropies, token
//            ids and shared prompt blocks are not available.
#pragma once

#include <string>
#include <vector>

#include "runtime/comparison.h"

namespace gb::cli {

struct RemoteTarget {
  std::string url;
  std::string api_key;
  std::string model;  // "" -> the server's first model
};

int run_remote_score(const RemoteTarget& target, const std::string& text, const std::string& text_file, int top_n,
                     bool json);
int run_remote_compare(const RemoteTarget& target, const std::string& prompt, const ComparisonSpec& spec, bool json);

}  // namespace gb::cli
