// Teacher-forced scoring (see text_scorer.h).
#include "runtime/text_scorer.h"

#include <algorithm>
#include <cmath>

#include "backend/batch_layout.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace gb {

void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  out.resize(logits.size());
  const double mx = *std::max_element(logits.begin(), logits.end());
  double z = 0.0;
  for (float x : logits) z += std::exp(static_cast<double>(x) - mx);
  const double log_z = mx + std::log(z);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_z;
}

namespace {
TokenId argmax(std::span<const double> lp) {
  return static_cast<TokenId>(std::max_element(lp.begin(), lp.end()) - lp.begin());
}
}  // namespace

TokenScore score_position(int32_t position, TokenId id, std::span<const double> lp,
                          const std::vector<double>* base_lp, int32_t top_n) {
  TokenScore s;
  s.position = position;
  s.id = id;
  const auto v = static_cast<TokenId>(lp.size());
  s.logprob = lp[static_cast<size_t>(id)];
  for (TokenId t = 0; t < v; ++t) {
    const double x = lp[static_cast<size_t>(t)];
    s.rank += x > s.logprob || (x == s.logprob && t < id);
    if (std::isfinite(x)) s.entropy -= std::exp(x) * x;
  }
  std::vector<TokenId> order(static_cast<size_t>(v));
  for (TokenId t = 0; t < v; ++t) order[static_cast<size_t>(t)] = t;
  const auto n = static_cast<ptrdiff_t>(std::min<int32_t>(top_n, v));
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](TokenId a, TokenId b) {
    const double la = lp[static_cast<size_t>(a)], lb = lp[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  for (ptrdiff_t i = 0; i < n; ++i) s.top.emplace_back(order[static_cast<size_t>(i)], lp[static_cast<size_t>(order[static_cast<size_t>(i)])]);
  if (base_lp) {
    // KL(base || model) = sum_t p_base(t) (log p_base(t) - log p_model(t)).
    double kl = 0.0;
    for (TokenId t = 0; t < v; ++t) {
      const double lb = (*base_lp)[static_cast<size_t>(t)];
      if (std::isfinite(lb)) kl += std::exp(lb) * (lb - lp[static_cast<size_t>(t)]);
    }
    s.kl = std::max(0.0, kl);  // rounding can leave a tiny negative
    s.top1_agree = argmax(*base_lp) == argmax(lp);
    s.base_logprob = (*base_lp)[static_cast<size_t>(id)];
  }
  return s;
}

namespace {

// One chunk [start, end) of the prefill on one backend: logits at every new
// position, (end - start, vocab) row-major. Blocks 0 .. are the sequence's table.
Status forward_chunk(Backend& backend, std::span<const TokenId> tokens, int32_t start, int32_t end,
                     int32_t block_size, std::vector<float>& logits, int32_t vocab, RoutingRows* routing = nullptr) {
  const int32_t num_blocks = (end + block_size - 1) / block_size;
  std::vector<int32_t> table(static_cast<size_t>(num_blocks));
  for (int32_t b = 0; b < num_blocks; ++b) table[static_cast<size_t>(b)] = b;
  BatchLayout layout;
  layout.block_size = block_size;
  layout.add_sequence(tokens.data() + start, end - start, start, table.data(), num_blocks, true);
  layout.routing = routing;
  logits.resize(static_cast<size_t>(end - start) * static_cast<size_t>(vocab));
  return backend.forward(layout, logits);
}

}  // namespace

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double r = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(r));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (r - static_cast<double>(lo));
}

Status check_comparable_vocabularies(const Tokenizer& a, const std::string& a_name, const Tokenizer& b,
                                     const std::string& b_name) {
  const std::string head = "cannot compare " + a_name + " with " + b_name + ": ";
  if (a.vocab_size() != b.vocab_size())
    return make_error(head + "their vocabularies have " + std::to_string(a.vocab_size()) + " and " +
                      std::to_string(b.vocab_size()) + " tokens (both models must share one vocabulary)");
  for (TokenId id = 0; id < a.vocab_size(); ++id)
    if (a.token_bytes(id) != b.token_bytes(id) || a.is_control(id) != b.is_control(id) || a.is_byte(id) != b.is_byte(id))
      return make_error(head + "token " + std::to_string(id) + " is '" + a.token_piece(id) + "' in the first and '" +
                        b.token_piece(id) + "' in the second (both models must share one vocabulary)");
  if (a.bos_id() != b.bos_id() || a.eos_id() != b.eos_id()) return make_error(head + "their BOS/EOS ids differ");
  return {};
}

