// Verifier math on hand-made distributions (vocab 8), the spec parser, the
// n-gram lookup and the adaptive K: no model needed.
//
// The distribution checks use 10^5 seeded trials each and require both
// chi-square below its 1e-4 quantile and total variation < 0.01 against the
// target distribution p, which is written out by hand (not computed by the
// code under test).
#include <random>

#include "gb_test.h"
#include "spec_fit.h"
#include "speculative/adaptive_k.h"
#include "speculative/ngram_proposer.h"
#include "speculative/speculative_config.h"
#include "speculative/verifier.h"

namespace {

constexpr int kTrials = 100000;

using Row = std::vector<double>;

// p and q rows for the tests: a peaked p, and q of several shapes.
const Row kP = {0.30, 0.20, 0.15, 0.10, 0.10, 0.08, 0.05, 0.02};
const Row kQFlat = {0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125};
const Row kQSkewed = {0.02, 0.05, 0.08, 0.10, 0.10, 0.15, 0.20, 0.30};  // reversed p
const Row kQDisjoint = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5};         // mostly where p is small

int draw(const Row& r, double u) {
  double c = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    c += r[i];
    if (u < c) return static_cast<int>(i);
  }
  return static_cast<int>(r.size()) - 1;
}

// One-token drafts from q (empty = deterministic token `fixed`), verified
// against p: the emitted first token must be distributed as p.
std::string first_token_fit(const Row& q, int fixed, double* tv_out) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::vector<long> counts(8, 0);
  for (int t = 0; t < kTrials; ++t) {
    const int d = q.empty() ? fixed : draw(q, uni(rng));
    const gb::TokenId drafted[1] = {d};
    const Row qs[1] = {q};
    const double ua[1] = {uni(rng)};
    const double uf[2] = {uni(rng), uni(rng)};
    gb::VerifyInput in;
    in.drafted = drafted;
    in.q = qs;
    in.u_accept = ua;
    in.u_final = uf;
    in.p = [](int32_t) -> gb::Result<Row> { return kP; };
    auto res = gb::verify_draft(in);
    if (!res) return res.error().message;
    ++counts[static_cast<size_t>(res->num_accepted == 1 ? d : res->next)];
  }
  *tv_out = spectest::total_variation(kP, counts);
  return spectest::check_fit(kP, counts);
}

}  // namespace

GB_TEST(sampled_first_token_matches_p_for_every_q_shape) {
  struct Case { const char* name; Row q; int fixed; };
  const Case cases[] = {{"q = p", kP, -1}, {"flat q", kQFlat, -1}, {"reversed q", kQSkewed, -1},
                        {"q mostly outside p", kQDisjoint, -1}, {"one-hot q at the mode", {}, 0},
                        {"one-hot q at the rarest token", {}, 7}};
  for (const Case& c : cases) {
    double tv = 1;
    const std::string fit = first_token_fit(c.q, c.fixed, &tv);
    QVERIFY2(fit.empty(), (std::string(c.name) + ": " + fit).c_str());
    QVERIFY2(tv < 0.01, (std::string(c.name) + ": total variation " + std::to_string(tv)).c_str());
  }
}

