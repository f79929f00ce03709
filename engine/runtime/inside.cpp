// The report math and JSON of runtime/inside.h.
#include "runtime/inside.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace gb {

Status parse_inside_layers(const std::string& text, InsideOptions& options) {
  if (text.empty() || text == "all") {
    options.first_layer = 0;
    options.last_layer = -1;
    return {};
  }
  const auto number = [&](std::string_view s, int32_t& v) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size() && v >= 0;
  };
  const size_t dash = text.find('-');
  int32_t a = 0, b = 0;
  const std::string_view t(text);
  const bool ok = dash == std::string::npos ? number(t, a) && number(t, b)
                                            : number(t.substr(0, dash), a) && number(t.substr(dash + 1), b);
  if (!ok || a > b) return make_error("layers '" + text + "': expected A-B or A (0-based layer numbers, A <= B)");
  options.first_layer = a;
  options.last_layer = b;
  return {};
}

std::vector<float> inside_softmax_row(std::vector<double>& scores, double sink) {
  std::vector<float> row(scores.size());
  if (scores.empty()) return row;
  const double m = std::max(*std::max_element(scores.begin(), scores.end()), sink);
  double sum = sink > -std::numeric_limits<double>::infinity() ? std::exp(sink - m) : 0.0;
  for (double& v : scores) sum += (v = std::exp(v - m));
  for (size_t i = 0; i < scores.size(); ++i) row[i] = static_cast<float>(scores[i] / sum);
  return row;
}

namespace {

struct Softmax {
  double max = 0.0, log_sum = 0.0;
  Softmax(const float* logits, int32_t vocab) {
    max = *std::max_element(logits, logits + vocab);
    double sum = 0.0;
    for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
    log_sum = std::log(sum);
  }
  double prob(float logit) const { return std::exp(static_cast<double>(logit) - max - log_sum); }
};

}  // namespace

std::vector<InsideTop> inside_top_k(const float* logits, int32_t vocab, int32_t k) {
  k = std::clamp(k, 0, vocab);
  // One pass with a k-entry heap (worst first), then best first.
  const auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> heap;
  heap.reserve(static_cast<size_t>(k) + 1);
  for (int32_t i = 0; i < vocab && k > 0; ++i) {
    if (static_cast<int32_t>(heap.size()) == k && !better(i, heap.front())) continue;
    heap.push_back(i);
    std::push_heap(heap.begin(), heap.end(), better);
    if (static_cast<int32_t>(heap.size()) > k) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.pop_back();
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  const Softmax sm(logits, vocab);
  std::vector<InsideTop> top;
  for (int32_t id : heap) top.push_back({id, sm.prob(logits[id])});
  return top;
}

std::pair<int32_t, double> inside_rank(const float* logits, int32_t vocab, TokenId id, const InsideTop& best) {
  const float v = logits[id];
  int32_t rank = 0;
  for (int32_t i = 0; i < vocab; ++i) rank += logits[i] > v || (logits[i] == v && i < id);
  return {rank, best.prob * std::exp(static_cast<double>(v) - static_cast<double>(logits[best.id]))};
}

namespace {

// A token's text: its bytes, or its vocabulary piece for a control token that
// decodes to nothing (BOS: "<bos>"), so a reader sees which token it was.
std::string token_text(TokenId id, const Tokenizer& tok) {
  std::string text = tok.token_bytes(id);
  return text.empty() ? tok.token_piece(id) : text;
}

nlohmann::json top_json(const std::vector<InsideTop>& top, const Tokenizer& tok) {
  nlohmann::json a = nlohmann::json::array();
  for (const InsideTop& t : top) a.push_back({{"id", t.id}, {"text", token_text(t.id, tok)}, {"prob", t.prob}});
  return a;
}

nlohmann::json token_json(TokenId id, const Tokenizer& tok) { return {{"id", id}, {"text", token_text(id, tok)}}; }

}  // namespace

std::string inside_to_json(const InsideReport& r, const Tokenizer& tok, const InsideJsonOptions& o) {
  nlohmann::json j = {{"schema", "glassbox-inside-v1"},
                      {"architecture", r.architecture},
                      {"num_layers", r.num_layers},
                      {"num_heads", r.num_heads},
                      {"num_kv_heads", r.num_kv_heads},
                      {"head_dim", r.head_dim},
                      {"position", r.position},
                      {"token", token_json(r.context.at(static_cast<size_t>(r.position)), tok)}};
  if (o.context) {
    nlohmann::json ctx = nlohmann::json::array();
    for (TokenId id : r.context) ctx.push_back(token_json(id, tok));
    j["context"] = std::move(ctx);
  }
  j["target"] = token_json(r.target, tok);
  j["target"]["source"] = r.target_is_next ? "next" : "argmax";
  j["final"] = {{"top", top_json(r.final_top, tok)}};
  j["kv"] = {{"reused_tokens", r.reused_tokens},
             {"recomputed_tokens", r.recomputed_tokens},
             {"k_type", r.k_type},
             {"v_type", r.v_type}};
  j["timing_ms"] = {{"prefill", r.prefill_ms}, {"capture", r.capture_ms}, {"lens", r.lens_ms}, {"total", r.total_ms}};
  if (!r.lens_error.empty()) j["lens_error"] = r.lens_error;
  nlohmann::json layers = nlohmann::json::array();
  for (const InsideLayer& l : r.layers) {
    nlohmann::json e = {{"layer", l.layer},
                        {"sliding", l.window > 0},
                        {"window", l.window},
                        {"first_position", l.first_position}};
    if (!l.attention.empty()) {
      e["attention"] = l.attention;
      e["head_entropy"] = l.head_entropy;
      e["head_sink_mass"] = l.head_sink_mass;
    }
    e["signals"] = {{"residual_norm", l.residual_norm},
                    {"attention_norm", l.attention_norm},
                    {"mlp_norm", l.mlp_norm},
                    {"cosine_to_previous", l.cosine_to_previous}};
    if (!l.lens_top.empty())
      e["lens"] = {{"top", top_json(l.lens_top, tok)}, {"target_rank", l.target_rank}, {"target_prob", l.target_prob}};
    if (!l.experts.empty()) e["experts"] = {{"ids", l.experts}, {"weights", l.expert_weights}};
    if (!l.residual_in.empty()) {
      e["residual_in"] = l.residual_in;
      e["residual_out"] = l.residual_out;
    }
    layers.push_back(std::move(e));
  }
  j["layers"] = std::move(layers);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gb
