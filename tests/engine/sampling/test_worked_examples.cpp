// Penalties, DRY and XTC on small worked examples whose expected numbers are
// computed by hand in the comments (not taken from our code's output).
#include <cmath>
#include <vector>

#include "sampling/sampler_stages.h"
#include "sampling_test_support.h"

using namespace gb;
using namespace gbtest::sampling;

namespace {

std::vector<double> softmax(const std::vector<double>& l) {
  double z = 0.0;
  for (double x : l) z += std::exp(x);
  std::vector<double> p;
  for (double x : l) p.push_back(std::exp(x) / z);
  return p;
}

bool close_to(const std::vector<double>& a, const std::vector<double>& b, double tol = 1e-6) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > tol) return false;
  return true;
}

// Logits after running DRY alone over zero logits (vocab n): -penalty per token.
std::vector<float> dry_logits(int vocab, const std::vector<TokenId>& history, const DrySettings& dry) {
  CandidateSet set;
  set.reset(std::vector<float>(static_cast<size_t>(vocab), 0.0f));
  (void)apply_dry(set, history, dry);
  std::vector<float> out(static_cast<size_t>(vocab), -INFINITY);
  for (const Candidate& c : set.items) out[static_cast<size_t>(c.id)] = c.logit;
  return out;
}

bool near(float a, float b) { return std::fabs(a - b) < 1e-5f; }

}  // namespace

GB_TEST(penalties_worked_example) {
  // logits  [2.0, -1.0, 0.5, 3.0, -2.0, 1.0], history [0, 1, 1, 3, 5, 0, 1],
  // repeat 2, frequency 0.1, presence 0.3.
  // penalty_last_n = 5 -> window [1, 3, 5, 0, 1]: counts 0:1, 1:2, 3:1, 5:1.
  //   id0:  2.0 / 2 = 1.0,  - (0.1*1 + 0.3) = 0.6
  //   id1: -1.0 * 2 = -2.0, - (0.1*2 + 0.3) = -2.5
  //   id2:  0.5 (not in window)
  //   id3:  3.0 / 2 = 1.5,  - 0.4 = 1.1
  //   id4: -2.0 (not in window)
  //   id5:  1.0 / 2 = 0.5,  - 0.4 = 0.1
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  const std::vector<TokenId> history = {0, 1, 1, 3, 5, 0, 1};
  SamplerSettings s = only(SamplerStage::Penalties);
  s.repeat_penalty = 2.0f;
  s.frequency_penalty = 0.1f;
  s.presence_penalty = 0.3f;
  s.penalty_last_n = 5;
  SamplerChain chain(s);
  auto dist = chain.distribution(logits, history);
  QVERIFY(dist.ok());
  QVERIFY(close_to(*dist, softmax({0.6, -2.5, 0.5, 1.1, -2.0, 0.1})));
  // Whole history (-1): counts 0:2, 1:3, 3:1, 5:1.
  //   id0: 1.0 - (0.2 + 0.3) = 0.5;  id1: -2.0 - (0.3 + 0.3) = -2.6;  id3: 1.1;  id5: 0.1
  s.penalty_last_n = -1;
  SamplerChain whole(s);
  dist = whole.distribution(logits, history);
  QVERIFY(dist.ok());
  QVERIFY(close_to(*dist, softmax({0.5, -2.6, 0.5, 1.1, -2.0, 0.1})));
  // Window 0: no penalty at all.
  s.penalty_last_n = 0;
  SamplerChain none(s);
  dist = none.distribution(logits, history);
  QVERIFY(dist.ok());
  QVERIFY(close_to(*dist, softmax({2.0, -1.0, 0.5, 3.0, -2.0, 1.0})));
}

GB_TEST(dry_worked_example_basic) {
  // multiplier 0.8, base 1.75, allowed_length 2, no breakers.
  // Context [1 2 3 4 9 1 2 3]: the suffix "1 2 3" occurred at positions 0..2,
  // followed by 4. Match length 3 -> penalty on 4 = 0.8 * 1.75^(3-2) = 1.4.
  // No other earlier occurrence of 3, so nothing else moves.
  DrySettings dry;
  dry.multiplier = 0.8f;
  dry.base = 1.75f;
  dry.allowed_length = 2;
  dry.sequence_breaker_ids = {};
  const auto out = dry_logits(12, {1, 2, 3, 4, 9, 1, 2, 3}, dry);
  for (int i = 0; i < 12; ++i) QVERIFY(near(out[static_cast<size_t>(i)], i == 4 ? -1.4f : 0.0f));

  // Context [5 6 5 6 5 6 5]: the last 5 also ends positions 0, 2, 4.
  //   end 4: ctx[0..4] = 5 6 5 6 5 equals the last five tokens -> length 5, next ctx[5] = 6
  //   end 2: length 3, next 6;  end 0: length 1 (< 2, free).
  // Longest for token 6 is 5: penalty 0.8 * 1.75^3 = 0.8 * 5.359375 = 4.2875.
  const auto rep = dry_logits(8, {5, 6, 5, 6, 5, 6, 5}, dry);
  for (int i = 0; i < 8; ++i) QVERIFY(near(rep[static_cast<size_t>(i)], i == 6 ? -4.2875f : 0.0f));
}

