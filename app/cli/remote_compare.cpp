#include "cli/remote_compare.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "sampling/sampler_settings_json.h"
#include "cli/token_json.h"
#include "client/remote_client.h"
#include "client/remote_score_json.h"

namespace gb::cli {

namespace {

using nlohmann::json;

Result<std::unique_ptr<server::RemoteClient>> connect(const RemoteTarget& t, int top_logprobs) {
  server::RemoteOptions o;
  o.url = t.url;
  o.api_key = t.api_key;
  o.model = t.model;
  o.top_logprobs = top_logprobs;
  return server::RemoteClient::connect(o);
}

json top_json(const std::vector<std::pair<std::string, float>>& top) {
  json out = json::array();
  for (const auto& [token, logprob] : top) out.push_back({{"token", token}, {"logprob", logprob}});
  return out;
}

// Token strings -> small ids (first seen, first numbered), so the local
// statistics (distinct n-grams, divergence) run on remote samples.
struct Interner {
  std::map<std::string, TokenId> ids;
  TokenId operator()(const std::string& s) { return ids.emplace(s, static_cast<TokenId>(ids.size())).first->second; }
};

struct RemoteSample {
  server::RemoteChoice choice;
  uint64_t seed = 0;
  std::vector<TokenId> ids;
  SampleStats stats;
  std::optional<int32_t> divergence;
};

SampleStats remote_stats(const server::RemoteChoice& c, std::vector<TokenId>& ids, Interner& intern) {
  std::vector<TokenSampledEvent> events;
  double sum = 0.0;
  int n = 0;
  for (const server::RemoteToken& t : c.tokens) {
    TokenSampledEvent e;
    e.token = intern(t.token);
    ids.push_back(e.token);
    events.push_back(std::move(e));
    if (!std::isnan(t.logprob)) sum += t.logprob, ++n;
  }
  SampleStats s = compute_sample_stats(events);  // no records: the means stay 0
  s.mean_logprob = n > 0 ? sum / n : 0.0;
  return s;
}

// One lane's samples: n at once, or one request per sample where n is refused.
Result<std::vector<RemoteSample>> run_lane(server::RemoteClient& client, const std::string& prompt,
                                           const ComparisonSpec& spec, size_t lane) {
  SamplerSettings s = spec.lanes[lane].settings;
  s.seed = spec.crn ? spec.seed : comparison_sample_seed(spec.seed, 0, lane_stream_key(s));
  std::vector<RemoteSample> out;
  auto all = client.complete_n(prompt, s, spec.max_tokens, spec.num_samples);
  if (!all && spec.num_samples == 1) return all.error();
  if (!all) std::fprintf(stderr, "note: %s; asking one sample at a time\n", all.error().message.c_str());
  for (int32_t j = 0; j < spec.num_samples; ++j) {
    RemoteSample r;
    r.seed = s.seed + static_cast<uint64_t>(j);
    if (all) {
      r.choice = (*all)[static_cast<size_t>(j)];
    } else {
      SamplerSettings one = s;
      one.seed = r.seed;
      auto single = client.complete_n(prompt, one, spec.max_tokens, 1);
      if (!single) return single.error();
      r.choice = (*single)[0];
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

int run_remote_score(const RemoteTarget& target, const std::string& text, const std::string& text_file, int top_n,
                     bool json_out) {
  auto client = connect(target, top_n);
  if (!client) return fail(client.error().message);
  auto scored = (*client)->score(text, top_n);
  if (!scored) return fail(scored.error().message);
  double sum = 0.0;
  int n = 0;
  json tokens = json::array();
  for (size_t i = 0; i < scored->size(); ++i) {
    const server::RemoteScoredToken& t = (*scored)[i];
    if (!t.logprob) continue;  // the first token: context only
    sum += *t.logprob;
    ++n;
    const std::optional<int> rank = server::remote_rank(t);
    if (json_out) {
      tokens.push_back({{"position", i}, {"token", t.token}, {"logprob", *t.logprob},
                        {"rank", rank ? json(*rank) : json(nullptr)}, {"top", top_json(t.top)}});
    } else {
      std::printf("%5zu %-16s logprob %8.4f rank %s\n", i, ("'" + t.token + "'").c_str(), *t.logprob,
                  rank ? std::to_string(*rank).c_str() : (">=" + std::to_string(t.top.size())).c_str());
    }
  }
  const double mean = n > 0 ? sum / n : 0.0;
  if (json_out) {
    print_json_line({{"remote", target.url}, {"model", (*client)->model()}, {"text_file", text_file}, {"tokens", tokens},
                {"num_tokens", n}, {"mean_logprob", mean}, {"perplexity", std::exp(-mean)},
                {"not_available", {"token ids", "entropy", "KL to a base model"}}});
  } else {
    std::printf("tokens %d, mean logprob %.5f, perplexity %.4f (remote %s, model %s)\n", n, mean, std::exp(-mean),
                target.url.c_str(), (*client)->model().c_str());
  }
  return 0;
}

int run_remote_compare(const RemoteTarget& target, const std::string& prompt, const ComparisonSpec& spec,
                       bool json_out) {
  auto client = connect(target, 1);
  if (!client) return fail(client.error().message);
  Interner intern;
  std::vector<std::vector<RemoteSample>> lanes;
  for (size_t i = 0; i < spec.lanes.size(); ++i) {
    auto lane = run_lane(**client, prompt, spec, i);
    if (!lane) return fail("lane " + spec.lanes[i].name + ": " + lane.error().message);
    for (RemoteSample& r : *lane) r.stats = remote_stats(r.choice, r.ids, intern);
    lanes.push_back(std::move(*lane));
  }
  json out_lanes = json::array();
  for (size_t i = 0; i < lanes.size(); ++i) {
    json samples = json::array();
    if (!json_out) std::printf("== lane %s\n", spec.lanes[i].name.c_str());
    for (size_t j = 0; j < lanes[i].size(); ++j) {
      RemoteSample& r = lanes[i][j];
      if (i > 0) r.divergence = first_divergence(lanes[0][j].ids, r.ids);
      const SampleStats& s = r.stats;
      if (json_out) {
        samples.push_back({{"sample", j}, {"seed", r.seed}, {"text", r.choice.text},
                           {"stop_reason", r.choice.finish_reason}, {"length", s.length},
                           {"mean_logprob", s.mean_logprob}, {"distinct_1", s.distinct_1}, {"distinct_2", s.distinct_2},
                           {"repetition_rate", s.repetition_rate},
                           {"first_divergence", r.divergence ? json(*r.divergence) : json(nullptr)}});
      } else {
        std::printf("  [%zu] len %d, logprob %.3f, distinct-1 %.2f, distinct-2 %.2f, rep %.2f, %s, diverges at %s\n      %s\n",
                    j, s.length, s.mean_logprob, s.distinct_1, s.distinct_2, s.repetition_rate,
                    r.choice.finish_reason.c_str(), r.divergence ? std::to_string(*r.divergence).c_str() : "-",
                    r.choice.text.c_str());
      }
    }
    out_lanes.push_back({{"name", spec.lanes[i].name},
                         {"settings", json::parse(sampler_settings_to_json(spec.lanes[i].settings, -1))},
                         {"samples", samples}});
  }
  if (json_out)
    print_json_line({{"remote", target.url}, {"model", (*client)->model()}, {"prompt", prompt}, {"seed", spec.seed},
                {"crn", spec.crn}, {"max_tokens", spec.max_tokens}, {"lanes", out_lanes},
                {"not_available", {"token ids", "entropy", "sampler stages", "shared prompt blocks"}}});
  else
    std::printf("[remote %s, model %s: entropy, sampler stages and shared prompt blocks are not available over the API]\n",
                target.url.c_str(), (*client)->model().c_str());
  return 0;
}

}  // namespace gb::cli
