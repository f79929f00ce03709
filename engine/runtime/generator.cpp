#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace gb {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

float log_sum_exp(std::span<const float> x) {
  float max_val = -INFINITY;
  for (float v : x) max_val = std::max(max_val, v);
  double sum = 0.0;
  for (float v : x) sum += std::exp(static_cast<double>(v - max_val));
  return max_val + static_cast<float>(std::log(sum));
}

TokenId argmax(std::span<const float> x) {
  return static_cast<TokenId>(std::max_element(x.begin(), x.end()) - x.begin());
}

// Draws from softmax(logits / temperature) with one uniform number.
TokenId sample_temperature(std::span<const float> logits, float temperature, double u) {
  const float max_val = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - max_val) / temperature);
  double cdf = 0.0;
  const double target = u * sum;
  for (size_t i = 0; i < p.size(); ++i) {
    cdf += p[i];
    if (target < cdf) return static_cast<TokenId>(i);
  }
  return static_cast<TokenId>(p.size() - 1);
}
}  // namespace

std::vector<LogitCandidate> top_candidates(std::span<const float> logits, int32_t n) {
  const size_t k = std::min(logits.size(), static_cast<size_t>(std::max(n, 0)));
  std::vector<TokenId> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto by_logit = [&](TokenId a, TokenId b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), by_logit);
  const float lse = log_sum_exp(logits);
  std::vector<LogitCandidate> top(k);
  for (size_t i = 0; i < k; ++i) {
    const float l = logits[static_cast<size_t>(ids[i])];
    top[i] = {ids[i], l, l - lse};
  }
  return top;
}

Generator::Generator(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
                     Backend& backend, int32_t context_length)
    : model_(std::move(model)), tokenizer_(std::move(tokenizer)), backend_(backend), context_length_(context_length) {}

Result<GenerateStats> Generator::generate(std::span<const TokenId> prompt_ids, const GenerateOptions& options,
                                          const std::function<bool(const GeneratedToken&)>& on_token) {
  const int32_t vocab = model_->config.vocab_size;
  const int32_t num_prompt = static_cast<int32_t>(prompt_ids.size());
  if (num_prompt == 0) return make_error("the prompt has no tokens (add BOS or some text)");
  if (num_prompt > context_length_)
    return make_error("prompt is " + std::to_string(num_prompt) + " tokens but the context is " +
                      std::to_string(context_length_) + " (use --ctx to raise it)");
  if (options.temperature < 0.0f || !std::isfinite(options.temperature))
    return make_error("temperature must be a finite number >= 0");

  const int32_t bs = options.block_size;
  const int32_t num_blocks = (context_length_ + bs - 1) / bs;
  GB_TRY(backend_.init_kv_pool({num_blocks, bs}));
  std::vector<int32_t> table;  // this sequence's block table; blocks handed out in order
  const auto ensure_blocks = [&](int32_t num_tokens) {
    while (static_cast<int32_t>(table.size()) * bs < num_tokens) table.push_back(static_cast<int32_t>(table.size()));
  };

  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  StreamingDecoder decoder(*tokenizer_);
  decoder.prime(prompt_ids);

  GenerateStats stats;
  stats.num_prompt_tokens = num_prompt;
  std::vector<float> logits(static_cast<size_t>(vocab));
  BatchLayout batch;
  batch.block_size = bs;

  const auto t_start = Clock::now();
  ensure_blocks(num_prompt);
  batch.add_sequence(prompt_ids.data(), num_prompt, 0, table.data(), static_cast<int32_t>(table.size()), false);
  GB_TRY(backend_.forward(batch, logits));
  stats.prefill_ms = ms_since(t_start);

  int32_t pos = num_prompt;  // position of the next token to feed
  auto t_step = t_start;
  Clock::time_point t_first;
  for (int32_t n = 0; n < options.max_tokens; ++n) {
    GeneratedToken tok;
    tok.id = options.temperature == 0.0f ? argmax(logits) : sample_temperature(logits, options.temperature, uniform(rng));
    tok.position = pos - 1;
    tok.top = top_candidates(logits, std::max(options.top_n, 1));
    tok.logprob = logits[static_cast<size_t>(tok.id)] - log_sum_exp(logits);
    if (static_cast<int32_t>(tok.top.size()) > options.top_n) tok.top.resize(static_cast<size_t>(options.top_n));

    const bool is_end = options.stop_on_eos && (tok.id == tokenizer_->eos_id() || tok.id == tokenizer_->bos_id());
    if (is_end) {
      stats.reason = FinishReason::Stop;
      break;
    }
    tok.text = decoder.push(tok.id);
    tok.step_ms = ms_since(t_step);
    if (n == 0) {
      t_first = Clock::now();
      stats.ttft_ms = ms_since(t_start);
    }
    ++stats.num_generated;
    if (!on_token(tok)) {
      stats.reason = FinishReason::Cancelled;
      break;
    }
    if (n + 1 == options.max_tokens) break;
    if (pos >= context_length_) {
      stats.reason = FinishReason::Length;
      break;
    }
    t_step = Clock::now();
    ensure_blocks(pos + 1);
    batch.clear();
    batch.add_sequence(&tok.id, 1, pos, table.data(), static_cast<int32_t>(table.size()), false);
    GB_TRY(backend_.forward(batch, logits));
    ++pos;
  }
  stats.trailing_text = decoder.flush();
  if (stats.num_generated > 1) {
    const double decode_ms = ms_since(t_first);
    stats.tpot_ms = decode_ms / (stats.num_generated - 1);
    stats.tokens_per_s = (stats.num_generated - 1) / (decode_ms / 1000.0);
  }
  return stats;
}

}  // namespace gb
