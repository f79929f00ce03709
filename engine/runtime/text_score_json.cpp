// JSON of a TextScore (docs/compare.md).
#include "runtime/text_score_json.h"

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace gb {
namespace {

nlohmann::json token_entry(const TokenScore& s, const Tokenizer& tok) {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& [id, lp] : s.top) top.push_back({{"id", id}, {"logprob", lp}, {"text", tok.token_bytes(id)}});
  nlohmann::json j = {{"position", s.position}, {"id", s.id},          {"text", tok.token_bytes(s.id)},
                      {"logprob", s.logprob},   {"rank", s.rank},       {"entropy", s.entropy},
                      {"top", std::move(top)}};
  if (s.kl) {
    j["kl"] = *s.kl;
    j["top1_agree"] = *s.top1_agree;
    j["base_logprob"] = *s.base_logprob;
  }
  if (s.routing)  // a mixture of experts: per layer, the experts of the pass that scored the token
    j["routing"] = {{"experts_per_token", s.routing->experts_per_token},
                    {"experts", s.routing->experts},
                    {"weights", s.routing->weights}};
  return j;
}

}  // namespace

std::string text_score_to_json(const TextScore& score, const Tokenizer& tok, const TextScoreJsonOptions& o) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const TokenScore& s : score.tokens) tokens.push_back(token_entry(s, tok));
  nlohmann::json out = {{"model", o.model_path},
                        {"text_file", o.text_file},
                        {"num_tokens", score.token_ids.size()},
                        {"token_ids", score.token_ids},
                        {"mean_logprob", score.mean_logprob},
                        {"perplexity", score.perplexity},
                        {"tokens", std::move(tokens)}};
  out["window"] = o.window > 0 ? nlohmann::json(o.window) : nlohmann::json(nullptr);
  if (score.kl) {
    const KlSummary& k = *score.kl;
    out["base"] = o.base_path;
    out["kl_mean"] = k.mean;
    out["kl_percentiles"] = {{"min", k.min}, {"p01", k.p01}, {"p05", k.p05}, {"p10", k.p10}, {"p50", k.p50},
                             {"p90", k.p90}, {"p95", k.p95}, {"p99", k.p99}, {"p999", k.p999}, {"max", k.max}};
    out["top1_agreement"] = k.top1_agreement;
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gb
