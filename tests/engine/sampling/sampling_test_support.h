// Helpers shared by the sampling tests: logits from hand-written probabilities,
// settings with every stage off but one, and keep-set extraction through the
// real SamplerChain (so the tests exercise the same path the engine uses).
#pragma once

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "sampling/sampler_chain.h"
#include "gb_test.h"

namespace gbtest::sampling {

// Settings where every stage is off, order empty, temperature 1.
inline gb::SamplerSettings all_off() {
  gb::SamplerSettings s;
  s.temperature = 1.0f;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  s.typical_p = 1.0f;
  s.order.clear();
  return s;
}

inline gb::SamplerSettings only(gb::SamplerStage stage) {
  gb::SamplerSettings s = all_off();
  s.order = {stage};
  return s;
}

// logits = log(p): the softmax of these is p (up to float rounding).
inline std::vector<float> logits_from_probs(const std::vector<double>& p) {
  std::vector<float> out(p.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = p[i] > 0 ? static_cast<float>(std::log(p[i])) : -INFINITY;
  return out;
}

// Ids with nonzero probability in the chain's distribution, ascending.
inline std::vector<int> keep_set(const gb::SamplerSettings& settings, const std::vector<float>& logits,
                                 const std::vector<gb::TokenId>& history = {}) {
  gb::SamplerChain chain(settings);
  auto dist = chain.distribution(logits, history);
  std::vector<int> kept;
  if (!dist.ok()) return {-999};  // shows up in the failure message
  for (size_t i = 0; i < dist->size(); ++i)
    if ((*dist)[i] > 0) kept.push_back(static_cast<int>(i));
  return kept;
}

inline std::vector<int> range_ids(int first, int last_inclusive) {
  std::vector<int> v;
  for (int i = first; i <= last_inclusive; ++i) v.push_back(i);
  return v;
}

inline std::string show(const std::vector<int>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size() && i < 40; ++i) os << (i ? "," : "") << v[i];
  if (v.size() > 40) os << ",... (" << v.size() << " ids)";
  os << "]";
  return os.str();
}

}  // namespace gbtest::sampling

#define GB_EXPECT_KEEP(actual_expr, expected_expr)                                          \
  do {                                                                                      \
    const std::vector<int> gb_actual_ = (actual_expr);                                      \
    const std::vector<int> gb_expected_ = (expected_expr);                                  \
    QVERIFY2(gb_actual_ == gb_expected_,                                                    \
             ("kept " + ::gbtest::sampling::show(gb_actual_) + ", expected " +              \
              ::gbtest::sampling::show(gb_expected_)).c_str());                             \
  } while (0)
