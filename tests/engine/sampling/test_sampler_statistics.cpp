// Statistical tests: seeded draws from SamplerChain::sample follow the
// distribution the chain defines (SamplerChain::distribution), stage by stage and
// for whole chains; removed and banned tokens are never drawn; temperature -> 0
// is greedy.
// Goodness of fit: sampling_fit.h (chi-square, 10^5 draws, false-alarm rate
// <= 1e-4 per check, about 1e-3 for this file; seeds are fixed). The vocab-32000
// fit is in test_sampler_statistics_large.cpp (label slow).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sampling_fit.h"

using namespace gb;
using namespace gbtest::sampling;

namespace {
const std::vector<TokenId> kHistory = {3, 7, 7, 12, 3, 50, 51, 52, 3, 50, 51};
}  // namespace

GB_TEST(plain_softmax_matches_independent_reference) {
  // The distribution itself against a softmax computed here, then the draws.
  const auto logits = test_logits();
  SamplerSettings s = all_off();
  s.temperature = 0.7f;
  s.order = {SamplerStage::Temperature};
  SamplerChain chain(s);
  auto dist = chain.distribution(logits, {});
  QVERIFY(dist.ok());
  double z = 0.0;
  for (float l : logits) z += std::exp(l / 0.7);
  for (size_t i = 0; i < logits.size(); ++i)
    QVERIFY(std::fabs((*dist)[i] - std::exp(logits[i] / 0.7) / z) < 1e-6);
  GB_EXPECT_FIT(all_off(), logits, {}, 1);
  GB_EXPECT_FIT(s, logits, {}, 2);
}

GB_TEST(each_truncation_stage_fits) {
  const auto logits = test_logits();
  SamplerSettings k = only(SamplerStage::TopK);
  k.top_k = 10;
  GB_EXPECT_FIT(k, logits, {}, 3);
  SamplerSettings p = only(SamplerStage::TopP);
  p.top_p = 0.8f;
  GB_EXPECT_FIT(p, logits, {}, 4);
  SamplerSettings m = only(SamplerStage::MinP);
  m.min_p = 0.05f;
  GB_EXPECT_FIT(m, logits, {}, 5);
  SamplerSettings t = only(SamplerStage::TypicalP);
  t.typical_p = 0.7f;
  GB_EXPECT_FIT(t, logits, {}, 6);
}

GB_TEST(history_stages_and_bias_fit) {
  const auto logits = test_logits();
  SamplerSettings pen = only(SamplerStage::Penalties);
  pen.repeat_penalty = 1.3f;
  pen.presence_penalty = 0.4f;
  pen.frequency_penalty = 0.2f;
  GB_EXPECT_FIT(pen, logits, kHistory, 7);
  SamplerSettings dry = only(SamplerStage::Dry);
  dry.dry.multiplier = 0.8f;
  GB_EXPECT_FIT(dry, logits, kHistory, 8);
  SamplerSettings bias = only(SamplerStage::LogitBias);
  bias.logit_bias = {{0, -INFINITY}, {1, 2.0f}, {2, -1.0f}, {40, -INFINITY}, {41, -INFINITY}};
  GB_EXPECT_FIT(bias, logits, {}, 9);  // also: ids 0, 40, 41 never drawn
}

GB_TEST(xtc_mixture_fits) {
  // XTC fires on half the tokens; the draws must follow the 50/50 mixture.
  const auto logits = test_logits();
  SamplerSettings x = only(SamplerStage::Xtc);
  x.xtc.probability = 0.5f;
  x.xtc.threshold = 0.02f;
  GB_EXPECT_FIT(x, logits, {}, 10);
  x.xtc.probability = 1.0f;  // always fires: the top choices are never drawn
  GB_EXPECT_FIT(x, logits, {}, 11);
}

