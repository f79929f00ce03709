// Truncation, bias, XTC and temperature stages; see sampler_stages.h for the
// keep-set rules. Penalties and DRY live in penalty_stages.cpp.
#include "sampling/sampler_stages.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

namespace gb {
namespace {

// Normalized probabilities of the current items, in item order: (num_alive).
void softmax(const CandidateSet& set, std::vector<double>& probs) {
  const float m = set.max_logit();
  probs.resize(set.size());
  double z = 0.0;
  for (size_t i = 0; i < set.size(); ++i) {
    probs[i] = std::exp(set.items[i].logit - m);
    z += probs[i];
  }
  for (double& p : probs) p /= z;
}

// Keeps the shortest prefix of `items` ranked by `before` whose probability mass
// (prob_of(item)) reaches `mass`. Sorts a growing prefix only: 64 items, then x4.
template <class Items, class Before, class ProbOf>
size_t shortest_prefix_with_mass(Items& items, double mass, Before before, ProbOf prob_of) {
  const size_t n = items.size();
  size_t sorted = 0;
  double cumulative = 0.0;
  while (sorted < n) {
    const size_t next = std::min(n, std::max<size_t>(64, sorted * 4));
    // Everything in [sorted, n) ranks after [0, sorted), so sorting the head of
    // the remainder extends the sorted prefix.
    std::partial_sort(items.begin() + static_cast<std::ptrdiff_t>(sorted),
                      items.begin() + static_cast<std::ptrdiff_t>(next), items.end(), before);
    for (size_t i = sorted; i < next; ++i) {
      cumulative += prob_of(items[i]);
      if (cumulative >= mass) return i + 1;
    }
    sorted = next;
  }
  return n;  // rounding kept the total just below `mass`: keep everything
}

}  // namespace

void apply_logit_bias(CandidateSet& set, std::span<const std::pair<TokenId, float>> bias) {
  if (bias.empty()) return;
  // Merge duplicates so for_each_listed sees each id once.
  std::vector<std::pair<TokenId, float>> merged(bias.begin(), bias.end());
  std::sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<TokenId> ids;
  std::vector<float> sums;
  for (const auto& [id, b] : merged) {
    if (!ids.empty() && ids.back() == id) {
      sums.back() += b;
    } else {
      ids.push_back(id);
      sums.push_back(b);
    }
  }
  set.for_each_listed(ids, [&](Candidate& c, size_t k) { c.logit += sums[k]; });
  // A large negative bias can reach -inf by overflow; it is then a ban too.
  set.remove_banned();
}

void apply_top_k(CandidateSet& set, int top_k) {
  if (top_k <= 0 || static_cast<size_t>(top_k) >= set.size()) return;
  const size_t k = static_cast<size_t>(top_k);
  if (k * 16 <= set.size()) {
    // Small k (the common case, e.g. 40 of 32000): one heap pass.
    std::vector<Candidate> best;
    CandidateSet::select_best(set.items, k, best);
    set.items.assign(best.begin(), best.end());  // keeps the vocabulary-sized buffer for the next token
  } else {
    auto kth = set.items.begin() + top_k;
    std::nth_element(set.items.begin(), kth, set.items.end(), RanksBefore{});
    set.items.erase(kth, set.items.end());
  }
  set.dense = false;
}

void apply_top_p(CandidateSet& set, float top_p) {
  if (top_p >= 1.0f || set.size() <= 1) return;
  const float m = set.max_logit();
  const double log_z = set.log_sum_exp(m);
  const size_t keep = shortest_prefix_with_mass(
      set.items, static_cast<double>(top_p), RanksBefore{},
      [&](const Candidate& c) { return std::exp(static_cast<double>(c.logit) - m - log_z); });
  set.items.resize(keep);
  set.dense = false;
}

void apply_min_p(CandidateSet& set, float min_p) {
  if (min_p <= 0.0f || set.size() <= 1) return;
  const float m = set.max_logit();
  // p_i >= min_p * p_max  <=>  l_i - l_max >= ln(min_p): no normalizer, no exp.
  const double log_min_p = std::log(static_cast<double>(min_p));
  const size_t before = set.size();
  std::erase_if(set.items, [&](const Candidate& c) { return static_cast<double>(c.logit) - m < log_min_p; });
  if (set.size() != before) set.dense = false;
}

void apply_typical_p(CandidateSet& set, float typical_p) {
  if (typical_p >= 1.0f || set.size() <= 1) return;
  const float m = set.max_logit();
  const double log_z = set.log_sum_exp(m);
  struct Scored {
    Candidate c;
    double p;
    double deviation;  // |-log p - H|
  };
  std::vector<Scored> scored(set.size());
  double entropy = 0.0;
  for (size_t i = 0; i < set.size(); ++i) {
    const double log_p = static_cast<double>(set.items[i].logit) - m - log_z;
    scored[i] = {set.items[i], std::exp(static_cast<float>(log_p)), -log_p};  // deviation field holds -log p for now
    entropy -= scored[i].p * log_p;
  }
  for (Scored& s : scored) s.deviation = std::fabs(s.deviation - entropy);
  const size_t keep = shortest_prefix_with_mass(
      scored, static_cast<double>(typical_p),
      [](const Scored& a, const Scored& b) {
        return a.deviation < b.deviation || (a.deviation == b.deviation && a.c.id < b.c.id);
      },
      [](const Scored& s) { return s.p; });
  set.items.resize(keep);
  for (size_t i = 0; i < keep; ++i) set.items[i] = scored[i].c;
  set.dense = false;
}

void apply_xtc(CandidateSet& set, const XtcSettings& xtc, bool fire) {
  if (!fire || xtc.probability <= 0.0f || set.size() < 2) return;
  std::vector<double> probs;
  softmax(set, probs);
  // Find the above-threshold tokens and the one of them ranked last (the survivor).
  size_t num_above = 0;
  size_t survivor = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    if (probs[i] < static_cast<double>(xtc.threshold)) continue;
    if (num_above == 0 || CandidateSet::ranks_before(set.items[survivor], set.items[i])) survivor = i;
    ++num_above;
  }
  if (num_above < 2) return;
  for (size_t i = 0; i < set.size(); ++i) {
    if (i == survivor || probs[i] < static_cast<double>(xtc.threshold)) continue;
    const TokenId id = set.items[i].id;
    if (std::find(xtc.protected_ids.begin(), xtc.protected_ids.end(), id) != xtc.protected_ids.end())
      return;  // a protected token (newline, EOS) would go: leave this token's set alone
  }
  for (size_t i = 0; i < set.size(); ++i)
    if (i != survivor && probs[i] >= static_cast<double>(xtc.threshold)) set.items[i].logit = -INFINITY;
  set.remove_banned();
}

