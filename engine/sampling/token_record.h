// TokenRecord: what the token inspector and the trace show for one generated
// token — the top-N candidates by raw logit and what each stage of the chain did
// to their probability, entropies, the chosen token and the random draw used.
// Filled by SamplerChain::sample when the caller passes a record; timings are
// the caller's to fill.
//
// Layout: `stages` (num_stages) lists the chain's stages in the order they ran;
// every per-stage vector below is indexed the same way.
// Invariants: top is sorted by raw logit descending (ties: lower id first);
// prob_after_stage[s] == 0 for every s >= removed_by_stage; the probabilities of
// one stage column sum to <= 1 over `top` (exactly 1 over all candidates).
// Threads: plain value type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "sampling/sampler_stage.h"

namespace gb {

struct CandidateRecord {
  TokenId id = 0;
  float logit = 0.0f;        // raw logit from the model
  float prob_before = 0.0f;  // softmax of the raw logits at temperature 1
  std::vector<float> prob_after_stage;  // (num_stages) renormalized over the survivors
  int removed_by_stage = -1;            // index into TokenRecord::stages; -1 = survived
};

// What the grammar stage saw (a request with a format only).
struct GrammarRecord {
  float mass_allowed = 0.0f;  // raw softmax mass (temperature 1) of the tokens the grammar allowed
  int32_t num_allowed = 0;    // tokens the grammar allowed
  // Only one text could come next: every allowed token spells the same bytes
  // (a piece and its byte-fallback twin count once). Set by the engine.
  bool forced = false;
  std::string state;          // where the grammar stood before this token (GrammarMatcher::describe)
};

// A mixture of experts: the experts of the step that chose the token (the
// model's pass over the position before it), in every layer, best first, with
// their weights (renormalized to sum 1 per layer). Set by the engine.
struct RoutingRecord {
  int32_t experts_per_token = 0;
  std::vector<int32_t> experts;  // (layers x experts_per_token), layer by layer
  std::vector<float> weights;    // the same shape
};

struct TokenRecord {
  std::vector<SamplerStage> stages;                  // (num_stages) in run order
  std::vector<uint8_t> stage_active;                 // (num_stages) 0 = parameter "off", stage skipped
  std::vector<int32_t> num_candidates_after_stage;   // (num_stages)
  int32_t num_candidates_before = 0;                 // tokens whose raw logit is not -inf

  std::vector<CandidateRecord> top;  // (min(top_n_record, num_candidates_before))

  float entropy_before = 0.0f;  // nats, softmax of raw logits at temperature 1
  float entropy_after = 0.0f;   // nats, the final distribution that was sampled

  TokenId chosen = -1;
  float chosen_logit = 0.0f;        // raw
  float chosen_prob_before = 0.0f;  // raw softmax, temperature 1
  float chosen_prob = 0.0f;         // final distribution
  int32_t chosen_rank = -1;         // 0-based rank by raw logit (ties: lower id first)

  uint64_t rng_counter = 0;  // SamplerRng counter this token used
  double draw = 0.0;         // the uniform handed to the picker
  double xtc_draw = 0.0;     // the uniform XTC compared with its probability
  bool xtc_fired = false;
  std::optional<GrammarRecord> grammar;  // absent without a format (and in traces written before it)
  std::optional<RoutingRecord> routing;  // a mixture of experts only (absent in traces written before it)

  // Filled by the caller (scheduler / UI), not by the sampler.
  double forward_ms = 0.0;
  double sample_ms = 0.0;
};

}  // namespace gb
