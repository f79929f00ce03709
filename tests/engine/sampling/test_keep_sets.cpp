// Exact keep-sets of top-k, top-p, min-p and typical-p on hand-made
// distributions of awkward sizes (vocab 1, 2, 111, 32000), including ties.
// Every expected set below is worked out by hand in the comments; none comes
// from running our code. Tie rule under test (candidate_set.h): equal logits
// rank by lower token id first. The last test checks the selection itself
// against std::stable_sort on random sets.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "sampling/candidate_set.h"

#include "sampling_test_support.h"

using namespace gb;
using namespace gbtest::sampling;

namespace {

SamplerSettings top_k(int k) { auto s = only(SamplerStage::TopK); s.top_k = k; return s; }
SamplerSettings top_p(float p) { auto s = only(SamplerStage::TopP); s.top_p = p; return s; }
SamplerSettings min_p(float p) { auto s = only(SamplerStage::MinP); s.min_p = p; return s; }
SamplerSettings typical(float p) { auto s = only(SamplerStage::TypicalP); s.typical_p = p; return s; }

}  // namespace

GB_TEST(top_k_vocab_111_permutation) {
  // logit_i = (7 i) mod 111: a permutation of 0..110. 7^-1 mod 111 = 16 (7*16 = 112),
  // so the value v sits at i = 16 v mod 111: 110 -> 95, 109 -> 79, 108 -> 63,
  // 107 -> 47, 106 -> 31. top_k = 5 keeps exactly those.
  std::vector<float> logits(111);
  for (int i = 0; i < 111; ++i) logits[i] = static_cast<float>((7 * i) % 111);
  GB_EXPECT_KEEP(keep_set(top_k(5), logits), (std::vector<int>{31, 47, 63, 79, 95}));
  GB_EXPECT_KEEP(keep_set(top_k(1), logits), (std::vector<int>{95}));
  GB_EXPECT_KEEP(keep_set(top_k(111), logits), range_ids(0, 110));
  GB_EXPECT_KEEP(keep_set(top_k(500), logits), range_ids(0, 110));
}

GB_TEST(top_k_tiny_vocabularies) {
  GB_EXPECT_KEEP(keep_set(top_k(5), {0.3f}), (std::vector<int>{0}));
  GB_EXPECT_KEEP(keep_set(top_k(1), {0.5f, 2.0f}), (std::vector<int>{1}));
  GB_EXPECT_KEEP(keep_set(top_k(2), {0.5f, 2.0f}), (std::vector<int>{0, 1}));
}

GB_TEST(top_k_vocab_32000_and_ties) {
  std::vector<float> logits(32000, 0.0f);
  logits[31999] = 5.0f;
  logits[17] = 4.0f;
  logits[20000] = 3.0f;
  GB_EXPECT_KEEP(keep_set(top_k(3), logits), (std::vector<int>{17, 20000, 31999}));
  // Tie at the boundary: 3 winners, then 31997 tokens tied at 0 -> lowest ids 0, 1.
  GB_EXPECT_KEEP(keep_set(top_k(5), logits), (std::vector<int>{0, 1, 17, 20000, 31999}));
  // All equal: the k lowest ids.
  GB_EXPECT_KEEP(keep_set(top_k(3), std::vector<float>(32000, 1.5f)), (std::vector<int>{0, 1, 2}));
  // Ties straddling the cut: logits [1, 2, 2, 2, 0], k = 2 -> ids 1 and 2 (not 3).
  GB_EXPECT_KEEP(keep_set(top_k(2), {1, 2, 2, 2, 0}), (std::vector<int>{1, 2}));
}