Result<TextScore> score_tokens(const Model& model, Backend& backend, const Model* base, Backend* base_backend,
                               std::span<const TokenId> tokens, const ScoreOptions& o) {
  const auto n = static_cast<int32_t>(tokens.size());
  const int32_t vocab = model.config.vocab_size;
  if (n < 2) return make_error("score: the text has " + std::to_string(n) + " token(s); at least 2 are needed");
  if ((base == nullptr) != (base_backend == nullptr)) return make_error("score: a base model needs its backend");
  if (base && base->config.vocab_size != vocab)
    return make_error("score: " + base->path + " has " + std::to_string(base->config.vocab_size) +
                      " logits per token, " + model.path + " has " + std::to_string(vocab));
  for (const Model* m : {&model, base}) {
    if (m && n > m->config.context_length)
      return make_error("score: the text has " + std::to_string(n) + " tokens; " + m->path + "'s context holds " +
                        std::to_string(m->config.context_length) + " (use --ctx, or a shorter text)");
  }
  for (TokenId t : tokens)
    if (t < 0 || t >= vocab) return make_error("score: token id " + std::to_string(t) + " is outside the vocabulary");
  const int32_t num_blocks = (n + o.block_size - 1) / o.block_size;
  GB_TRY(backend.init_kv_pool({num_blocks, o.block_size, o.k_type, o.v_type}));
  if (base_backend) GB_TRY(base_backend->init_kv_pool({num_blocks, o.block_size, o.base_k_type, o.base_v_type}));

  TextScore out;
  out.token_ids.assign(tokens.begin(), tokens.end());
  std::vector<float> logits, base_logits;
  std::vector<double> lp, base_lp;
  RoutingRows routing;  // a mixture's routing of each scored row
  const int32_t chunk = std::max(1, o.chunk);
  for (int32_t start = 0; start < n - 1; start += chunk) {
    const int32_t end = std::min(n - 1, start + chunk);  // the last token's logits are never needed
    GB_TRY(forward_chunk(backend, tokens, start, end, o.block_size, logits, vocab,
                         model.config.is_moe() ? &routing : nullptr));
    if (base_backend) GB_TRY(forward_chunk(*base_backend, tokens, start, end, o.block_size, base_logits, vocab));
    for (int32_t p = start; p < end; ++p) {
      const size_t row = static_cast<size_t>(p - start) * static_cast<size_t>(vocab);
      log_softmax(std::span<const float>(logits.data() + row, static_cast<size_t>(vocab)), lp);
      if (base_backend) log_softmax(std::span<const float>(base_logits.data() + row, static_cast<size_t>(vocab)), base_lp);
      out.tokens.push_back(score_position(p + 1, tokens[static_cast<size_t>(p + 1)], lp,
                                          base_backend ? &base_lp : nullptr, o.top_n));
      if (const auto k = static_cast<size_t>(routing.experts_per_token); k > 0) {
        const size_t width = static_cast<size_t>(routing.layers) * k;
        const auto from = static_cast<ptrdiff_t>(static_cast<size_t>(p - start) * width);
        RoutingRecord r;
        r.experts_per_token = routing.experts_per_token;
        r.experts.assign(routing.experts.begin() + from, routing.experts.begin() + from + static_cast<ptrdiff_t>(width));
        r.weights.assign(routing.weights.begin() + from, routing.weights.begin() + from + static_cast<ptrdiff_t>(width));
        out.tokens.back().routing = std::move(r);
      }
    }
  }
  summarize_scores(out);
  return out;
}

void summarize_scores(TextScore& out) {
  if (out.tokens.empty()) return;
  double sum = 0.0;
  for (const TokenScore& s : out.tokens) sum += s.logprob;
  out.mean_logprob = sum / static_cast<double>(out.tokens.size());
  out.perplexity = std::exp(-out.mean_logprob);
  if (!out.tokens.front().kl) return;
  KlSummary k;
  std::vector<double> kls;
  int32_t agree = 0;
  for (const TokenScore& s : out.tokens) {
    kls.push_back(s.kl.value_or(0.0));
    agree += s.top1_agree.value_or(false) ? 1 : 0;
  }
  for (double x : kls) k.mean += x;
  k.mean /= static_cast<double>(kls.size());
  k.p50 = percentile(kls, 0.50);
  k.p90 = percentile(kls, 0.90);
  k.p95 = percentile(kls, 0.95);
  k.p99 = percentile(kls, 0.99);
  k.p999 = percentile(kls, 0.999);
  k.p10 = percentile(kls, 0.10);
  k.p05 = percentile(kls, 0.05);
  k.p01 = percentile(kls, 0.01);
  k.max = *std::max_element(kls.begin(), kls.end());
  k.min = *std::min_element(kls.begin(), kls.end());
  k.top1_agreement = static_cast<double>(agree) / static_cast<double>(kls.size());
  out.kl = k;
}

Result<TextScore> score_tokens_in_windows(const Model& model, Backend& backend, const Model* base,
                                          Backend* base_backend, std::span<const TokenId> tokens, int32_t window,
                                          TokenId bos_id, const ScoreOptions& options) {
  const auto n = static_cast<int32_t>(tokens.size());
  if (window < 4) return make_error("score: a window needs at least 4 tokens");
  if (n < window)
    return make_error("score: the text has " + std::to_string(n) + " tokens, fewer than one window of " +
                      std::to_string(window));
  TextScore out;
  out.token_ids.assign(tokens.begin(), tokens.end());
  for (int32_t start = 0; start + window <= n; start += window) {
    std::vector<TokenId> w(tokens.begin() + start, tokens.begin() + start + window);
    w.front() = bos_id;
    auto scored = score_tokens(model, backend, base, base_backend, w, options);
    if (!scored) return scored.error();
    for (TokenScore& t : scored->tokens) {
      if (t.position <= window / 2) continue;  // the first half is context only
      t.position += start;
      out.tokens.push_back(std::move(t));
    }
  }
  summarize_scores(out);
  return out;
}

}  // namespace gb
