// NgramProposer: prompt lookup decoding. Finds the most recent earlier place
// where the last n tokens (n = max_n, then max_n - 1, ... 1) occurred in the
// prompt or the output so far, and proposes the up-to-k tokens that followed
// it. Deterministic, so q is one-hot. Costs O(length x n) per proposal and no
// forward pass; it pays off on text that repeats (code edits, quoting,
// summaries of the prompt) and proposes nothing when there is no match.
//
// Thread: engine thread only.
#pragma once

#include "speculative/draft_proposer.h"

namespace gb {

class NgramProposer final : public DraftProposer {
 public:
  explicit NgramProposer(int32_t max_n) : max_n_(max_n) {}
  std::string_view name() const override { return "ngram"; }
  Result<Draft> propose(const DraftInput& input) override;

  // The lookup on its own (tests): continuation of the longest suffix match.
  static std::vector<TokenId> lookup(std::span<const TokenId> tokens, int32_t max_n, int32_t k);

 private:
  int32_t max_n_;
};

}  // namespace gb
