// Seeded determinism (same seed -> same tokens; other requests' draws do not
// matter), exact replay from recorded draws, the picker contract shared with
// speculative decoding, and the contents of the per-token record on a
// hand-worked example.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sampling_test_support.h"

using namespace gb;
using namespace gbtest::sampling;

namespace {

// A stand-in model: logits that depend on the whole history, vocab 97.
std::vector<float> fake_logits(const std::vector<TokenId>& history) {
  uint64_t h = 1469598103934665603ULL;
  for (TokenId t : history) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ULL;
  std::vector<float> l(97);
  for (size_t i = 0; i < l.size(); ++i) l[i] = 2.5f * std::sin(0.001f * static_cast<float>(h % 10007) + 0.7f * i);
  return l;
}

SamplerSettings busy_settings(uint64_t seed) {
  SamplerSettings s;
  s.seed = seed;
  s.temperature = 0.9f;
  s.repeat_penalty = 1.1f;
  s.dry.multiplier = 0.8f;
  s.xtc.probability = 0.5f;
  s.xtc.threshold = 0.05f;
  return s;
}

// Generates n tokens; `other` (may be null) draws one token of another request
// between each of ours, as a batch would.
std::vector<TokenId> generate(const SamplerSettings& s, int n, SamplerChain* other = nullptr,
                              SamplerRng* other_rng = nullptr) {
  SamplerChain chain(s);
  SamplerRng rng(s.seed);
  std::vector<TokenId> history = {1, 2, 3};
  std::vector<TokenId> other_history = {4};
  for (int i = 0; i < n; ++i) {
    if (other) {
      auto o = other->sample(fake_logits(other_history), other_history, *other_rng);
      if (o.ok()) other_history.push_back(o->id);
    }
    auto t = chain.sample(fake_logits(history), history, rng);
    if (!t.ok()) return {};
    history.push_back(t->id);
  }
  return {history.begin() + 3, history.end()};
}

}  // namespace

GB_TEST(same_seed_same_tokens) {
  const auto a = generate(busy_settings(42), 200);
  const auto b = generate(busy_settings(42), 200);
  QCOMPARE(a.size(), size_t{200});
  QVERIFY(a == b);
  const auto c = generate(busy_settings(43), 200);
  QVERIFY(a != c);  // a different seed gives a different stream
}

GB_TEST(other_requests_do_not_change_a_request) {
  const auto alone = generate(busy_settings(7), 150);
  SamplerSettings other_settings = busy_settings(999);
  other_settings.top_k = 5;
  SamplerChain other(other_settings);
  SamplerRng other_rng(999);
  const auto batched = generate(busy_settings(7), 150, &other, &other_rng);
  QVERIFY(alone == batched);
}

GB_TEST(record_replays_exactly) {
  SamplerSettings s = busy_settings(5);
  SamplerChain chain(s);
  SamplerRng rng(5);
  std::vector<TokenId> history = {1, 2, 3};
  for (int i = 0; i < 50; ++i) {
    TokenRecord rec;
    const auto logits = fake_logits(history);
    auto t = chain.sample(logits, history, rng, &rec);
    QVERIFY(t.ok());
    QCOMPARE(rec.rng_counter, static_cast<uint64_t>(i));
    QCOMPARE(rec.draw, SamplerRng(5).uniform_at(static_cast<uint64_t>(i), SamplerRng::kPickLane));
    QCOMPARE(rec.xtc_draw, SamplerRng(5).uniform_at(static_cast<uint64_t>(i), SamplerRng::kXtcLane));
    // A fresh chain handed the recorded draws picks the same token.
    SamplerChain replay(s);
    auto r = replay.sample_with_draws(logits, history, rec.draw, rec.xtc_draw);
    QVERIFY(r.ok());
    QCOMPARE(r->id, t->id);
    QCOMPARE(rec.chosen, t->id);
    history.push_back(t->id);
  }
}

