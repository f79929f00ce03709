// JSON / CSV of a Comparison (docs/compare.md).
#include "runtime/comparison_json.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "kv/kv_policy_json.h"
#include "sampling/sampler_settings_json.h"

namespace gb {
namespace {

using nlohmann::json;

json token_entry(const TokenSampledEvent& t) {
  const TokenRecord& r = t.record;
  json j = {{"id", t.token}, {"text", t.text}, {"position", t.position}};
  const std::optional<double> lp = raw_logprob(r);
  if (!lp) return j;
  j["logprob"] = *lp;
  j["prob"] = r.chosen_prob;
  j["rank"] = r.chosen_rank;
  j["draw"] = r.draw;
  j["entropy"] = r.entropy_before;
  j["entropy_sampled"] = r.entropy_after;
  j["sample_ms"] = r.sample_ms;  // this lane's own sampling time (its grammar mask included)
  if (r.grammar) j["grammar"] = {{"mass_allowed", r.grammar->mass_allowed}, {"num_allowed", r.grammar->num_allowed},
                                 {"forced", r.grammar->forced}};
  // [id, raw probability, probability after the chain] of the recorded candidates.
  json top = json::array();
  for (const CandidateRecord& c : r.top)
    top.push_back({c.id, c.prob_before,
                   c.removed_by_stage >= 0 || c.prob_after_stage.empty() ? 0.0f : c.prob_after_stage.back()});
  j["top"] = std::move(top);
  return j;
}

json stats_entry(const SampleStats& s) {
  return {{"length", s.length},
          {"mean_logprob", s.mean_logprob},
          {"mean_entropy", s.mean_entropy},
          {"mean_entropy_sampled", s.mean_entropy_sampled},
          {"distinct_1", s.distinct_1},
          {"distinct_2", s.distinct_2},
          {"repetition_rate", s.repetition_rate}};
}

json sample_entry(const ComparisonSample& s, bool records) {
  json j = stats_entry(s.stats);
  j["sample"] = s.sample;
  j["seed"] = s.seed;
  j["request"] = s.request.value;
  j["token_ids"] = s.token_ids;
  j["text"] = s.text;
  j["first_divergence"] = s.first_divergence ? json(*s.first_divergence) : json(nullptr);
  j["stop_reason"] = s.stop_reason;
  j["tokens_per_s"] = s.tokens_per_s;
  if (!s.error.empty()) j["error"] = s.error;
  if (records) {
    json tokens = json::array();
    for (const TokenSampledEvent& t : s.tokens) tokens.push_back(token_entry(t));
    j["tokens"] = std::move(tokens);
  }
  return j;
}

// Means over a lane's samples, and how many diverged from lane 0.
json lane_summary(const Comparison& c, int32_t lane) {
  const int32_t n = c.spec().num_samples;
  SampleStats m;
  double length = 0.0, tps = 0.0, divergence = 0.0;
  int32_t num_diverged = 0;
  for (int32_t j = 0; j < n; ++j) {
    const ComparisonSample& s = c.sample(lane, j);
    length += s.stats.length;
    m.mean_logprob += s.stats.mean_logprob;
    m.mean_entropy += s.stats.mean_entropy;
    m.mean_entropy_sampled += s.stats.mean_entropy_sampled;
    m.distinct_1 += s.stats.distinct_1;
    m.distinct_2 += s.stats.distinct_2;
    m.repetition_rate += s.stats.repetition_rate;
    tps += s.tokens_per_s;
    if (s.first_divergence) {
      ++num_diverged;
      divergence += *s.first_divergence;
    }
  }
  json j = {{"mean_length", length / n},
            {"mean_logprob", m.mean_logprob / n},
            {"mean_entropy", m.mean_entropy / n},
            {"mean_entropy_sampled", m.mean_entropy_sampled / n},
            {"distinct_1", m.distinct_1 / n},
            {"distinct_2", m.distinct_2 / n},
            {"repetition_rate", m.repetition_rate / n},
            {"tokens_per_s", tps / n},
            {"num_diverged", num_diverged}};
  j["mean_first_divergence"] = num_diverged > 0 ? json(divergence / num_diverged) : json(nullptr);
  return j;
}

}  // namespace

std::string comparison_to_json(const Comparison& c, const ComparisonJsonOptions& options) {
  const ComparisonSpec& spec = c.spec();
  json lanes = json::array();
  for (size_t i = 0; i < spec.lanes.size(); ++i) {
    json samples = json::array();
    for (int32_t j = 0; j < spec.num_samples; ++j)
      samples.push_back(sample_entry(c.sample(static_cast<int32_t>(i), j), options.token_records));
    lanes.push_back({{"name", spec.lanes[i].name},
                     {"settings", json::parse(sampler_settings_to_json(spec.lanes[i].settings))},
                     {"kv_policy", json::parse(kv_policy_to_json(spec.lanes[i].kv_policy))},
                     {"summary", lane_summary(c, static_cast<int32_t>(i))},
                     {"samples", std::move(samples)}});
  }
  json out = {{"prompt", options.prompt_text},
              {"prompt_ids", spec.prompt_ids},
              {"seed", spec.seed},
              {"crn", spec.crn},
              {"num_samples", spec.num_samples},
              {"max_tokens", spec.max_tokens},
              {"wall_ms", c.wall_ms()},
              {"kv", {{"num_prompt_blocks_shared", c.num_prompt_blocks_shared()},
                      {"shared_prompt_blocks", c.shared_prompt_blocks()}}},
              {"lanes", std::move(lanes)}};
  out["chat_format"] = options.chat_format.empty() ? json(nullptr) : json(options.chat_format);
  return out.dump(options.indent, ' ', false, json::error_handler_t::replace);
}

std::string comparison_to_csv(const Comparison& c) {
  std::ostringstream os;
  os << "lane,sample,seed,length,first_divergence,mean_logprob,mean_entropy,distinct_1,distinct_2,"
        "repetition_rate,stop_reason,tokens_per_s,text\n";
  const auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (const ComparisonSample& s : c.samples()) {
    const SampleStats& st = s.stats;
    os << quote(c.spec().lanes[static_cast<size_t>(s.lane)].name) << ',' << s.sample << ',' << s.seed << ','
       << st.length << ',' << (s.first_divergence ? std::to_string(*s.first_divergence) : std::string()) << ','
       << st.mean_logprob << ',' << st.mean_entropy << ',' << st.distinct_1 << ',' << st.distinct_2 << ','
       << st.repetition_rate << ',' << s.stop_reason << ',' << s.tokens_per_s << ',' << quote(s.text) << '\n';
  }
  return os.str();
}

Result<ComparisonLane> comparison_lane_from_json(std::string name, std::string_view text, std::string_view source) {
  ComparisonLane lane;
  lane.name = std::move(name);
  json settings = json::parse(text, nullptr, false);
  if (!settings.is_discarded() && settings.is_object()) {
    if (auto it = settings.find("kv_policy"); it != settings.end()) {
      auto policy = kv_policy_from_json(it->dump());
      if (!policy) return make_error(std::string(source) + ": " + policy.error().message);
      lane.kv_policy = *policy;
      settings.erase(it);
    }
    auto parsed = sampler_settings_from_json(settings.dump(), source);
    if (!parsed) return parsed.error();
    lane.settings = std::move(*parsed);
    return lane;
  }
  // Not an object: the sampler parser says what is wrong with it.
  auto parsed = sampler_settings_from_json(text, source);
  if (!parsed) return parsed.error();
  lane.settings = std::move(*parsed);
  return lane;
}

std::string comparison_lane_to_json(const ComparisonLane& lane, int indent) {
  if (!lane.kv_policy.active()) return sampler_settings_to_json(lane.settings, indent);
  json j = json::parse(sampler_settings_to_json(lane.settings));
  j["kv_policy"] = json::parse(kv_policy_to_json(lane.kv_policy));
  return j.dump(indent);
}

}  // namespace gb