GB_TEST(dry_worked_example_breakers_length_window) {
  DrySettings dry;
  dry.multiplier = 0.8f;
  dry.base = 1.75f;
  dry.allowed_length = 2;
  dry.sequence_breaker_ids = {};
  // [9 1 2 3 4 9 1 2 3]: without breakers "9 1 2 3" repeats -> length 4 before 4:
  // 0.8 * 1.75^2 = 2.45.
  const std::vector<TokenId> ctx = {9, 1, 2, 3, 4, 9, 1, 2, 3};
  QVERIFY(near(dry_logits(10, ctx, dry)[4], -2.45f));
  // With 9 as a breaker the match stops at "1 2 3": length 3 -> 1.4.
  dry.sequence_breaker_ids = {9};
  QVERIFY(near(dry_logits(10, ctx, dry)[4], -1.4f));
  // A breaker is never penalized: [1 2 3 7 1 2 3] with breaker 7 -> "1 2 3" was
  // followed by 7, which is exempt: nothing moves.
  dry.sequence_breaker_ids = {7};
  const auto exempt = dry_logits(10, {1, 2, 3, 7, 1, 2, 3}, dry);
  for (float l : exempt) QVERIFY(near(l, 0.0f));
  // allowed_length 4 on the breaker-free case: length 4 -> 0.8 * 1.75^0 = 0.8;
  // allowed_length 5: length 4 is free.
  dry.sequence_breaker_ids = {};
  dry.allowed_length = 4;
  QVERIFY(near(dry_logits(10, ctx, dry)[4], -0.8f));
  dry.allowed_length = 5;
  QVERIFY(near(dry_logits(10, ctx, dry)[4], 0.0f));
  // Window: only the last 4 tokens [9 1 2 3] are searched; 3 occurs nowhere
  // earlier in them, so nothing is penalized.
  dry.allowed_length = 2;
  dry.penalty_last_n = 4;
  const auto windowed = dry_logits(10, ctx, dry);
  for (float l : windowed) QVERIFY(near(l, 0.0f));
}

GB_TEST(xtc_worked_example) {
  // p = (0.4, 0.3, 0.15, 0.1, 0.05), threshold 0.12: ids 0, 1, 2 reach it; all but
  // the least likely of them (id 2) go. Left: (0.15, 0.1, 0.05) / 0.3 =
  // (0.5, 0.33333, 0.16667) on ids 2, 3, 4.
  const auto logits = logits_from_probs({0.4, 0.3, 0.15, 0.1, 0.05});
  SamplerSettings s = only(SamplerStage::Xtc);
  s.xtc.threshold = 0.12f;
  s.xtc.probability = 1.0f;
  SamplerChain always(s);
  auto dist = always.distribution(logits, {});
  QVERIFY(dist.ok());
  QVERIFY(close_to(*dist, {0.0, 0.0, 0.5, 1.0 / 3, 1.0 / 6}));

  // probability 0.5: the marginal is half each:
  //   0.5 * (0.4, 0.3, 0.15, 0.1, 0.05) + 0.5 * (0, 0, 0.5, 0.3333, 0.1667)
  //   = (0.2, 0.15, 0.325, 0.21667, 0.10833).
  s.xtc.probability = 0.5f;
  SamplerChain half(s);
  dist = half.distribution(logits, {});
  QVERIFY(dist.ok());
  QVERIFY(close_to(*dist, {0.2, 0.15, 0.325, 0.1 / 2 + 1.0 / 6, 0.05 / 2 + 1.0 / 12}));
  // It fires when the XTC draw is below the probability: with u_pick = 0.01 the
  // first id in id order with mass is drawn: id 2 when fired, id 0 when not.
  auto fired = half.sample_with_draws(logits, {}, 0.01, 0.49);
  auto not_fired = half.sample_with_draws(logits, {}, 0.01, 0.5);
  QVERIFY(fired.ok() && not_fired.ok());
  QCOMPARE(fired->id, 2);
  QCOMPARE(not_fired->id, 0);

  // threshold 0.35: only id 0 reaches it -> no-op.
  s.xtc.probability = 1.0f;
  s.xtc.threshold = 0.35f;
  SamplerChain lone(s);
  dist = lone.distribution(logits, {});
  QVERIFY(dist.ok());
  QVERIFY(close_to(*dist, {0.4, 0.3, 0.15, 0.1, 0.05}));
  // A protected id (e.g. EOS = 1) among those to remove: XTC leaves the token alone.
  s.xtc.threshold = 0.12f;
  s.xtc.protected_ids = {1};
  SamplerChain guarded(s);
  dist = guarded.distribution(logits, {});
  QVERIFY(dist.ok());
  QVERIFY(close_to(*dist, {0.4, 0.3, 0.15, 0.1, 0.05}));
}

GB_TEST(xtc_tie_rule) {
  // p = (0.3, 0.3, 0.3, 0.1), threshold 0.2: ids 0, 1, 2 tie above it. The survivor
  // is the one ranked last (equal logits: highest id) = 2. Left: (0.3, 0.1) / 0.4
  // = (0.75, 0.25) on ids 2, 3.
  SamplerSettings s = only(SamplerStage::Xtc);
  s.xtc.threshold = 0.2f;
  s.xtc.probability = 1.0f;
  SamplerChain chain(s);
  auto dist = chain.distribution(logits_from_probs({0.3, 0.3, 0.3, 0.1}), {});
  QVERIFY(dist.ok());
  QVERIFY(close_to(*dist, {0.0, 0.0, 0.75, 0.25}));
}

GB_TEST(logit_bias_worked_example) {
  // logits (0, 0, 0): bias id 0 by +ln 2 and again by +ln 1.5 (duplicates add:
  // weight 3), ban id 2. Left: weights (3, 1) -> (0.75, 0.25, 0).
  SamplerSettings s = only(SamplerStage::LogitBias);
  s.logit_bias = {{0, std::log(2.0f)}, {2, -INFINITY}, {0, std::log(1.5f)}};
  SamplerChain chain(s);
  auto dist = chain.distribution(std::vector<float>{0.0f, 0.0f, 0.0f}, {});
  QVERIFY(dist.ok());
  QVERIFY(close_to(*dist, {0.75, 0.25, 0.0}));
}
