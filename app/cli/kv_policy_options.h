// Command-line flags for KV eviction (kv/kv_policy.h, docs/kv-eviction.md):
// --kv-policy full|sink|h2o|snapkv, --kv-budget B, --kv-sinks S,
// --kv-recent R, --kv-window W, --kv-pool K. Shared so the flags mean the same
// in generate, chat and score.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "kv/kv_policy.h"

namespace CLI {
class App;
}

namespace gb::cli {

struct KvPolicyOptions {
  std::string policy = "full";
  int32_t budget = 0;
  int32_t sinks = -1;
  int32_t recent = -1;
  int32_t window = 32;
  int32_t pool = 7;
};

void add_kv_policy_options(CLI::App& sub, KvPolicyOptions& options);
// The policy the flags describe, resolved (defaults filled), or an error
// naming the flag.
Result<KvPolicy> finish_kv_policy_options(const KvPolicyOptions& options);

}  // namespace gb::cli
