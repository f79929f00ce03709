// SamplerChain: turns one row of logits into one token for one request. It runs
// the request's stages in `settings.order` over a CandidateSet, then hands the
// final picker its uniform random number (as llama2.c's sampler does), so a
// token is a pure function of (logits, history, settings, draw).
//
//   logits ──► check (NaN / +inf = error) ──► stages in order ──► softmax ──► pick(u)
//                                                │ (record: top-N probs after each stage)
// The picker walks the final distribution in TOKEN-ID order and returns the
// first id whose cumulative probability exceeds u (pick_from_distribution).
// Hence for chains without XTC,
//   sample_with_draws(logits, h, u, ·).id == pick_from_distribution(distribution(logits, h), u)
// which is what speculative decoding's verifier relies on.
//
// XTC is random too: it fires when the request's XTC-lane uniform < probability.
// distribution() returns the exact marginal (mixture of fired and not fired).
//
// Errors (per request, never a crash): invalid settings (validate()), empty
// logits, NaN or +inf in the raw logits, history / logit_bias / breaker ids outside
// the vocabulary, every token -inf, every candidate removed by a stage. The
// message names the stage or the token id.
// Cost: O(vocab) for the candidate array plus what the stages need; see
// bench_sampler for numbers. With a record: one extra O(vocab) pass for the raw
// statistics and one normalizer per active stage.
// Threads: one chain per request (it keeps scratch buffers); not shared between
// threads at the same time. Chains for different requests are independent.
#pragma once

#include <span>
#include <vector>

#include "core/ids.h"
#include "core/result.h"
#include "sampling/candidate_set.h"
#include "sampling/sampler_rng.h"
#include "sampling/sampler_settings.h"
#include "sampling/token_record.h"

namespace gb {

struct SampledToken {
  TokenId id = -1;
  float prob = 0.0f;  // probability of `id` in the distribution it was drawn from
  double draw = 0.0;  // the uniform the picker used
};

class SamplerChain {
 public:
  // Settings are validated here; an invalid chain returns the validation error
  // from every call (check status() to report it early).
  explicit SamplerChain(SamplerSettings settings);

  const SamplerSettings& settings() const { return settings_; }

  // The grammar stage's mask for the following calls: bit t of word t / 64 set
  // = token t allowed (grammar/token_masks.h builds it). Empty: the stage is
  // inactive. The span must stay valid until the next set_grammar_mask. With a
  // record, the stage fills TokenRecord::grammar (mass_allowed, num_allowed).
  void set_grammar_mask(std::span<const uint64_t> mask) { grammar_mask_ = mask; }
  const Status& status() const { return status_; }

  // logits: (vocab_size) raw scores, -inf = masked by the caller.
  // history: every token of the request so far (prompt + generated), oldest first.
  // Uses rng's current draws and advances rng by exactly one counter step, also
  // when the call fails, so a failure never shifts later tokens' draws.
  // record: optional; filled with the TokenRecord of this token.
  Result<SampledToken> sample(std::span<const float> logits, std::span<const TokenId> history,
                              SamplerRng& rng, TokenRecord* record = nullptr);

  // The same with explicit uniforms in [0, 1): u_pick for the picker, u_xtc for XTC.
  Result<SampledToken> sample_with_draws(std::span<const float> logits, std::span<const TokenId> history,
                                         double u_pick, double u_xtc, TokenRecord* record = nullptr);

  // The exact distribution sample() draws from: (vocab_size) probabilities,
  // 0 for removed tokens, summing to 1. With XTC it is the mixture
  // (1 - q) * P(not fired) + q * P(fired), q = xtc.probability.
  Result<std::vector<double>> distribution(std::span<const float> logits, std::span<const TokenId> history);

 private:
  // Runs checks and stages; leaves the survivors in set_ (id order) and their
  // final probabilities in probs_ (same order).
  Status run(std::span<const float> logits, std::span<const TokenId> history, bool xtc_fired,
             TokenRecord* record);
  Status check_inputs(std::span<const float> logits, std::span<const TokenId> history) const;
  void begin_record(std::span<const float> logits, TokenRecord& record);
  void record_stage(size_t stage_index, bool active, TokenRecord& record);
  void end_record(const TokenRecord& record);  // leaves slot_of_id_ all -1 again
  // After the grammar stage: TokenRecord::grammar's allowed mass and count.
  // first_stage: the stage ran on the raw logits (set_ = the allowed ones).
  void record_grammar(std::span<const float> logits, bool first_stage, TokenRecord& record) const;
  float final_entropy() const;                 // of probs_, the distribution sampled
  // 0-based rank of `id` among the raw logits (ties: lower id first).
  int32_t raw_rank(std::span<const float> logits, TokenId id, const TokenRecord& record) const;

  SamplerSettings settings_;
  Status status_;
  std::span<const uint64_t> grammar_mask_;
  CandidateSet set_;            // (num_alive) working candidates
  std::vector<double> probs_;   // (num_alive) final probabilities, aligned with set_.items
  std::vector<int32_t> slot_of_id_;  // (vocab_size) index into record->top or -1; record only
  std::vector<Candidate> scratch_;   // (top_n_record) the record's top-N, best first
  float raw_max_ = 0.0f;             // max raw logit (record only)
  double raw_log_z_ = 0.0;           // log sum exp(raw - raw_max_) (record only)
};

// Inverse-CDF pick over an id-indexed distribution: the smallest id whose
// cumulative probability exceeds u * total (total = sum of probs, normally 1).
// Falls back to the last id with p > 0 when rounding leaves u beyond the sum.
// Returns -1 only if every probability is 0.
TokenId pick_from_distribution(std::span<const double> probs, double u);

}  // namespace gb
