// The grammar stage of the sampler chain with a hand-made mask, at an awkward
// vocabulary size (111, not a multiple of 64): masked tokens are never drawn
// over many draws, the distribution is the raw one restricted to the mask and
// renormalized (also after top-k and temperature), the record's allowed mass
// and count are exact, a format puts the stage first unless the order names
// it, and a mask that allows nothing is an error naming the stage.
#include <random>

#include "sampling_test_support.h"

using namespace gb;
using namespace gbtest::sampling;

namespace {

std::vector<uint64_t> mask_of(const std::vector<int>& allowed, size_t vocab) {
  std::vector<uint64_t> m((vocab + 63) / 64, 0);
  for (int id : allowed) m[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  return m;
}

SamplerSettings with_format(SamplerSettings s) {
  s.format = {FormatKind::Gbnf, "root ::= \"x\"\n"};
  return s;
}

}  // namespace

GB_TEST(grammar_stage_restricts_and_renormalizes) {
  constexpr size_t kGrammarVocab = 111;
  std::mt19937 rng(5);
  std::vector<double> p(kGrammarVocab);
  for (double& x : p) x = 0.01 + std::uniform_real_distribution<double>(0, 1)(rng);
  double z = 0;
  for (double x : p) z += x;
  for (double& x : p) x /= z;
  const std::vector<float> logits = logits_from_probs(p);
  const std::vector<int> allowed = {0, 3, 63, 64, 65, 100, 110};
  const std::vector<uint64_t> mask = mask_of(allowed, kGrammarVocab);

  SamplerChain chain(with_format(all_off()));
  QCOMPARE(chain.settings().order.front(), SamplerStage::Grammar);
  chain.set_grammar_mask(mask);
  auto dist = chain.distribution(logits, {});
  QVERIFY(dist.ok());
  double allowed_mass = 0;
  for (int id : allowed) allowed_mass += p[static_cast<size_t>(id)];
  for (size_t i = 0; i < kGrammarVocab; ++i) {
    const bool in = std::find(allowed.begin(), allowed.end(), static_cast<int>(i)) != allowed.end();
    const double want = in ? p[i] / allowed_mass : 0.0;
    QVERIFY2(std::abs((*dist)[i] - want) < 1e-5, std::to_string(i).c_str());
  }

  // Draws never leave the mask; the record says what the stage saw.
  TokenRecord rec;
  for (int k = 0; k < 2000; ++k) {
    auto t = chain.sample_with_draws(logits, {}, (k + 0.5) / 2000.0, 1.0, k == 0 ? &rec : nullptr);
    QVERIFY(t.ok());
    QVERIFY(std::find(allowed.begin(), allowed.end(), t->id) != allowed.end());
  }
  QVERIFY(rec.grammar.has_value());
  QCOMPARE(rec.grammar->num_allowed, static_cast<int32_t>(allowed.size()));
  QVERIFY(std::abs(rec.grammar->mass_allowed - allowed_mass) < 1e-5);
  QCOMPARE(rec.num_candidates_after_stage.front(), static_cast<int32_t>(allowed.size()));

  // After top-k and a temperature: the grammar (first) still decides the support.
  SamplerSettings s = with_format(all_off());
  s.top_k = 3;
  s.temperature = 0.5f;
  s.order = {SamplerStage::TopK, SamplerStage::Temperature};
  SamplerChain topk(s);
  QCOMPARE(topk.settings().order.size(), size_t{3});
  topk.set_grammar_mask(mask);
  auto d2 = topk.distribution(logits, {});
  QVERIFY(d2.ok());
  int support = 0;
  for (size_t i = 0; i < kGrammarVocab; ++i)
    if ((*d2)[i] > 0) {
      ++support;
      QVERIFY(std::find(allowed.begin(), allowed.end(), static_cast<int>(i)) != allowed.end());
    }
  QCOMPARE(support, 3);

  // The order may place the stage itself (last here): then it is not moved.
  SamplerSettings last = with_format(all_off());
  last.order = {SamplerStage::Temperature, SamplerStage::Grammar};
  QCOMPARE(SamplerChain(last).settings().order.back(), SamplerStage::Grammar);
  // Without a format no grammar column appears.
  QVERIFY(SamplerChain(all_off()).settings().order.empty());
}

GB_TEST(grammar_stage_empty_mask_is_an_error_and_no_mask_is_inactive) {
  const std::vector<float> logits(111, 0.0f);
  SamplerChain chain(with_format(all_off()));
  const std::vector<uint64_t> none(2, 0);
  chain.set_grammar_mask(none);
  auto t = chain.sample_with_draws(logits, {}, 0.5, 1.0);
  QVERIFY(!t.ok());
  QVERIFY(t.error().message.find("grammar") != std::string::npos);
  chain.set_grammar_mask({});
  TokenRecord rec;
  auto u = chain.sample_with_draws(logits, {}, 0.5, 1.0, &rec);
  QVERIFY(u.ok());
  QVERIFY(rec.stage_active.front() == 0);
  QVERIFY(!rec.grammar.has_value());
}
