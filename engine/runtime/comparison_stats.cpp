// Comparison: seeds, stream keys and per-sample statistics (pure functions).
// The driver is in comparison.cpp; definitions in docs/compare.md.
#include <cmath>
#include <set>
#include <utility>

#include "runtime/comparison.h"
#include "sampling/sampler_settings_json.h"

namespace gb {
namespace {

// splitmix64's finalizer (Steele, Lea, Flood, OOPSLA 2014), as in SamplerRng.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;

// Distinct n-grams / n-grams of `ids` (0 when there is none).
double distinct_ratio(const std::vector<TokenId>& ids, size_t n) {
  if (ids.size() < n) return 0.0;
  std::set<std::vector<TokenId>> seen;
  for (size_t i = 0; i + n <= ids.size(); ++i) seen.emplace(ids.begin() + static_cast<ptrdiff_t>(i),
                                                            ids.begin() + static_cast<ptrdiff_t>(i + n));
  return static_cast<double>(seen.size()) / static_cast<double>(ids.size() - n + 1);
}

}  // namespace

uint64_t comparison_sample_seed(uint64_t seed, int32_t sample, uint64_t lane_key) {
  const uint64_t a = mix64(seed + kGoldenGamma * (static_cast<uint64_t>(sample) + 1));
  return mix64(a ^ mix64(lane_key + kGoldenGamma));
}

uint64_t lane_stream_key(const SamplerSettings& settings) {
  SamplerSettings s = settings;
  s.seed = 0;
  s.max_tokens = 0;
  s.top_n_record = 0;
  // FNV-1a over the canonical JSON: equal settings, equal key.
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : sampler_settings_to_json(s)) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h == 0 ? 1 : h;
}

std::optional<double> raw_logprob(const TokenRecord& r) {
  if (r.top.empty() || !(r.top.front().prob_before > 0.0f)) return std::nullopt;
  // log Z from the best candidate (its probability never underflows).
  const double log_z = r.top.front().logit - std::log(static_cast<double>(r.top.front().prob_before));
  return static_cast<double>(r.chosen_logit) - log_z;
}

SampleStats compute_sample_stats(const std::vector<TokenSampledEvent>& tokens) {
  SampleStats s;
  std::vector<TokenId> ids;
  ids.reserve(tokens.size());
  double sum_lp = 0.0, sum_h = 0.0, sum_hs = 0.0;
  int32_t n = 0;
  for (const TokenSampledEvent& t : tokens) {
    ids.push_back(t.token);
    const std::optional<double> lp = raw_logprob(t.record);
    if (!lp) continue;
    sum_lp += *lp;
    sum_h += t.record.entropy_before;
    sum_hs += t.record.entropy_after;
    ++n;
  }
  s.length = static_cast<int32_t>(ids.size());
  if (n > 0) {
    s.mean_logprob = sum_lp / n;
    s.mean_entropy = sum_h / n;
    s.mean_entropy_sampled = sum_hs / n;
  }
  s.distinct_1 = distinct_ratio(ids, 1);
  s.distinct_2 = distinct_ratio(ids, 2);
  s.repetition_rate = ids.size() < 4 ? 0.0 : 1.0 - distinct_ratio(ids, 4);
  return s;
}

std::optional<int32_t> first_divergence(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<int32_t>(i);
  if (a.size() == b.size()) return std::nullopt;
  return static_cast<int32_t>(n);
}

}  // namespace gb
