// The Compare tool's JSON (docs/compare.md) for lanes run on a remote server
// (one streamed request per sample, seed + j), in the shape the workbench's
// Compare view reads: per lane its name, settings, samples (text, stop reason,
// seed, length, mean logprob, distinct-1/2, repetition rate, first divergence
// from lane A's same sample) and a summary. Statistics come from the token
// strings and the server's logprobs; what needs the full distribution or the
// engine (entropies, token ids, common random numbers, shared prompt blocks) is
// null and listed under "not_available".
// Threads: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sampling/sampler_settings.h"
#include "client/remote_client.h"

namespace gb::server {

struct RemoteLaneSample {
  uint64_t seed = 0;
  std::string text;
  std::string finish_reason;
  std::vector<RemoteToken> tokens;  // as streamed
  double e2e_ms = 0.0;              // client side
};

struct RemoteLane {
  std::string name;
  SamplerSettings settings;
  std::vector<RemoteLaneSample> samples;
};

struct RemoteComparisonInfo {
  std::string url, model, prompt;
  uint64_t seed = 0;
  int max_tokens = 0;
  double wall_ms = 0.0;
};

std::string remote_comparison_to_json(const std::vector<RemoteLane>& lanes, const RemoteComparisonInfo& info);

}  // namespace gb::server
