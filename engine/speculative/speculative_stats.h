// SpeculativeStats: what speculative decoding did for one request, for the
// CLI's final JSON line ("speculative": {...}) and the UI.
//   drafted              tokens the drafter proposed and the target verified
//   accepted             of those, tokens kept
//   acceptance_rate      accepted / drafted
//   mean_accepted_length tokens emitted per verification (accepted + the
//                        resampled or bonus token), i.e. tokens per target
//                        forward while speculating
//   target_forwards      target forward passes that produced a token for this
//                        request (verifications + plain decode steps + the
//                        prefill step that gave the first token)
//   accepted_by_position[i] / drafted_by_position[i]: acceptance at draft
//                        position i (0 = first drafted token)
//
// Plain value; written by the engine thread, copied out to readers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gb {

struct SpeculativeStats {
  std::string drafter;                // "ngram", "draft", "self", custom name
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t num_verifications = 0;
  int64_t num_plain_steps = 0;        // token steps without a draft (fallback, no match)
  int64_t target_forwards = 0;
  int64_t num_emitted = 0;            // tokens from verifications
  int64_t num_fallbacks = 0;          // times the request switched to plain decoding
  std::vector<int64_t> drafted_by_position;
  std::vector<int64_t> accepted_by_position;
  double draft_ms = 0.0;              // time in the drafter
  double verify_ms = 0.0;             // target forward + acceptance, verification steps
  double plain_ms = 0.0;              // plain decode steps
  int32_t current_k = 0;

  double acceptance_rate() const { return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0; }
  double mean_accepted_length() const {
    return num_verifications > 0 ? static_cast<double>(num_emitted) / static_cast<double>(num_verifications) : 0.0;
  }
};

// One JSON object: {"drafter":..., "drafted":..., "accepted":..., "acceptance_rate":...,
// "mean_accepted_length":..., "target_forwards":..., "verifications":..., "plain_steps":...,
// "fallbacks":..., "draft_ms":..., "verify_ms":..., "acceptance_by_position":[...]}.
std::string speculative_stats_json(const SpeculativeStats& stats);

}  // namespace gb
