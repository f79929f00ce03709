#include "speculative/draft_sampling.h"

#include "sampling/sampler_chain.h"

namespace gb {

Result<DraftPick> pick_draft_token(std::span<const float> logits, std::span<const TokenId> history,
                                   SamplerChain* chain, bool greedy, double u) {
  DraftPick pick;
  if (greedy || chain == nullptr) {
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
      if (logits[i] > logits[best]) best = i;
    pick.token = static_cast<TokenId>(best);
    return pick;
  }
  auto q = chain->distribution(logits, history);
  if (!q) return q.error();
  pick.token = pick_from_distribution(*q, u);
  if (pick.token < 0) return make_error("draft: the drafter's distribution is empty");
  pick.q = std::move(*q);
  return pick;
}

}  // namespace gb
