// SamplerChain: stage dispatch, input checks, the per-token record and the
// picker. See sampler_chain.h for the contract.
#include "sampling/sampler_chain.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "cpu/exp_sums.h"
#include "sampling/sampler_stages.h"

namespace gb {
namespace {

bool stage_is_active(SamplerStage stage, const SamplerSettings& s, bool xtc_fired, bool has_mask) {
  switch (stage) {
    case SamplerStage::Penalties:
      return s.penalty_last_n != 0 &&
             (s.repeat_penalty != 1.0f || s.presence_penalty != 0.0f || s.frequency_penalty != 0.0f);
    case SamplerStage::Dry: return s.dry.multiplier > 0.0f && s.dry.penalty_last_n != 0;
    case SamplerStage::LogitBias: return !s.logit_bias.empty();
    case SamplerStage::TopK: return s.top_k > 0;
    case SamplerStage::TypicalP: return s.typical_p < 1.0f;
    case SamplerStage::TopP: return s.top_p < 1.0f;
    case SamplerStage::MinP: return s.min_p > 0.0f;
    case SamplerStage::Xtc: return s.xtc.probability > 0.0f && xtc_fired;
    case SamplerStage::Temperature: return s.temperature != 1.0f;
    case SamplerStage::Grammar: return has_mask;
  }
  return false;
}

std::string describe(float v) { return std::isnan(v) ? "NaN" : "+inf"; }

}  // namespace

SamplerChain::SamplerChain(SamplerSettings settings) : settings_(std::move(settings)) {
  status_ = validate(settings_);
  // A format puts the grammar stage first unless the order places it.
  if (settings_.format.kind != FormatKind::None &&
      std::find(settings_.order.begin(), settings_.order.end(), SamplerStage::Grammar) == settings_.order.end())
    settings_.order.insert(settings_.order.begin(), SamplerStage::Grammar);
}

Status SamplerChain::check_inputs(std::span<const float> logits, std::span<const TokenId> history) const {
  if (logits.empty()) return make_error("sampler: empty vocabulary (0 logits)");
  const auto vocab = static_cast<TokenId>(logits.size());
  // NaN and +inf are the values not < +inf: one vectorised scan for both.
  const auto n = static_cast<int64_t>(logits.size());
  if (const int64_t i = kernels::find_not_below(logits.data(), n, INFINITY); i < n)
    return make_error("sampler: raw logit of token " + std::to_string(i) + " is " +
                      describe(logits[static_cast<size_t>(i)]) + " (the forward pass produced a broken value)");
  for (size_t i = 0; i < history.size(); ++i)
    if (history[i] < 0 || history[i] >= vocab)
      return make_error("sampler: history token " + std::to_string(history[i]) + " at position " +
                        std::to_string(i) + " is outside the vocabulary of " + std::to_string(vocab));
  for (const auto& [id, bias] : settings_.logit_bias)
    if (id >= vocab)
      return make_error("sampler: logit_bias names token " + std::to_string(id) +
                        " outside the vocabulary of " + std::to_string(vocab));
  return Status::success();
}

Status SamplerChain::run(std::span<const float> logits, std::span<const TokenId> history, bool xtc_fired,
                         TokenRecord* record) {
  if (!status_.ok()) return status_;
  GB_TRY(check_inputs(logits, history));
  set_.reset(logits);
  if (set_.empty())
    return make_error("sampler: empty vocabulary: every one of the " + std::to_string(logits.size()) +
                      " raw logits is -inf");
  if (record) begin_record(logits, *record);

  for (size_t s = 0; s < settings_.order.size(); ++s) {
    const SamplerStage stage = settings_.order[s];
    const bool active = stage_is_active(stage, settings_, xtc_fired, !grammar_mask_.empty());
    if (active) {
      switch (stage) {
        case SamplerStage::Penalties: apply_penalties(set_, history, settings_); break;
        case SamplerStage::Dry: apply_dry(set_, history, settings_.dry); break;
        case SamplerStage::LogitBias: apply_logit_bias(set_, settings_.logit_bias); break;
        case SamplerStage::TopK: apply_top_k(set_, settings_.top_k); break;
        case SamplerStage::TypicalP: apply_typical_p(set_, settings_.typical_p); break;
        case SamplerStage::TopP: apply_top_p(set_, settings_.top_p); break;
        case SamplerStage::MinP: apply_min_p(set_, settings_.min_p); break;
        case SamplerStage::Xtc: apply_xtc(set_, settings_.xtc, xtc_fired); break;
        case SamplerStage::Temperature: apply_temperature(set_, settings_.temperature); break;
        case SamplerStage::Grammar:
          apply_token_mask(set_, grammar_mask_);
          if (record) record_grammar(logits, s == 0, *record);
          break;
      }
    }
    if (set_.empty()) {
      if (record) end_record(*record);
      return make_error("sampler: all candidates removed by stage \"" + std::string(sampler_stage_name(stage)) +
                        "\"" + (stage == SamplerStage::LogitBias ? " (every token is banned)" : "") +
                        (stage == SamplerStage::Grammar ? " (the format allows no token here)" : ""));
    }
    if (record) record_stage(s, active, *record);
  }
  if (record) end_record(*record);

  // Final distribution over the survivors, in id order for the picker.
  set_.sort_by_id();
  const float m = set_.max_logit();
  probs_.resize(set_.size());
  double z = 0.0;
  for (size_t i = 0; i < set_.size(); ++i) {
    // Double exp on purpose: a float exp underflows to 0 below logit - max = -103,
    // which would silently drop kept tokens from the distribution's support.
    probs_[i] = std::exp(static_cast<double>(set_.items[i].logit) - m);
    z += probs_[i];
  }
  for (double& p : probs_) p /= z;
  return Status::success();
}

Result<SampledToken> SamplerChain::sample_with_draws(std::span<const float> logits,
                                                     std::span<const TokenId> history, double u_pick,
                                                     double u_xtc, TokenRecord* record) {
  const bool xtc_fired = settings_.xtc.probability > 0.0f && u_xtc < settings_.xtc.probability;
  GB_TRY(run(logits, history, xtc_fired, record));

  // Inverse CDF in id order, exactly as pick_from_distribution does it.
  double total = 0.0;
  for (double p : probs_) total += p;
  const double target = u_pick * total;
  size_t chosen = probs_.size() - 1;
  double cumulative = 0.0;
  for (size_t i = 0; i < probs_.size(); ++i) {
    cumulative += probs_[i];
    if (cumulative > target) {
      chosen = i;
      break;
    }
  }
  const SampledToken token{set_.items[chosen].id, static_cast<float>(probs_[chosen]), u_pick};

  if (record) {
    record->entropy_after = final_entropy();
    record->chosen = token.id;
    record->chosen_prob = token.prob;
    record->chosen_logit = logits[static_cast<size_t>(token.id)];
    record->chosen_prob_before =
        static_cast<float>(std::exp(static_cast<double>(record->chosen_logit) - raw_max_ - raw_log_z_));
    record->chosen_rank = raw_rank(logits, token.id, *record);
    record->draw = u_pick;
    record->xtc_draw = u_xtc;
    record->xtc_fired = xtc_fired;
  }
  return token;
}

Result<SampledToken> SamplerChain::sample(std::span<const float> logits, std::span<const TokenId> history,
                                          SamplerRng& rng, TokenRecord* record) {
  const double u_pick = rng.uniform(SamplerRng::kPickLane);
  const double u_xtc = rng.uniform(SamplerRng::kXtcLane);
  const uint64_t counter = rng.counter();
  rng.advance();  // once per token, success or not, so later draws never shift
  if (record) record->rng_counter = counter;
  return sample_with_draws(logits, history, u_pick, u_xtc, record);
}

Result<std::vector<double>> SamplerChain::distribution(std::span<const float> logits,
                                                       std::span<const TokenId> history) {
  std::vector<double> out(logits.size(), 0.0);
  const float q = settings_.xtc.probability;
  const bool has_xtc =
      q > 0.0f && std::find(settings_.order.begin(), settings_.order.end(), SamplerStage::Xtc) != settings_.order.end();
  // Weight of the "XTC did not fire" branch, then of the "fired" branch.
  const double weights[2] = {has_xtc ? 1.0 - static_cast<double>(q) : 1.0, has_xtc ? static_cast<double>(q) : 0.0};
  for (int fired = 0; fired < 2; ++fired) {
    if (weights[fired] == 0.0) continue;
    GB_TRY(run(logits, history, fired == 1, nullptr));
    for (size_t i = 0; i < set_.size(); ++i)
      out[static_cast<size_t>(set_.items[i].id)] += weights[fired] * probs_[i];
  }
  return out;
}

TokenId pick_from_distribution(std::span<const double> probs, double u) {
  double total = 0.0;
  for (double p : probs) total += p;
  const double target = u * total;
  double cumulative = 0.0;
  TokenId last_positive = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0) continue;
    cumulative += probs[i];
    last_positive = static_cast<TokenId>(i);
    if (cumulative > target) return last_positive;
  }
  return last_positive;
}

}  // namespace gb
