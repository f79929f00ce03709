// Goodness-of-fit helper for the statistical sampling tests.
//
// Pearson chi-square over kNumDraws seeded draws, bins with expected count < 5
// merged into one. Threshold: the chi-square quantile at p = 1e-4 by the
// Wilson-Hilferty approximation (z = 3.719), slightly conservative for small df,
// so a correct sampler fails one check with probability <= 1e-4. The seeds are
// fixed, so outcomes are deterministic: a failure is a real change, never luck.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "sampling_test_support.h"

namespace gbtest::sampling {

constexpr int kNumDraws = 100000;

// Deterministic awkward logits: vocab 111, spread over about [-4, 4].
inline std::vector<float> test_logits(int vocab = 111) {
  std::vector<float> l(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) l[static_cast<size_t>(i)] = 3.0f * std::sin(0.37f * i * i + 1.0f) + 0.01f * i;
  return l;
}

inline double chi_square_quantile_1e4(int df) {
  const double z = 3.719;  // upper 1e-4 point of the standard normal
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Draws kNumDraws tokens and checks them against chain.distribution(). Returns
// an empty string on success, else what went wrong.
// `reference` defines the expected distribution; by default the sampled chain's own.
inline std::string check_fit(const gb::SamplerSettings& settings, const std::vector<float>& logits,
                             const std::vector<gb::TokenId>& history, uint64_t seed,
                             const gb::SamplerSettings* reference = nullptr) {
  gb::SamplerChain chain(settings);
  gb::SamplerChain reference_chain(reference ? *reference : settings);
  auto dist = reference_chain.distribution(logits, history);
  if (!dist.ok()) return "distribution failed: " + dist.error().message;
  std::vector<int> counts(logits.size(), 0);
  gb::SamplerRng rng(seed);
  for (int n = 0; n < kNumDraws; ++n) {
    auto tok = chain.sample(logits, history, rng);
    if (!tok.ok()) return "sample failed: " + tok.error().message;
    ++counts[static_cast<size_t>(tok->id)];
  }
  double stat = 0.0, merged_obs = 0.0, merged_exp = 0.0;
  int bins = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = (*dist)[i] * kNumDraws;
    if ((*dist)[i] == 0.0) {
      if (counts[i] != 0) return "token " + std::to_string(i) + " has probability 0 but was drawn " +
                                 std::to_string(counts[i]) + " times";
      continue;
    }
    if (expected < 5.0) {
      merged_obs += counts[i];
      merged_exp += expected;
      continue;
    }
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++bins;
  }
  if (merged_exp > 0.0) {
    stat += (merged_obs - merged_exp) * (merged_obs - merged_exp) / merged_exp;
    ++bins;
  }
  if (bins < 2) {
    // A single outcome: every draw must be it (checked above via zero-probability tokens).
    return {};
  }
  const double limit = chi_square_quantile_1e4(bins - 1);
  if (stat > limit)
    return "chi-square " + std::to_string(stat) + " > " + std::to_string(limit) + " (df " +
           std::to_string(bins - 1) + ")";
  return {};
}

}  // namespace gbtest::sampling

#define GB_EXPECT_FIT(settings, logits, history, seed)             \
  do {                                                             \
    const std::string gb_fit_ = ::gbtest::sampling::check_fit(settings, logits, history, seed); \
    QVERIFY2(gb_fit_.empty(), gb_fit_.c_str());                    \
  } while (0)