GB_TEST(picker_matches_distribution_inverse_cdf) {
  // Speculative decoding relies on: sample with uniform u == inverse CDF (id order)
  // of distribution() at u. Checked for 2000 evenly spread u on a chain without XTC.
  SamplerSettings s;
  s.temperature = 0.8f;
  s.top_k = 30;
  s.top_p = 0.9f;
  const std::vector<TokenId> history = {9, 9};
  const auto logits = fake_logits(history);
  SamplerChain chain(s);
  auto dist = chain.distribution(logits, history);
  QVERIFY(dist.ok());
  for (int i = 0; i < 2000; ++i) {
    const double u = (i + 0.5) / 2000.0;
    auto t = chain.sample_with_draws(logits, history, u, 0.0);
    QVERIFY(t.ok());
    QCOMPARE(t->id, pick_from_distribution(*dist, u));
  }
  // Hand example of the picker itself: probs (0, 0.25, 0, 0.5, 0.25).
  const std::vector<double> p = {0.0, 0.25, 0.0, 0.5, 0.25};
  QCOMPARE(pick_from_distribution(p, 0.0), 1);
  QCOMPARE(pick_from_distribution(p, 0.2499), 1);
  QCOMPARE(pick_from_distribution(p, 0.25), 3);  // cumulative must EXCEED u
  QCOMPARE(pick_from_distribution(p, 0.7499), 3);
  QCOMPARE(pick_from_distribution(p, 0.75), 4);
  QCOMPARE(pick_from_distribution(p, 0.999999), 4);
}

GB_TEST(record_worked_example) {
  // p = (0.1, 0.5, 0.3, 0.1), order top_k(2) -> temperature(0.5), top_n_record 3.
  //   top by raw logit: id1 (0.5), id2 (0.3), then ids 0 and 3 tie -> id 0.
  //   after top_k: id1 0.5/0.8 = 0.625, id2 0.375, id0 removed by stage 0.
  //   after T = 0.5 (p^2 renormalized): 0.25/0.34 = 0.735294, 0.09/0.34 = 0.264706.
  //   entropy before: -(0.5 ln 0.5 + 0.3 ln 0.3 + 2 * 0.1 ln 0.1) = 1.168282
  //   entropy after: -(0.735294 ln 0.735294 + 0.264706 ln 0.264706) = 0.577922
  //   picker, id order: id1 covers [0, 0.735294), id2 the rest.
  SamplerSettings s = all_off();
  s.top_k = 2;
  s.temperature = 0.5f;
  s.order = {SamplerStage::TopK, SamplerStage::Temperature};
  s.top_n_record = 3;
  SamplerChain chain(s);
  const auto logits = logits_from_probs({0.1, 0.5, 0.3, 0.1});
  TokenRecord rec;
  auto t = chain.sample_with_draws(logits, {}, 0.9, 0.0, &rec);
  QVERIFY(t.ok());
  auto near = [](double a, double b) { return std::fabs(a - b) < 1e-5; };
  QCOMPARE(rec.stages.size(), size_t{2});
  QCOMPARE(rec.num_candidates_before, 4);
  QCOMPARE(rec.num_candidates_after_stage, (std::vector<int32_t>{2, 2}));
  QCOMPARE(rec.top.size(), size_t{3});
  QCOMPARE(rec.top[0].id, 1);
  QCOMPARE(rec.top[1].id, 2);
  QCOMPARE(rec.top[2].id, 0);
  QVERIFY(near(rec.top[0].prob_before, 0.5) && near(rec.top[1].prob_before, 0.3) &&
           near(rec.top[2].prob_before, 0.1));
  QVERIFY(near(rec.top[0].prob_after_stage[0], 0.625) && near(rec.top[1].prob_after_stage[0], 0.375));
  QVERIFY(near(rec.top[0].prob_after_stage[1], 0.735294) && near(rec.top[1].prob_after_stage[1], 0.264706));
  QCOMPARE(rec.top[0].removed_by_stage, -1);
  QCOMPARE(rec.top[2].removed_by_stage, 0);
  QCOMPARE(rec.top[2].prob_after_stage[0], 0.0f);
  QCOMPARE(rec.top[2].prob_after_stage[1], 0.0f);
  QVERIFY(near(rec.entropy_before, 1.168282));
  QVERIFY(near(rec.entropy_after, 0.577922));
  QCOMPARE(rec.chosen, 2);  // u = 0.9 > 0.735294
  QCOMPARE(rec.chosen_rank, 1);
  QVERIFY(near(rec.chosen_prob, 0.264706));
  QVERIFY(near(rec.chosen_prob_before, 0.3));
  QCOMPARE(rec.draw, 0.9);

  // u = 0.5 picks id 1, rank 0; an inactive stage copies the previous column.
  s.top_k = 0;  // top_k off now: stage 0 inactive, all four survive
  SamplerChain off(s);
  TokenRecord rec2;
  auto t2 = off.sample_with_draws(logits, {}, 0.5, 0.0, &rec2);
  QVERIFY(t2.ok());
  QCOMPARE(rec2.stage_active, (std::vector<uint8_t>{0, 1}));
  QVERIFY(near(rec2.top[0].prob_after_stage[0], 0.5));
  // T = 0.5 on (0.1, 0.5, 0.3, 0.1): squares (0.01, 0.25, 0.09, 0.01) / 0.36.
  QVERIFY(near(rec2.top[0].prob_after_stage[1], 0.25 / 0.36));
  QCOMPARE(rec2.chosen, 1);  // id order: id0 covers [0, 0.0278), id1 up to 0.722
  QCOMPARE(rec2.chosen_rank, 0);
}