// K = 3 drafts from a Markov drafter q(x | prev) against a Markov target
// p(x | prev); the first two emitted tokens (accepted, resampled or bonus, in
// any mix) must follow the target's joint p(x1) p(x2 | x1) -- written out as
// products of the hand-made rows.
GB_TEST(sampled_two_token_joint_matches_target_chain) {
  auto p_row = [](int prev) {  // the target: kP rotated by prev
    Row r(8);
    for (int i = 0; i < 8; ++i) r[static_cast<size_t>((i + prev) % 8)] = kP[static_cast<size_t>(i)];
    return r;
  };
  auto q_row = [](int prev) {  // the drafter: kQSkewed rotated by 3 * prev
    Row r(8);
    for (int i = 0; i < 8; ++i) r[static_cast<size_t>((i + 3 * prev) % 8)] = kQSkewed[static_cast<size_t>(i)];
    return r;
  };
  const int start = 2;  // the token before the draft
  std::vector<double> joint(64);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      joint[static_cast<size_t>(a * 8 + b)] = p_row(start)[static_cast<size_t>(a)] * p_row(a)[static_cast<size_t>(b)];

  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::vector<long> counts(64, 0);
  long num_bonus = 0, num_resampled = 0;
  for (int t = 0; t < kTrials; ++t) {
    std::vector<int> emitted;
    int prev = start;
    while (emitted.size() < 2) {
      // One speculative round of K = 3 from `prev`.
      std::vector<gb::TokenId> d;
      std::vector<Row> qs;
      int x = prev;
      for (int i = 0; i < 3; ++i) {
        qs.push_back(q_row(x));
        x = draw(qs.back(), uni(rng));
        d.push_back(x);
      }
      std::vector<double> ua(3), uf(4);
      for (double& u : ua) u = uni(rng);
      for (double& u : uf) u = uni(rng);
      gb::VerifyInput in;
      in.drafted = d;
      in.q = qs;
      in.u_accept = ua;
      in.u_final = uf;
      in.p = [&](int32_t i) -> gb::Result<Row> { return p_row(i == 0 ? prev : d[static_cast<size_t>(i - 1)]); };
      auto res = gb::verify_draft(in);
      QVERIFY(res.ok());
      for (int i = 0; i < res->num_accepted; ++i) emitted.push_back(d[static_cast<size_t>(i)]);
      emitted.push_back(res->next);
      (res->bonus ? num_bonus : num_resampled) += 1;
      prev = emitted.back();
    }
    ++counts[static_cast<size_t>(emitted[0] * 8 + emitted[1])];
  }
  QVERIFY2(num_bonus > 1000 && num_resampled > 1000, "both the bonus and the resample path must be exercised");
  const std::string fit = spectest::check_fit(joint, counts);
  QVERIFY2(fit.empty(), fit.c_str());
  const double tv = spectest::total_variation(joint, counts);
  QVERIFY2(tv < 0.01, ("total variation " + std::to_string(tv)).c_str());
}

GB_TEST(greedy_accepts_exactly_the_argmax_prefix) {
  // p one-hot (temperature 0): drafts 5, 2, 7 against argmaxes 5, 2, 1, 4.
  const int argmax[4] = {5, 2, 1, 4};
  const gb::TokenId d[3] = {5, 2, 7};
  const Row qs[3] = {{}, {}, {}};
  const double ua[3] = {0.999999, 0.999999, 0.0};  // any u: ratios are exactly 1 or 0
  const double uf[4] = {0.5, 0.5, 0.5, 0.5};
  gb::VerifyInput in;
  in.drafted = d;
  in.q = qs;
  in.u_accept = ua;
  in.u_final = uf;
  in.p = [&](int32_t i) -> gb::Result<Row> {
    Row r(8, 0.0);
    r[static_cast<size_t>(argmax[i])] = 1.0;
    return r;
  };
  auto res = gb::verify_draft(in);
  QVERIFY(res.ok());
  QCOMPARE(res->num_accepted, 2);
  QVERIFY(res->rejected.has_value() && *res->rejected == 7);
  QCOMPARE(res->next, 1);  // the target's own argmax at the rejected position
  QVERIFY(!res->bonus);
  // All accepted: the bonus is the argmax after the last draft.
  const gb::TokenId all[3] = {5, 2, 1};
  in.drafted = all;
  auto res2 = gb::verify_draft(in);
  QVERIFY(res2.ok());
  QCOMPARE(res2->num_accepted, 3);
  QVERIFY(res2->bonus);
  QCOMPARE(res2->next, 4);
}

