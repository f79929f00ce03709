#include "cli/token_json.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sampling/sampler_stage.h"
#include "trace/json_fields.h"

namespace gb::cli {

namespace {
// A float field as the trace writes it (the shortest digits that read back as
// the same float), so the two outputs agree number for number; NaN and
// infinities stay JSON null as before.
nlohmann::json real32(float v) { return std::isfinite(v) ? trace_json::real(v) : nlohmann::json(v); }
}  // namespace

nlohmann::json token_json(const TokenSampledEvent& t) {
  const TokenRecord& r = t.record;
  nlohmann::json j = {{"id", t.token}, {"text", t.text}, {"position", t.position}, {"index", t.index},
                      {"origin", token_origin_name(t.origin)}};
  if (r.top.empty()) return j;  // forced tokens have no record
  // log Z of the raw logits, from the best candidate (its probability is never tiny),
  // so log probabilities stay finite where float probabilities underflow.
  const double log_z = r.top.front().logit - std::log(static_cast<double>(r.top.front().prob_before));
  j["logprob"] = r.chosen_logit - log_z;
  j["prob"] = real32(r.chosen_prob);
  j["rank"] = r.chosen_rank;
  j["draw"] = r.draw;
  j["entropy_before"] = real32(r.entropy_before);
  j["entropy_after"] = real32(r.entropy_after);
  nlohmann::json stages = nlohmann::json::array();
  for (size_t s = 0; s < r.stages.size(); ++s)
    stages.push_back({{"stage", std::string(sampler_stage_name(r.stages[s]))},
                      {"active", r.stage_active[s] != 0},
                      {"num_candidates", r.num_candidates_after_stage[s]}});
  j["stages"] = stages;
  nlohmann::json top = nlohmann::json::array();
  for (const CandidateRecord& c : r.top) {
    nlohmann::json after = nlohmann::json::array();
    for (float p : c.prob_after_stage) after.push_back(real32(p));
    nlohmann::json cj = {{"id", c.id}, {"logit", real32(c.logit)}, {"logprob", c.logit - log_z}, {"prob", real32(c.prob_before)},
                         {"prob_after_stage", after}};
    if (c.removed_by_stage >= 0)
      cj["removed_by"] = std::string(sampler_stage_name(r.stages[static_cast<size_t>(c.removed_by_stage)]));
    top.push_back(std::move(cj));
  }
  j["top"] = std::move(top);
  if (r.grammar)  // the grammar stage: allowed raw mass, allowed count (1 = forced), state before the token
    j["grammar"] = {{"mass_allowed", real32(r.grammar->mass_allowed)},
                    {"num_allowed", r.grammar->num_allowed},
                    {"forced", r.grammar->forced},
                    {"state", r.grammar->state}};
  if (r.routing && r.routing->experts_per_token > 0) {
    // A mixture of experts: per layer, the experts of the step that chose the token, best first, with weights.
    const auto k = static_cast<size_t>(r.routing->experts_per_token);
    nlohmann::json layers = nlohmann::json::array();
    for (size_t at = 0; at + k <= r.routing->experts.size(); at += k) {
      nlohmann::json weights = nlohmann::json::array();
      for (size_t i = at; i < at + k; ++i) weights.push_back(real32(r.routing->weights[i]));
      layers.push_back({{"experts", std::vector<int32_t>(r.routing->experts.begin() + static_cast<ptrdiff_t>(at),
                                                         r.routing->experts.begin() + static_cast<ptrdiff_t>(at + k))},
                        {"weights", std::move(weights)}});
    }
    j["routing"] = std::move(layers);
  }
  j["forward_ms"] = r.forward_ms;
  j["sample_ms"] = r.sample_ms;
  return j;
}

void print_json_line(const nlohmann::json& j) {
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace gb::cli
