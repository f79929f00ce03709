// JSON of a remotely scored text (server/remote_score_json.h).
#include "client/remote_score_json.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace gb::server {

using nlohmann::json;

std::optional<int> remote_rank(const RemoteScoredToken& t) {
  for (size_t i = 0; i < t.top.size(); ++i)
    if (t.top[i].first == t.token) return static_cast<int>(i);
  return std::nullopt;
}

std::string remote_score_to_json(const std::vector<RemoteScoredToken>& scored, const std::string& url,
                                 const std::string& model) {
  json tokens = json::array();
  double sum = 0.0;
  for (size_t i = 0; i < scored.size(); ++i) {
    const RemoteScoredToken& t = scored[i];
    if (!t.logprob) continue;  // the first token: context only
    sum += *t.logprob;
    json top = json::array();
    for (const auto& [text, logprob] : t.top) top.push_back({{"id", nullptr}, {"logprob", logprob}, {"text", text}});
    const std::optional<int> rank = remote_rank(t);
    tokens.push_back({{"position", i}, {"id", nullptr}, {"text", t.token}, {"logprob", *t.logprob},
                      {"rank", rank ? json(*rank) : json(nullptr)}, {"entropy", nullptr}, {"top", std::move(top)}});
  }
  const double mean = tokens.empty() ? 0.0 : sum / static_cast<double>(tokens.size());
  json out = {{"model", model},
              {"remote", url},
              {"text_file", ""},
              {"num_tokens", scored.size()},
              {"token_ids", nullptr},
              {"mean_logprob", mean},
              {"perplexity", std::exp(-mean)},
              {"window", nullptr},
              {"tokens", std::move(tokens)},
              {"not_available", {"token ids", "entropy", "KL to a base model"}}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gb::server