GB_TEST(residual_is_normalised_positive_part) {
  // p - q = (0.28, 0.15, 0.07, 0, 0, -0.07, -0.15, -0.28): positive mass 0.5.
  const Row r = gb::residual_distribution(kP, kQSkewed, 0);
  const Row want = {0.56, 0.30, 0.14, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < 8; ++i) QVERIFY2(std::abs(r[i] - want[i]) < 1e-12, std::to_string(i).c_str());
  // One-hot q at token 0: p without token 0, renormalised (0.7 left).
  const Row r1 = gb::residual_distribution(kP, {}, 0);
  QCOMPARE(r1[0], 0.0);
  QVERIFY(std::abs(r1[1] - 0.20 / 0.70) < 1e-12);
}

GB_TEST(parse_speculative_spec_forms_and_errors) {
  auto a = gb::parse_speculative_spec("ngram");
  QVERIFY(a.ok());
  QVERIFY(a->kind == gb::DrafterKind::Ngram);
  QCOMPARE(a->ngram_n, 3);
  QCOMPARE(a->k, 4);
  auto b = gb::parse_speculative_spec("ngram:n=2,k=6");
  QVERIFY(b.ok());
  QCOMPARE(b->ngram_n, 2);
  QCOMPARE(b->k, 6);
  auto c = gb::parse_speculative_spec("draft:/models/a:b/draft.gguf:k=3");
  QVERIFY(c.ok());
  QVERIFY(c->kind == gb::DrafterKind::DraftModel);
  QCOMPARE(c->draft_path, std::string("/models/a:b/draft.gguf"));
  QCOMPARE(c->k, 3);
  auto d = gb::parse_speculative_spec("draft:x.bin");
  QVERIFY(d.ok());
  QCOMPARE(d->draft_path, std::string("x.bin"));
  auto e = gb::parse_speculative_spec("self:3:k=5,k_max=12");
  QVERIFY(e.ok());
  QVERIFY(e->kind == gb::DrafterKind::SelfDraft);
  QCOMPARE(e->self_layers, 3);
  QCOMPARE(e->k, 5);
  QCOMPARE(e->k_max, 12);
  auto f = gb::parse_speculative_spec("k=20");  // k above the default k_max widens it
  QVERIFY(!f.ok());
  QVERIFY(gb::parse_speculative_spec("ngram:k=20")->k_max == 20);
  const char* bad[] = {"medusa", "draft", "draft:", "self", "self:x", "self:0", "ngram:n=0", "ngram:q=1",
                       "self:2:n=3", "ngram:k=abc", "ngram:k=0", "ngram:k_min=5,k_max=2"};
  for (const char* s : bad) {
    auto r = gb::parse_speculative_spec(s);
    QVERIFY2(!r.ok(), s);
    QVERIFY2(r.error().message.find("--speculative") != std::string::npos, s);
  }
}

GB_TEST(ngram_lookup_proposes_what_followed_the_latest_match) {
  // ... 7 8 9 4 ... 7 8 9 5 ... 7 8 | 9 ?  -> the latest "7 8 9" was followed by 5 6.
  const std::vector<gb::TokenId> t = {1, 7, 8, 9, 4, 4, 7, 8, 9, 5, 6, 2, 7, 8, 9};
  QVERIFY((gb::NgramProposer::lookup(t, 3, 2) == std::vector<gb::TokenId>{5, 6}));
  QVERIFY((gb::NgramProposer::lookup(t, 3, 8) == std::vector<gb::TokenId>{5, 6, 2, 7, 8, 9}));
  // No 3- or 2-gram match: falls back to the last token alone (3 after 3).
  const std::vector<gb::TokenId> u = {1, 3, 10, 11, 3};
  QVERIFY((gb::NgramProposer::lookup(u, 3, 2) == std::vector<gb::TokenId>{10, 11}));
  const std::vector<gb::TokenId> none = {1, 2, 3, 4};
  QVERIFY(gb::NgramProposer::lookup(none, 3, 4).empty());
}