GB_TEST(whole_chains_fit) {
  const auto logits = test_logits();
  SamplerSettings d;  // library defaults: top_k 40, top_p 0.95, min_p 0.05, T 1
  d.logit_bias = {{5, -INFINITY}};
  d.repeat_penalty = 1.1f;
  GB_EXPECT_FIT(d, logits, kHistory, 12);

  SamplerSettings full;
  full.temperature = 1.3f;
  full.top_k = 60;
  full.top_p = 0.9f;
  full.min_p = 0.02f;
  full.typical_p = 0.95f;
  full.repeat_penalty = 1.2f;
  full.dry.multiplier = 0.8f;
  full.xtc.probability = 0.3f;
  full.xtc.threshold = 0.05f;
  full.logit_bias = {{9, -INFINITY}, {10, 1.5f}};
  GB_EXPECT_FIT(full, logits, kHistory, 13);
  auto reordered = parse_sampler_order("temperature,logit_bias,min_p,xtc,top_k,penalties,dry");
  QVERIFY(reordered.ok());
  full.order = reordered.value();
  GB_EXPECT_FIT(full, logits, kHistory, 14);
}

GB_TEST(fit_check_detects_a_wrong_distribution) {
  // The checker has power: draws at T = 1 against the distribution of T = 1.1
  // (probabilities differ by a few percent) must be rejected.
  const auto logits = test_logits();
  SamplerSettings drawn = all_off();
  drawn.order = {SamplerStage::Temperature};
  SamplerSettings wrong = drawn;
  wrong.temperature = 1.1f;
  QVERIFY(!check_fit(drawn, logits, {}, 16, &wrong).empty());
  // And a removed token that is drawn is reported: reference bans token argmax.
  SamplerSettings banned = only(SamplerStage::LogitBias);
  banned.logit_bias = {{0, -INFINITY}};
  const std::string msg = check_fit(all_off(), logits, {}, 17, &banned);
  QVERIFY2(msg.find("probability 0 but was drawn") != std::string::npos, msg.c_str());
}

GB_TEST(temperature_to_zero_is_greedy) {
  // Distinct logits, gap to the runner-up >= 0.01: at T = 1e-4 its weight is
  // <= exp(-0.01 / 1e-4) = exp(-100) ~ 4e-44, never drawn; at T = 0 by definition.
  const auto logits = test_logits();
  TokenId argmax = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(argmax)]) argmax = static_cast<TokenId>(i);
  float runner_up = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i)
    if (static_cast<TokenId>(i) != argmax) runner_up = std::max(runner_up, logits[i]);
  QVERIFY(logits[static_cast<size_t>(argmax)] - runner_up >= 0.01f);
  for (float t : {0.0f, 1e-4f}) {
    SamplerSettings s;  // full default chain, temperature last
    s.temperature = t;
    SamplerChain chain(s);
    SamplerRng rng(77);
    for (int n = 0; n < 2000; ++n) {
      auto tok = chain.sample(logits, {}, rng);
      QVERIFY(tok.ok());
      QCOMPARE(tok->id, argmax);
    }
  }
  // Greedy tie rule: equal maxima -> the lower id.
  SamplerSettings g = all_off();
  g.temperature = 0.0f;
  g.order = {SamplerStage::Temperature};
  SamplerChain chain(g);
  SamplerRng rng(1);
  for (int n = 0; n < 100; ++n) {
    auto tok = chain.sample(std::vector<float>{1.0f, 3.0f, 2.0f, 3.0f}, {}, rng);
    QVERIFY(tok.ok());
    QCOMPARE(tok->id, 1);
  }
}

GB_TEST(rng_uniforms_are_uniform) {
  // 10 equal bins, 10^5 draws per lane, same chi-square rule (df 9).
  SamplerRng rng(12345);
  for (uint32_t lane : {SamplerRng::kPickLane, SamplerRng::kXtcLane}) {
    std::vector<int> bins(10, 0);
    for (uint64_t c = 0; c < static_cast<uint64_t>(kNumDraws); ++c) {
      const double u = rng.uniform_at(c, lane);
      QVERIFY(u >= 0.0 && u < 1.0);
      ++bins[static_cast<size_t>(u * 10)];
    }
    double stat = 0.0;
    for (int b : bins) stat += (b - kNumDraws / 10.0) * (b - kNumDraws / 10.0) / (kNumDraws / 10.0);
    QVERIFY2(stat < chi_square_quantile_1e4(9), std::to_string(stat).c_str());
  }
}