GB_TEST(top_p_vocab_111) {
  // p: id 50 = 0.5, id 3 = 0.3, id 110 = 0.15, the other 108 share 0.05.
  // Ranked cumulative mass: 0.5, 0.8, 0.95, then +0.05/108 per tail token.
  std::vector<double> p(111, 0.05 / 108);
  p[50] = 0.5;
  p[3] = 0.3;
  p[110] = 0.15;
  const auto logits = logits_from_probs(p);
  GB_EXPECT_KEEP(keep_set(top_p(0.4f), logits), (std::vector<int>{50}));      // 0.5 >= 0.4
  GB_EXPECT_KEEP(keep_set(top_p(0.79f), logits), (std::vector<int>{3, 50}));  // 0.8 >= 0.79
  GB_EXPECT_KEEP(keep_set(top_p(0.81f), logits), (std::vector<int>{3, 50, 110}));
  GB_EXPECT_KEEP(keep_set(top_p(0.95f - 1e-4f), logits), (std::vector<int>{3, 50, 110}));
  // 0.96 needs 0.01 / (0.05/108) = 21.6 -> 22 tail tokens, lowest ids first:
  // {0,1,2,4,...,22} (22 ids); with id 3 that is 0..22.
  std::vector<int> expected = range_ids(0, 22);
  expected.push_back(50);
  expected.push_back(110);
  GB_EXPECT_KEEP(keep_set(top_p(0.96f), logits), expected);
}

GB_TEST(top_p_tiny_vocabularies_and_exact_tie) {
  GB_EXPECT_KEEP(keep_set(top_p(0.1f), {-3.0f}), (std::vector<int>{0}));
  const auto two = logits_from_probs({0.7, 0.3});
  GB_EXPECT_KEEP(keep_set(top_p(0.5f), two), (std::vector<int>{0}));
  GB_EXPECT_KEEP(keep_set(top_p(0.75f), two), (std::vector<int>{0, 1}));
  // Four equal logits: softmax gives exactly 0.25 each; cumulative 0.25, 0.5 >= 0.5
  // so the crossing token is kept and the rest (tied!) go: lowest ids {0, 1}.
  GB_EXPECT_KEEP(keep_set(top_p(0.5f), {2, 2, 2, 2}), (std::vector<int>{0, 1}));
  GB_EXPECT_KEEP(keep_set(top_p(0.51f), {2, 2, 2, 2}), (std::vector<int>{0, 1, 2}));
}

GB_TEST(top_p_vocab_32000_long_tie_tail) {
  // id 7 = 0.4, id 31000 = 0.35, the other 31998 share 0.25 (7.813e-6 each).
  // top_p 0.7: 0.4, 0.75 >= 0.7 -> {7, 31000}.
  // top_p 0.76: needs 0.01 / (0.25/31998) = 1279.92 -> 1280 tied tail tokens, lowest
  // ids first: 0..1280 without 7 (kept anyway) = 1280 ids; plus 31000. This also
  // forces the partial sort past its 64 -> 256 -> 1024 -> 4096 growth steps.
  std::vector<double> p(32000, 0.25 / 31998);
  p[7] = 0.4;
  p[31000] = 0.35;
  const auto logits = logits_from_probs(p);
  GB_EXPECT_KEEP(keep_set(top_p(0.7f), logits), (std::vector<int>{7, 31000}));
  std::vector<int> expected = range_ids(0, 1280);
  expected.push_back(31000);
  GB_EXPECT_KEEP(keep_set(top_p(0.76f), logits), expected);
}

GB_TEST(min_p_vocab_111) {
  // p: id 10 = 0.5 (max), id 20 = 0.2 (ratio 0.4), id 30 = 0.06 (ratio 0.12),
  // 108 others share 0.24 (0.00222 each, ratio 0.0044).
  std::vector<double> p(111, 0.24 / 108);
  p[10] = 0.5;
  p[20] = 0.2;
  p[30] = 0.06;
  const auto logits = logits_from_probs(p);
  GB_EXPECT_KEEP(keep_set(min_p(0.1f), logits), (std::vector<int>{10, 20, 30}));
  GB_EXPECT_KEEP(keep_set(min_p(0.2f), logits), (std::vector<int>{10, 20}));
  GB_EXPECT_KEEP(keep_set(min_p(0.41f), logits), (std::vector<int>{10}));
  GB_EXPECT_KEEP(keep_set(min_p(0.004f), logits), range_ids(0, 110));
}