GB_TEST(adaptive_k_grows_shrinks_and_falls_back) {
  gb::AdaptiveK k(4, 1, 6, true, /*timing=*/false);
  QCOMPARE(k.next_k(), 4);
  k.on_verified(4, 4, 1.0);
  QCOMPARE(k.next_k(), 5);
  k.on_verified(5, 1, 1.0);  // rejected at position 2 -> min(k - 1, a + 1) = 2
  QCOMPARE(k.next_k(), 2);
  // Always rejected: k reaches k_min, then after enough verifications the
  // request decodes plainly for the cooldown.
  for (int i = 0; i < 20 && k.next_k() > 0; ++i) k.on_verified(k.next_k(), 0, 1.0);
  QCOMPARE(k.next_k(), 0);
  QCOMPARE(k.num_fallbacks(), 1);
  for (int i = 0; i < gb::AdaptiveK::kMinCooldown; ++i) k.on_plain(1.0);
  QVERIFY(k.next_k() >= 1);  // probing again
  // Timing mode: speculation that costs more per token than plain falls back.
  gb::AdaptiveK t(2, 1, 4, true, /*timing=*/true);
  QCOMPARE(t.next_k(), 0);  // baseline plain steps first
  for (int i = 0; i < gb::AdaptiveK::kBaselineSteps; ++i) t.on_plain(1.0);
  QCOMPARE(t.next_k(), 2);
  for (int i = 0; i < gb::AdaptiveK::kMinVerifications; ++i) t.on_verified(t.k(), 0, 1.5);  // 1.5 ms/token > 1
  QCOMPARE(t.next_k(), 0);
  // A probe that is clearly slower (2 ms/token vs 1 plain, > kClearlySlower) stops
  // after its first verification instead of kMinVerifications.
  gb::AdaptiveK e(2, 1, 4, true, /*timing=*/true);
  for (int i = 0; i < gb::AdaptiveK::kBaselineSteps; ++i) e.on_plain(1.0);
  QCOMPARE(e.next_k(), 2);
  e.on_verified(2, 0, 2.0);
  QCOMPARE(e.next_k(), 0);
  QCOMPARE(e.num_fallbacks(), 1);
  // ... and backs off one cooldown step further: 8 x kMinCooldown plain tokens.
  for (int i = 0; i < gb::AdaptiveK::kMinCooldown; ++i) e.on_plain(1.0);
  QCOMPARE(e.next_k(), 0);
  for (int i = gb::AdaptiveK::kMinCooldown; i < 8 * gb::AdaptiveK::kMinCooldown; ++i) e.on_plain(1.0);
  QVERIFY(e.next_k() > 0);
  // A slower-but-close first verification (1.2x) waits for more evidence.
  gb::AdaptiveK c(2, 1, 4, true, /*timing=*/true);
  for (int i = 0; i < gb::AdaptiveK::kBaselineSteps; ++i) c.on_plain(1.0);
  c.on_verified(2, 0, 1.2);
  QVERIFY(c.next_k() > 0);
}

GB_TEST(parse_speculative_fallback_option) {
  auto timing = gb::parse_speculative_spec("ngram:k=2");
  QVERIFY(timing.ok() && timing->adaptive && timing->timing_fallback);
  auto accept = gb::parse_speculative_spec("self:3:k=2,fallback=accept");
  QVERIFY(accept.ok() && accept->adaptive && !accept->timing_fallback);
  auto off = gb::parse_speculative_spec("ngram:n=2,k=4,fallback=off");
  QVERIFY(off.ok() && !off->adaptive);
  auto bad = gb::parse_speculative_spec("ngram:fallback=sometimes");
  QVERIFY(!bad.ok());
  QVERIFY2(bad.error().message.find("fallback must be timing, accept or off") != std::string::npos,
           bad.error().message.c_str());
}
