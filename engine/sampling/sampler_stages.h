// The stage functions a SamplerChain runs over a CandidateSet. Each one is a pure
// transformation of the set given its parameters (and, for XTC, a decision the
// chain made from the request's random stream). Probabilities a stage looks at
// are the softmax of the CURRENT logits of the surviving candidates, so a stage
// sees the effect of every stage before it (temperature included, if earlier).
//
// Keep-set rules (tested exactly in tests/engine/sampling/test_keep_sets.cpp):
//   top_k:     the k first candidates under CandidateSet::ranks_before
//              (logit descending, ties -> lower id first). k = 0 or k >= n: no-op.
//   top_p:     the shortest prefix of that ranking whose cumulative probability
//              is >= top_p (the token that crosses top_p is kept). top_p = 1: no-op.
//   min_p:     every token with p >= min_p * p_max, evaluated as
//              logit - max >= ln(min_p) in double. Ties are all kept. min_p = 0: no-op.
//   typical_p: Meister et al., "Locally Typical Sampling" (TACL 2023): rank tokens
//              by |-log p - H| ascending (H = entropy; ties -> lower id first) and
//              keep the shortest prefix with cumulative probability >= typical_p.
// None of these ever empties the set (each keeps at least the first ranked token).
// Sorting cost: top-p and typical-p sort only a growing prefix (64, then x4) via
// partial_sort until the mass is reached, never the whole vocabulary unless needed.
// Threads: pure functions over caller-owned data.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "core/ids.h"
#include "core/result.h"
#include "sampling/candidate_set.h"
#include "sampling/sampler_settings.h"

namespace gb {

// Repetition (CTRL, Keskar et al. 2019: logit / p when logit > 0, logit * p
// otherwise), then frequency and presence (OpenAI's definition:
// logit -= frequency * count + presence * [count > 0]) over the last
// penalty_last_n tokens of `history`. History ids are checked by the chain.
void apply_penalties(CandidateSet& set, std::span<const TokenId> history, const SamplerSettings& settings);

// DRY (see DrySettings for the definition and its source). Returns the
// (token, match length) pairs it penalized, for the record and tests.
std::vector<std::pair<TokenId, int>> apply_dry(CandidateSet& set, std::span<const TokenId> history,
                                               const DrySettings& dry);

// Adds each bias (duplicates add up); tokens whose logit becomes -inf are removed.
void apply_logit_bias(CandidateSet& set, std::span<const std::pair<TokenId, float>> bias);

void apply_top_k(CandidateSet& set, int top_k);
void apply_top_p(CandidateSet& set, float top_p);
void apply_min_p(CandidateSet& set, float min_p);
void apply_typical_p(CandidateSet& set, float typical_p);

// XTC with the chain's decision already made (`fire` = uniform < probability).
// Tie rule among the above-threshold tokens: the one ranked last by
// ranks_before (lowest logit, then highest id) is the survivor.
void apply_xtc(CandidateSet& set, const XtcSettings& xtc, bool fire);

// T > 0 divides logits by T (shifting by the max first when dividing would
// overflow a float, which leaves probabilities unchanged); T = 0 keeps only the
// first-ranked candidate (greedy).
void apply_temperature(CandidateSet& set, float temperature);

// Grammar: keeps the candidates whose bit is set in `mask` (bit t of word t / 64;
// ids beyond the mask are removed). Order of the survivors is kept.
void apply_token_mask(CandidateSet& set, std::span<const uint64_t> mask);

}  // namespace gb
