// Helpers the sliding-window tests of this folder share (sliding_window_test,
// window_group_test): random workloads of requests over a fake windowed model.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kv/request.h"

namespace gbtest::window {

using gb::RequestId;
using gb::TokenId;

inline constexpr uint64_t kSeed = 0x51ed;

inline bool is_stop(TokenId t) { return t % 97 == 13; }  // ~1% of tokens end a request

inline std::vector<TokenId> random_tokens(std::mt19937_64& rng, int32_t n) {
  std::vector<TokenId> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(std::uniform_int_distribution<TokenId>(0, 999)(rng));
  return v;
}

inline int32_t uniform(std::mt19937_64& rng, int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); }

inline gb::RequestSpec make_spec(uint64_t id, std::vector<TokenId> prompt, int32_t max_tokens, bool prefix_cache) {
  gb::RequestSpec s;
  s.id = RequestId{id};
  s.prompt_ids = std::move(prompt);
  s.max_tokens = max_tokens;
  s.isolation = {"fake", "v1", "", ""};
  s.use_prefix_cache = prefix_cache;
  return s;
}

// The most blocks a table may hold between steps: positions c - W + 1 .. c - 1
// (W - 1 of them, anywhere in a block) = ceil((W - 1 + block_size - 1) / block_size).
inline int32_t live_block_bound(int32_t window, int32_t block_size) { return (window + 2 * block_size - 3) / block_size; }

}  // namespace gbtest::window