void apply_temperature(CandidateSet& set, float temperature) {
  if (temperature == 1.0f || set.empty()) return;
  if (temperature == 0.0f) {
    auto best = std::min_element(set.items.begin(), set.items.end(), RanksBefore{});
    const Candidate keep = *best;
    set.items.assign(1, keep);
    set.dense = false;
    return;
  }
  float max_abs = 0.0f;
  for (const Candidate& c : set.items) max_abs = std::max(max_abs, std::fabs(c.logit));
  if (max_abs <= temperature * (FLT_MAX / 2)) {  // |l / T| stays below FLT_MAX / 2
    for (Candidate& c : set.items) c.logit /= temperature;
    return;
  }
  // A tiny T would overflow l / T. Softmax is shift-invariant, so divide l - max
  // instead: the best token gets 0 and far-behind ones underflow to -inf (p = 0).
  const float m = set.max_logit();
  for (Candidate& c : set.items) c.logit = (c.logit - m) / temperature;
  set.remove_banned();
}

void apply_token_mask(CandidateSet& set, std::span<const uint64_t> mask) {
  if (set.dense) {
    // Id i at index i: walk the mask's set bits and compact forwards (the
    // write index never passes the read index). Cost ~ survivors, no branch
    // per candidate: a JSON position keeps a few dozen of 262,144.
    const size_t n = set.items.size();
    size_t out = 0;
    for (size_t w = 0; w < mask.size() && w * 64 < n; ++w) {
      for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1) {
        const size_t id = w * 64 + static_cast<size_t>(std::countr_zero(bits));
        if (id >= n) break;
        set.items[out++] = set.items[id];
      }
    }
    set.items.resize(out);
    set.dense = out == n;
    return;
  }
  const size_t num_bits = mask.size() * 64;
  std::erase_if(set.items, [&](const Candidate& c) {
    const auto id = static_cast<size_t>(c.id);
    return id >= num_bits || ((mask[id >> 6] >> (id & 63u)) & 1u) == 0;
  });
  set.dense = set.dense && set.items.size() == static_cast<size_t>(set.vocab_size);
}

}  // namespace gb
