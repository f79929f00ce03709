// Chi-square fit of 10^5 seeded draws at vocab 32000 (min-p then temperature).
// Separate from test_sampler_statistics.cpp because it takes ~20 s: label slow.
#include "sampling_fit.h"

using namespace gb;
using namespace gbtest::sampling;

GB_TEST(large_vocab_fits) {
  const auto logits = test_logits(32000);
  SamplerSettings s = all_off();
  s.order = {SamplerStage::MinP, SamplerStage::Temperature};
  s.min_p = 0.01f;
  s.temperature = 0.8f;
  GB_EXPECT_FIT(s, logits, {}, 15);
}