GB_TEST(min_p_tiny_and_ties_at_max) {
  GB_EXPECT_KEEP(keep_set(min_p(0.9f), {1.0f}), (std::vector<int>{0}));
  const auto two = logits_from_probs({0.2, 0.8});  // ratio 0.25
  GB_EXPECT_KEEP(keep_set(min_p(0.3f), two), (std::vector<int>{1}));
  GB_EXPECT_KEEP(keep_set(min_p(0.2f), two), (std::vector<int>{0, 1}));
  // 32000: ids 5 and 6 tied at the max (logit 0), everything else at -10
  // (ratio e^-10 = 4.5e-5). Ties at the max are always all kept, even at min_p = 1.
  std::vector<float> logits(32000, -10.0f);
  logits[5] = logits[6] = 0.0f;
  GB_EXPECT_KEEP(keep_set(min_p(0.001f), logits), (std::vector<int>{5, 6}));
  GB_EXPECT_KEEP(keep_set(min_p(1.0f), logits), (std::vector<int>{5, 6}));
  GB_EXPECT_KEEP(keep_set(min_p(4e-5f), logits), range_ids(0, 31999));
}

GB_TEST(typical_p_vocab_111) {
  // p: id 100 = 0.6, id 5 = 0.3, 109 others 0.1/109 = 9.174e-4 each.
  // H = -(0.6 ln 0.6 + 0.3 ln 0.3 + 0.1 ln(0.1/109))
  //   = 0.6*0.51083 + 0.3*1.20397 + 0.1*6.99393 = 0.30650 + 0.36119 + 0.69939 = 1.36708.
  // |-ln p - H|: id 5: |1.20397 - 1.36708| = 0.16311; id 100: |0.51083 - 1.36708| = 0.85625;
  // tail: |6.99393 - 1.36708| = 5.62685. Order: 5, 100, tail (ties by id).
  // Cumulative: 0.3, 0.9, then +9.174e-4 per tail token.
  std::vector<double> p(111, 0.1 / 109);
  p[100] = 0.6;
  p[5] = 0.3;
  const auto logits = logits_from_probs(p);
  GB_EXPECT_KEEP(keep_set(typical(0.25f), logits), (std::vector<int>{5}));
  GB_EXPECT_KEEP(keep_set(typical(0.85f), logits), (std::vector<int>{5, 100}));
  // 0.95: 0.05 / 9.174e-4 = 54.5 -> 55 tail tokens, lowest ids: 0..55 without 5.
  std::vector<int> expected = range_ids(0, 55);
  expected.push_back(100);
  GB_EXPECT_KEEP(keep_set(typical(0.95f), logits), expected);
}

GB_TEST(typical_p_tiny_and_32000) {
  GB_EXPECT_KEEP(keep_set(typical(0.2f), {4.0f}), (std::vector<int>{0}));
  // p = (0.9, 0.1): H = 0.9*0.10536 + 0.1*2.30259 = 0.32508; deviations 0.21972, 1.97751.
  const auto two = logits_from_probs({0.9, 0.1});
  GB_EXPECT_KEEP(keep_set(typical(0.5f), two), (std::vector<int>{0}));
  GB_EXPECT_KEEP(keep_set(typical(0.95f), two), (std::vector<int>{0, 1}));
  // The typical token is not always the most likely one: p = (0.05, 0.5, 0.45) ->
  // H = 0.05*2.99573 + 0.5*0.69315 + 0.45*0.79851 = 0.14979 + 0.34657 + 0.35933 = 0.85569;
  // deviations: id0 2.14004, id1 0.16254, id2 0.05718 -> order 2, 1, 0.
  const auto three = logits_from_probs({0.05, 0.5, 0.45});
  GB_EXPECT_KEEP(keep_set(typical(0.4f), three), (std::vector<int>{2}));
  // 32000: id 123 = 0.99, others 0.01/31999. H = 0.99*0.01005 + 0.01*14.97856 = 0.15974;
  // deviations 0.14969 (id 123) vs 14.8188 (tail): typical 0.5 keeps {123}.
  std::vector<double> p(32000, 0.01 / 31999);
  p[123] = 0.99;
  GB_EXPECT_KEEP(keep_set(typical(0.5f), logits_from_probs(p)), (std::vector<int>{123}));
}

