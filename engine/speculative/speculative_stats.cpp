#include "speculative/speculative_stats.h"

#include <nlohmann/json.hpp>

namespace gb {

std::string speculative_stats_json(const SpeculativeStats& s) {
  nlohmann::json by_pos = nlohmann::json::array();
  for (size_t i = 0; i < s.drafted_by_position.size(); ++i) {
    const auto d = static_cast<double>(s.drafted_by_position[i]);
    by_pos.push_back(d > 0 ? static_cast<double>(s.accepted_by_position[i]) / d : 0.0);
  }
  nlohmann::json j = {
      {"drafter", s.drafter},
      {"drafted", s.drafted},
      {"accepted", s.accepted},
      {"acceptance_rate", s.acceptance_rate()},
      {"mean_accepted_length", s.mean_accepted_length()},
      {"target_forwards", s.target_forwards},
      {"verifications", s.num_verifications},
      {"plain_steps", s.num_plain_steps},
      {"fallbacks", s.num_fallbacks},
      {"draft_ms", s.draft_ms},
      {"verify_ms", s.verify_ms},
      {"acceptance_by_position", by_pos},
  };
  return j.dump();
}

}  // namespace gb