GB_TEST(record_on_large_vocab_is_consistent) {
  // Vocab 32000 through the default chain: top-N sorted, each column's
  // probabilities within [0, 1] and summing to <= 1, removed entries zero after removal.
  std::vector<float> logits(32000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 4.0f * std::sin(0.013f * static_cast<float>(i * i % 7919));
  SamplerSettings s;
  SamplerChain chain(s);
  SamplerRng rng(3);
  TokenRecord rec;
  auto t = chain.sample(logits, {}, rng, &rec);
  QVERIFY(t.ok());
  QCOMPARE(rec.top.size(), size_t{20});
  for (size_t k = 1; k < rec.top.size(); ++k) QVERIFY(rec.top[k - 1].logit >= rec.top[k].logit);
  for (size_t st = 0; st < rec.stages.size(); ++st) {
    double sum = 0.0;
    for (const auto& c : rec.top) {
      QVERIFY(c.prob_after_stage[st] >= 0.0f && c.prob_after_stage[st] <= 1.0f);
      if (c.removed_by_stage >= 0 && static_cast<size_t>(c.removed_by_stage) <= st)
        QCOMPARE(c.prob_after_stage[st], 0.0f);
      sum += c.prob_after_stage[st];
    }
    QVERIFY(sum <= 1.0 + 1e-5);
  }
  QVERIFY(rec.chosen_rank >= 0 && rec.chosen_rank < 40);  // top_k 40 bounds the rank
}

// The vectorised record (exp_sums, skipping top-N selection, rank from the top
// list) against a direct double-precision computation at vocabulary 32,000:
// ids and ranks exactly, probabilities within 1e-6 relative, entropies within
// 1e-5 relative. One row with every logit finite (a dense set: the stage column
// is read by id) and one with -inf logits (the slot pass), each with an active
// logit-bias stage over the whole vocabulary and the default truncation after it.
GB_TEST(record_matches_direct_computation_at_vocab_32000) {
  for (const bool with_banned : {false, true}) {
    std::vector<float> l(32000);
    uint64_t x = with_banned ? 77 : 5;
    for (float& v : l) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      v = 3.0f * static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53 - 0.5) * 2.0f;
    }
    l[123] += 9.0f;
    l[31999] += 8.5f;
    l[4000] = l[4001];  // a tie: the lower id ranks first
    if (with_banned)
      for (size_t i = 0; i < l.size(); i += 97) l[i] = -INFINITY;
    SamplerSettings s;  // defaults: top_k 40, top_p 0.95, min_p 0.05, T 1
    s.logit_bias = {{7, 2.0f}, {4001, 0.5f}};
    s.seed = 3;
    SamplerChain chain(s);
    SamplerRng rng(3);
    TokenRecord rec;
    QVERIFY(chain.sample(l, {}, rng, &rec).ok());

    // Direct: softmax statistics in double over the finite logits.
    double m = -INFINITY;
    for (float v : l) m = std::max(m, static_cast<double>(v));
    auto softmax = [&](const std::vector<double>& v, double& log_z, double& entropy) {
      double z = 0.0, w = 0.0;
      for (double d : v)
        if (d != -INFINITY) z += std::exp(d - m), w += std::exp(d - m) * (d - m);
      log_z = std::log(z);
      entropy = log_z - w / z;
    };
    std::vector<double> raw(l.begin(), l.end()), biased = raw;
    for (const auto& [id, b] : s.logit_bias) biased[static_cast<size_t>(id)] += b;
    double log_z = 0, entropy = 0, log_z_biased = 0, entropy_biased = 0;
    softmax(raw, log_z, entropy);
    softmax(biased, log_z_biased, entropy_biased);
    QVERIFY(std::abs(rec.entropy_before - entropy) <= 1e-5 * entropy);

    std::vector<TokenId> order;
    for (TokenId i = 0; i < 32000; ++i)
      if (l[static_cast<size_t>(i)] != -INFINITY) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
      return l[static_cast<size_t>(a)] > l[static_cast<size_t>(b)] ||
             (l[static_cast<size_t>(a)] == l[static_cast<size_t>(b)] && a < b);
    });
    const size_t bias_stage = static_cast<size_t>(
        std::find(rec.stages.begin(), rec.stages.end(), SamplerStage::LogitBias) - rec.stages.begin());
    QVERIFY(bias_stage < rec.stages.size() && rec.stage_active[bias_stage]);
    QCOMPARE(rec.top.size(), size_t{20});
    for (size_t k = 0; k < rec.top.size(); ++k) {
      const CandidateRecord& c = rec.top[k];
      QCOMPARE(c.id, order[k]);
      const double before = std::exp(raw[static_cast<size_t>(c.id)] - m - log_z);
      const double after = std::exp(biased[static_cast<size_t>(c.id)] - m - log_z_biased);
      QVERIFY2(std::abs(c.prob_before - before) <= 1e-6 * before, std::to_string(k).c_str());
      QVERIFY2(std::abs(c.prob_after_stage[bias_stage] - after) <= 1e-6 * after, std::to_string(k).c_str());
    }
    const size_t rank = static_cast<size_t>(std::find(order.begin(), order.end(), rec.chosen) - order.begin());
    QCOMPARE(rec.chosen_rank, static_cast<int32_t>(rank));
  }
  // No stage at all: the sampled distribution is the raw one, over all 32,000
  // tokens (the vectorised entropy_after), so both entropies agree.
  std::vector<float> l(32000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = 2.0f * std::sin(0.37f * static_cast<float>(i));
  SamplerChain chain(all_off());
  SamplerRng rng(1);
  TokenRecord rec;
  QVERIFY(chain.sample(l, {}, rng, &rec).ok());
  double z = 0.0, w = 0.0;
  for (float v : l) z += std::exp(v - 2.0), w += std::exp(v - 2.0) * (v - 2.0);
  const double h = std::log(z) - w / z;
  QVERIFY(std::abs(rec.entropy_after - h) <= 1e-5 * h);
  QVERIFY(std::abs(rec.entropy_before - h) <= 1e-5 * h);
}
