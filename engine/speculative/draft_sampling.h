// Picking one drafted token from a drafter model's logits, the same way for
// every model-based drafter (draft model, self-draft):
//   greedy  -> argmax (lowest id on ties), q one-hot (empty row);
//   sampled -> q = the request's sampler chain applied to the draft logits with
//              the history so far (drafted tokens included, so penalties see
//              them), token = pick_from_distribution(q, u).
// The verifier is exact for any q as long as the token was drawn from it.
//
// Free function; engine thread (the chain has scratch buffers).
#pragma once

#include <span>
#include <vector>

#include "core/ids.h"
#include "core/result.h"

namespace gb {

class SamplerChain;

struct DraftPick {
  TokenId token = -1;
  std::vector<double> q;  // (vocab) or empty when one-hot
};

Result<DraftPick> pick_draft_token(std::span<const float> logits, std::span<const TokenId> history,
                                   SamplerChain* chain, bool greedy, double u);

}  // namespace gb
