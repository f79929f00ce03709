// JSON of a comparison run on a remote server (server/remote_comparison_json.h).
#include "client/remote_comparison_json.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "runtime/comparison.h"
#include "sampling/sampler_settings_json.h"

namespace gb::server {
namespace {

using nlohmann::json;

// Token strings -> small ids (first seen, first numbered), so the local
// statistics (distinct n-grams, divergence) run on remote samples.
struct Interner {
  std::map<std::string, TokenId> ids;
  TokenId operator()(const std::string& s) { return ids.emplace(s, static_cast<TokenId>(ids.size())).first->second; }
};

SampleStats sample_stats(const RemoteLaneSample& s, std::vector<TokenId>& ids, Interner& intern) {
  std::vector<TokenSampledEvent> events;
  double sum = 0.0;
  int n = 0;
  for (const RemoteToken& t : s.tokens) {
    TokenSampledEvent e;
    e.token = intern(t.token.empty() ? t.text : t.token);
    ids.push_back(e.token);
    events.push_back(std::move(e));
    if (!std::isnan(t.logprob)) sum += t.logprob, ++n;
  }
  SampleStats st = compute_sample_stats(events);  // no records: the entropies stay unknown
  st.mean_logprob = n > 0 ? sum / n : 0.0;
  return st;
}

json lane_json(const RemoteLane& lane, const std::vector<SampleStats>& stats,
               const std::vector<std::optional<int32_t>>& divergence) {
  json samples = json::array();
  double lp = 0, len = 0, d1 = 0, d2 = 0, rep = 0, div_sum = 0, tokens = 0, ms = 0;
  int diverged = 0;
  for (size_t j = 0; j < lane.samples.size(); ++j) {
    const RemoteLaneSample& r = lane.samples[j];
    const SampleStats& s = stats[j];
    samples.push_back({{"sample", j}, {"seed", r.seed}, {"text", r.text}, {"stop_reason", r.finish_reason},
                       {"length", s.length}, {"mean_logprob", s.mean_logprob}, {"mean_entropy", nullptr},
                       {"distinct_1", s.distinct_1}, {"distinct_2", s.distinct_2},
                       {"repetition_rate", s.repetition_rate},
                       {"first_divergence", divergence[j] ? json(*divergence[j]) : json(nullptr)}});
    lp += s.mean_logprob, len += s.length, d1 += s.distinct_1, d2 += s.distinct_2, rep += s.repetition_rate;
    if (divergence[j]) div_sum += *divergence[j], ++diverged;
    tokens += s.length, ms += r.e2e_ms;
  }
  const double n = lane.samples.empty() ? 1.0 : static_cast<double>(lane.samples.size());
  json summary = {{"mean_logprob", lp / n}, {"mean_entropy", nullptr}, {"mean_length", len / n},
                  {"distinct_1", d1 / n},   {"distinct_2", d2 / n},    {"repetition_rate", rep / n},
                  {"num_diverged", diverged},
                  {"mean_first_divergence", diverged > 0 ? json(div_sum / diverged) : json(nullptr)},
                  {"tokens_per_s", ms > 0 ? json(1000.0 * tokens / ms) : json(nullptr)}};
  return {{"name", lane.name}, {"settings", json::parse(sampler_settings_to_json(lane.settings, -1))},
          {"samples", std::move(samples)}, {"summary", std::move(summary)}};
}

}  // namespace

std::string remote_comparison_to_json(const std::vector<RemoteLane>& lanes, const RemoteComparisonInfo& info) {
  Interner intern;
  std::vector<std::vector<std::vector<TokenId>>> ids(lanes.size());
  std::vector<std::vector<SampleStats>> stats(lanes.size());
  for (size_t i = 0; i < lanes.size(); ++i)
    for (const RemoteLaneSample& s : lanes[i].samples) {
      ids[i].emplace_back();
      stats[i].push_back(sample_stats(s, ids[i].back(), intern));
    }
  json out_lanes = json::array();
  for (size_t i = 0; i < lanes.size(); ++i) {
    std::vector<std::optional<int32_t>> divergence(lanes[i].samples.size());
    for (size_t j = 0; i > 0 && j < divergence.size() && j < ids[0].size(); ++j)
      divergence[j] = first_divergence(ids[0][j], ids[i][j]);
    out_lanes.push_back(lane_json(lanes[i], stats[i], divergence));
  }
  json out = {{"remote", info.url},       {"model", info.model},
              {"prompt", info.prompt},    {"seed", info.seed},
              {"crn", false},             {"max_tokens", info.max_tokens},
              {"wall_ms", info.wall_ms},  {"lanes", std::move(out_lanes)},
              {"not_available", {"token ids", "entropy", "sampler stages", "common random numbers (CRN)",
                                 "shared prompt blocks"}}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gb::server
