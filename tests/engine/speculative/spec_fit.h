// Goodness-of-fit helpers for the speculative tests: Pearson chi-square of
// observed counts against exact probabilities, bins with expected count < 5
// merged; threshold = the chi-square quantile at p = 1e-4 (Wilson-Hilferty,
// z = 3.719), so a correct implementation fails one check with probability
// <= 1e-4. Seeds are fixed: outcomes are deterministic. Also total variation.
#pragma once

#include <cmath>
#include <string>
#include <vector>

namespace spectest {

inline double chi_square_quantile_1e4(int df) {
  const double z = 3.719;
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// "" when counts fit probs, else a description. Zero-probability outcomes
// must never occur.
inline std::string check_fit(const std::vector<double>& probs, const std::vector<long>& counts) {
  long n = 0;
  for (long c : counts) n += c;
  double stat = 0, mo = 0, me = 0;
  int bins = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double e = probs[i] * static_cast<double>(n);
    if (probs[i] <= 0.0) {
      if (counts[i] != 0) return "outcome " + std::to_string(i) + " has probability 0 but occurred " + std::to_string(counts[i]) + " times";
      continue;
    }
    if (e < 5.0) { mo += static_cast<double>(counts[i]); me += e; continue; }
    stat += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
    ++bins;
  }
  if (me > 0) { stat += (mo - me) * (mo - me) / me; ++bins; }
  if (bins < 2) return "";
  const double limit = chi_square_quantile_1e4(bins - 1);
  if (stat > limit) return "chi-square " + std::to_string(stat) + " > " + std::to_string(limit) + " (df " + std::to_string(bins - 1) + ")";
  return "";
}

inline double total_variation(const std::vector<double>& probs, const std::vector<long>& counts) {
  long n = 0;
  for (long c : counts) n += c;
  double tv = 0;
  for (size_t i = 0; i < probs.size(); ++i) tv += std::abs(probs[i] - static_cast<double>(counts[i]) / static_cast<double>(n));
  return tv / 2;
}

}  // namespace spectest
