// SamplerChain's per-token record: the raw statistics before the chain and the
// top-N candidates' probability after every stage. Kept apart from the sampling
// path (sampler_chain.cpp) because it is optional and only costs when asked for.
//
// Cost: begin_record is O(vocab) (one exp per candidate, one heap-selection pass
// for the N winners); record_stage is O(num_alive) for an active
// stage and O(N) for an inactive one. slot_of_id_ (vocab_size ints) maps a token
// id to its row in record.top so a stage column is filled in one pass.
#include <algorithm>
#include <cmath>

#include "sampling/sampler_chain.h"

namespace gb {

void SamplerChain::begin_record(std::span<const float> logits, TokenRecord& record) {
  const size_t num_stages = settings_.order.size();
  record.stages = settings_.order;
  record.stage_active.assign(num_stages, 0);
  record.num_candidates_after_stage.assign(num_stages, 0);
  record.num_candidates_before = static_cast<int32_t>(set_.size());

  // Raw softmax at temperature 1 and its entropy:
  //   H = -sum p log p = log Z - sum e_i (l_i - m) / Z,  e_i = exp(l_i - m), Z = sum e_i.
  raw_max_ = set_.max_logit();
  double z = 0.0, weighted = 0.0;
  for (const Candidate& c : set_.items) {
    const float shifted = c.logit - raw_max_;
    const double e = std::exp(shifted);  // float exp: this pass touches the whole vocabulary
    z += e;
    weighted += e * shifted;
  }
  raw_log_z_ = std::log(z);
  record.entropy_before = static_cast<float>(raw_log_z_ - weighted / z);

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
    const float m = set_.max_logit();
    const double log_z = set_.log_sum_exp(m);
    for (CandidateRecord& cr : record.top) cr.prob_after_stage[stage_index] = -1.0f;  // "not seen yet"
    for (const Candidate& c : set_.items) {
      const int32_t slot = slot_of_id_[static_cast<size_t>(c.id)];
      if (slot >= 0)
        record.top[static_cast<size_t>(slot)].prob_after_stage[stage_index] =
            static_cast<float>(std::exp(static_cast<double>(c.logit) - m - log_z));
    }
    for (CandidateRecord& cr : record.top) {
      if (cr.prob_after_stage[stage_index] >= 0.0f) continue;
      cr.prob_after_stage[stage_index] = 0.0f;
      if (cr.removed_by_stage < 0) cr.removed_by_stage = static_cast<int>(stage_index);
    }
  }
}

void SamplerChain::end_record(const TokenRecord& record) {
  for (const CandidateRecord& cr : record.top) slot_of_id_[static_cast<size_t>(cr.id)] = -1;
}

}  // namespace gb
