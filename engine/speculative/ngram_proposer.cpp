#include "speculative/ngram_proposer.h"

#include <algorithm>

namespace gb {

std::vector<TokenId> NgramProposer::lookup(std::span<const TokenId> tokens, int32_t max_n, int32_t k) {
  const auto len = static_cast<int32_t>(tokens.size());
  for (int32_t n = std::min(max_n, len - 1); n >= 1; --n) {
    const std::span<const TokenId> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Latest match first: recent text predicts the continuation best. The match
    // must end before the suffix itself starts so something follows it.
    for (int32_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int32_t from = start + n;
      const int32_t take = std::min(k, len - from);
      return std::vector<TokenId>(tokens.begin() + from, tokens.begin() + from + take);
    }
  }
  return {};
}

Result<Draft> NgramProposer::propose(const DraftInput& input) {
  Draft d;
  d.tokens = lookup(input.tokens, max_n_, input.k);
  d.q.assign(d.tokens.size(), {});  // deterministic: one-hot q
  return d;
}

}  // namespace gb