GB_TEST(kept_tokens_are_renormalized) {
  // top_k = 2 on p = (0.5, 0.3, 0.2): kept 0.5 and 0.3 -> 0.625 and 0.375.
  SamplerChain chain(top_k(2));
  auto dist = chain.distribution(logits_from_probs({0.5, 0.3, 0.2}), {});
  QVERIFY(dist.ok());
  QVERIFY(std::fabs((*dist)[0] - 0.625) < 1e-6);
  QVERIFY(std::fabs((*dist)[1] - 0.375) < 1e-6);
  QCOMPARE((*dist)[2], 0.0);
}

GB_TEST(chain_order_changes_the_keep_set) {
  // p = (0.4, 0.3, 0.2, 0.1). top_k 3 then top_p 0.6: renormalized (0.444, 0.333, 0.222),
  // cumulative 0.444, 0.778 -> {0, 1}. top_p 0.6 first: 0.4, 0.7 -> {0, 1}, then top_k 3
  // keeps both. With top_p 0.75: k-then-p gives 0.444, 0.778 >= 0.75 -> {0,1};
  // p-then-k gives 0.4, 0.7, 0.9 -> {0,1,2}.
  const auto logits = logits_from_probs({0.4, 0.3, 0.2, 0.1});
  SamplerSettings s = all_off();
  s.top_k = 3;
  s.top_p = 0.75f;
  s.order = {SamplerStage::TopK, SamplerStage::TopP};
  GB_EXPECT_KEEP(keep_set(s, logits), (std::vector<int>{0, 1}));
  s.order = {SamplerStage::TopP, SamplerStage::TopK};
  GB_EXPECT_KEEP(keep_set(s, logits), (std::vector<int>{0, 1, 2}));
}

// CandidateSet::select_best (top-k and the record's top-N) against a full sort
// under the tie rule, order included, on random sets: logits from a few values
// (long runs of ties), ids shuffled so that equal logits do not come in id
// order, sizes around the 8-wide skip and k from 1 past n.
GB_TEST(select_best_equals_sorted_prefix_on_random_sets) {
  std::mt19937 rng(20261202);
  int checked = 0;
  for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{8}, size_t{9}, size_t{31}, size_t{1000}, size_t{32000}}) {
    for (int levels : {1, 3, 50, 100000}) {
      std::vector<Candidate> items(n);
      std::vector<int> ids(n);
      for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int>(i);
      std::shuffle(ids.begin(), ids.end(), rng);
      std::uniform_int_distribution<int> level(0, levels - 1);
      for (size_t i = 0; i < n; ++i) items[i] = {ids[i], static_cast<float>(level(rng)) * 0.25f - 3.0f};
      std::vector<Candidate> sorted = items;
      std::stable_sort(sorted.begin(), sorted.end(), RanksBefore{});
      for (size_t k : {size_t{1}, size_t{2}, size_t{8}, size_t{40}, n - 1, n, n + 5}) {
        if (k == 0) continue;
        std::vector<Candidate> best;
        CandidateSet::select_best(items, k, best);
        const size_t want = std::min(k, n);
        QCOMPARE(best.size(), want);
        for (size_t i = 0; i < want; ++i) {
          QVERIFY2(best[i].id == sorted[i].id && best[i].logit == sorted[i].logit,
                   qPrintable(QStringLiteral("n %1 levels %2 k %3: rank %4 is id %5, the sort says %6")
                                  .arg(n).arg(levels).arg(k).arg(i).arg(best[i].id).arg(sorted[i].id)));
        }
        ++checked;
      }
    }
  }
  QVERIFY(checked > 200);
}
