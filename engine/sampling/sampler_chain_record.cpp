// SamplerChain's per-token record: the raw statistics before the chain and the
// top-N candidates' probability after every stage. Kept apart from the sampling
// path (sampler_chain.cpp) because it is optional and only costs when asked for.
//
// Cost: begin_record is O(vocab): the maximum and the softmax sums in one
// vectorised pass each (kernels/cpu/exp_sums.h, AVX2 when the CPU has it; about
// 1 ulp of float per exp, sums in double), one heap-selection pass for the N
// winners that skips 8 losers at a time (CandidateSet::select_best).
// record_stage is O(num_alive) for an active stage (vectorised the same way),
// then O(N) while the set is dense (id i at index i) or one pass through
// slot_of_id_ (vocab_size ints, a token id's row in record.top) otherwise; O(N)
// for an inactive stage. A record reused from token to token allocates nothing.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <tuple>
#include <utility>

#include "cpu/exp_sums.h"
#include "sampling/sampler_chain.h"

namespace gb {

namespace {


// Max logit and log sum exp(logit - max) of the candidates alive now.
std::pair<float, double> softmax_stats(const CandidateSet& set, double* weighted = nullptr) {
  const float* logits = &set.items.data()->logit;
  const int64_t n = static_cast<int64_t>(set.size());
  const float m = kernels::max_strided(logits, n, 2);
  const kernels::ExpSums sums = kernels::exp_sums(logits, n, 2, m);
  if (weighted) *weighted = sums.weighted / sums.z;
  return {m, std::log(sums.z)};
}

}  // namespace

void SamplerChain::begin_record(std::span<const float> logits, TokenRecord& record) {
  const size_t num_stages = settings_.order.size();
  record.stages = settings_.order;
  record.stage_active.assign(num_stages, 0);
  record.num_candidates_after_stage.assign(num_stages, 0);
  record.num_candidates_before = static_cast<int32_t>(set_.size());
  record.grammar.reset();

  // Raw softmax at temperature 1 and its entropy (the set is not empty here):
  //   H = -sum p log p = log Z - sum e_i (l_i - m) / Z,  e_i = exp(l_i - m), Z = sum e_i.
  double mean_shifted = 0.0;
  std::tie(raw_max_, raw_log_z_) = softmax_stats(set_, &mean_shifted);
  record.entropy_before = static_cast<float>(raw_log_z_ - mean_shifted);

  // Top-N by raw logit: one heap pass, best first (no sort of the vocabulary).
  const size_t n = std::min(static_cast<size_t>(settings_.top_n_record), set_.size());
  CandidateSet::select_best(set_.items, n, scratch_);

  if (slot_of_id_.size() != logits.size()) slot_of_id_.assign(logits.size(), -1);
  record.top.resize(n);
  for (size_t k = 0; k < n; ++k) {
    CandidateRecord& cr = record.top[k];
    cr.id = scratch_[k].id;
    cr.logit = scratch_[k].logit;
    cr.prob_before = static_cast<float>(std::exp(static_cast<double>(cr.logit) - raw_max_ - raw_log_z_));
    cr.prob_after_stage.assign(num_stages, 0.0f);
    cr.removed_by_stage = -1;
    slot_of_id_[static_cast<size_t>(cr.id)] = static_cast<int32_t>(k);
  }
}

void SamplerChain::record_stage(size_t stage_index, bool active, TokenRecord& record) {
  record.stage_active[stage_index] = active ? 1 : 0;
  record.num_candidates_after_stage[stage_index] = static_cast<int32_t>(set_.size());
  if (!active) {
    for (CandidateRecord& cr : record.top)
      cr.prob_after_stage[stage_index] = stage_index == 0 ? (cr.removed_by_stage < 0 ? cr.prob_before : 0.0f)
                                                          : cr.prob_after_stage[stage_index - 1];
  } else {
    // Plain copies, not a structured binding: clang 14 (the sanitizer builds)
    // rejects lambdas that capture structured bindings.
    const auto stats = softmax_stats(set_);
    const double m = stats.first, log_z = stats.second;
    for (CandidateRecord& cr : record.top) cr.prob_after_stage[stage_index] = -1.0f;  // "not seen yet"
    const auto prob = [&](const Candidate& c) { return static_cast<float>(std::exp(static_cast<double>(c.logit) - m - log_z)); };
    if (set_.dense) {  // every token alive, id i at index i
      for (CandidateRecord& cr : record.top) cr.prob_after_stage[stage_index] = prob(set_.items[static_cast<size_t>(cr.id)]);
    } else {
      for (const Candidate& c : set_.items) {
        const int32_t slot = slot_of_id_[static_cast<size_t>(c.id)];
        if (slot >= 0) record.top[static_cast<size_t>(slot)].prob_after_stage[stage_index] = prob(c);
      }
    }
    for (CandidateRecord& cr : record.top) {
      if (cr.prob_after_stage[stage_index] >= 0.0f) continue;
      cr.prob_after_stage[stage_index] = 0.0f;
      if (cr.removed_by_stage < 0) cr.removed_by_stage = static_cast<int>(stage_index);
    }
  }
}

float SamplerChain::final_entropy() const {
  // H = -sum p log p over probs_ (set_ in id order). A large survivor set takes
  // the vectorised sums instead of a log per token: H = log Z - sum e_i d_i / Z.
  if (set_.size() > 512) {
    double mean_shifted = 0.0;
    const double log_z = softmax_stats(set_, &mean_shifted).second;
    return static_cast<float>(log_z - mean_shifted);
  }
  double entropy = 0.0;
  for (double p : probs_)
    if (p > 0.0) entropy -= p * std::log(p);
  return static_cast<float>(entropy);
}

int32_t SamplerChain::raw_rank(std::span<const float> logits, TokenId id, const TokenRecord& record) const {
  // record.top is the best N in rank order: a token among them has its index.
  for (size_t k = 0; k < record.top.size(); ++k)
    if (record.top[k].id == id) return static_cast<int32_t>(k);
  // Otherwise count the raw logits ranking before it (shared tie rule; -inf last).
  const Candidate me{id, logits[static_cast<size_t>(id)]};
  int32_t rank = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    rank += CandidateSet::ranks_before({static_cast<TokenId>(i), logits[i]}, me) ? 1 : 0;
  return rank;
}

void SamplerChain::end_record(const TokenRecord& record) {
  for (const CandidateRecord& cr : record.top) slot_of_id_[static_cast<size_t>(cr.id)] = -1;
}

// Raw softmax mass (temperature 1) of the tokens the mask allowed, and how
// many it allowed. When the grammar ran first, the survivors are exactly the
// allowed finite logits: one vectorised log-sum-exp over them (a string
// position allows ~200,000 of Gemma's 262,144 tokens; an exp per set bit cost
// about 1 ms). Otherwise one pass over the mask's set bits.
void SamplerChain::record_grammar(std::span<const float> logits, bool first_stage, TokenRecord& record) const {
  GrammarRecord g;
  const size_t vocab = logits.size();
  double mass = 0.0;
  if (first_stage) {
    for (size_t w = 0; w < grammar_mask_.size(); ++w) {
      uint64_t bits = grammar_mask_[w];
      if (w * 64 + 64 > vocab) bits &= vocab > w * 64 ? (uint64_t{1} << (vocab - w * 64)) - 1 : 0;
      g.num_allowed += std::popcount(bits);
    }
    if (!set_.empty()) {
      const auto [m, log_z] = softmax_stats(set_);
      mass = std::exp(static_cast<double>(m) - raw_max_ + log_z - raw_log_z_);
    }
  } else {
    for (size_t w = 0; w < grammar_mask_.size(); ++w) {
      for (uint64_t bits = grammar_mask_[w]; bits != 0; bits &= bits - 1) {
        const size_t id = w * 64 + static_cast<size_t>(std::countr_zero(bits));
        if (id >= vocab) break;
        ++g.num_allowed;
        if (logits[id] != -INFINITY) mass += std::exp(static_cast<double>(logits[id]) - raw_max_ - raw_log_z_);
      }
    }
  }
  g.mass_allowed = static_cast<float>(std::min(mass, 1.0));
  record.grammar = std::move(g);  // the caller adds the state text and `forced`
}

}  // namespace gb
