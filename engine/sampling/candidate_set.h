// CandidateSet: the working array of one sampling step — the surviving tokens
// and their current logits — that every SamplerChain stage reads and shrinks.
// Stages never allocate vocabulary-sized arrays of their own; they reorder or
// compact this one (the llama.cpp "one candidate array" idea, written afresh).
//
// Layout: items (num_alive) of {id, logit}; order is whatever the last stage
// left (id order after reset, partially sorted after top-k / top-p / typical-p).
// Invariants: every logit is finite (a stage that makes one -inf removes it);
// ids are distinct and in [0, vocab_size).
// Ordering rule used by every stage that ranks tokens: higher logit first, and
// among equal logits the LOWER token id first (CandidateSet::ranks_before). This
// is the tie rule of top-k, top-p, greedy and the recorded ranks.
// Threads: owned by one SamplerChain, used by one thread at a time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "core/ids.h"
#include "cpu/exp_sums.h"

namespace gb {

struct Candidate {
  TokenId id;
  float logit;
};

// The shared ranking as a function object, so std algorithms inline it (a
// function pointer is not inlined and cost ~40% of a vocab-32000 step).
struct RanksBefore {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};

// std::allocator, except that resize() leaves new elements uninitialised
// (Candidate is trivial): reset() then writes the whole vocabulary once
// instead of zeroing it first.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using CandidateVector = std::vector<Candidate, UninitAllocator<Candidate>>;
// The kernels of cpu/exp_sums.h see the array as {int32 id, float logit} pairs:
// reset() writes them (fill_id_logit_pairs), the record's softmax sums and the
// top-k skip read the logits with stride 2 (exp_sums, skip_below).
static_assert(sizeof(Candidate) == 8 && offsetof(Candidate, id) == 0 && offsetof(Candidate, logit) == 4,
              "cpu/exp_sums.h reads and writes the candidate array as {int32 id, float logit} pairs");

struct CandidateSet {
  CandidateVector items;  // (num_alive)
  int32_t vocab_size = 0;
  bool dense = false;  // items[i].id == i for all i (full vocabulary, id order): O(1) lookup

  // Fills items with every token whose raw logit is not -inf, in id order.
  // The caller has already rejected NaN and +inf.
  // One vectorised pass (kernels::fill_id_logit_pairs): a push_back per token
  // was about 27 us at vocabulary 32000 in a loop test, 0.7% of a stories15M step.
  void reset(std::span<const float> logits) {
    vocab_size = static_cast<int32_t>(logits.size());
    items.resize(logits.size());
    const int64_t n = kernels::fill_id_logit_pairs(logits.data(), static_cast<int64_t>(logits.size()),
                                                   reinterpret_cast<float*>(items.data()));
    items.resize(static_cast<size_t>(n));
    dense = items.size() == logits.size();
  }

  size_t size() const { return items.size(); }
  bool empty() const { return items.empty(); }

  static bool ranks_before(const Candidate& a, const Candidate& b) { return RanksBefore{}(a, b); }

  float max_logit() const {
    float m = -INFINITY;
    for (const Candidate& c : items) m = std::max(m, c.logit);
    return m;
  }

  // log(sum exp(logit - shift)), shift normally max_logit(). Each term is a float
  // exp (about 1 ulp, and 3x cheaper than double exp on a vocabulary-sized
  // pass); the sum is accumulated in double.
  double log_sum_exp(float shift) const {
    double z = 0.0;
    for (const Candidate& c : items) z += std::exp(c.logit - shift);
    return std::log(z);
  }

  // Drops candidates whose logit is -inf (a ban or an overflowing penalty),
  // keeping the order of the rest. Returns how many were dropped.
  size_t remove_banned() {
    const size_t before = items.size();
    std::erase_if(items, [](const Candidate& c) { return c.logit == -INFINITY; });
    if (items.size() != before) dense = false;
    return before - items.size();
  }

  // Writes the k best of `items` under RanksBefore into `out`, best first, in one
  // pass with a k-element heap whose front is the worst kept so far. Only a
  // logit >= that front's can rank before it (ties go to the lower id), so the
  // pass skips 8 losers at a time with a vector compare (kernels/cpu/exp_sums.h
  // skip_below): after the first few hundred candidates almost none is kept.
  // Cheaper than nth_element when k << n. candidate_set.cpp.
  static void select_best(std::span<const Candidate> items, size_t k, std::vector<Candidate>& out);

  void sort_by_id() {
    if (!std::is_sorted(items.begin(), items.end(),
                        [](const Candidate& a, const Candidate& b) { return a.id < b.id; }))
      std::sort(items.begin(), items.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  }

  // Calls fn(candidate, list_index) for each candidate whose id is in `ids`
  // (sorted ascending, distinct). Dense sets index directly: O(|ids|); otherwise
  // each candidate is looked up by binary search: O(num_alive * log |ids|).
  template <class Fn>
  void for_each_listed(std::span<const TokenId> ids, Fn&& fn) {
    if (ids.empty()) return;
    if (dense) {
      for (size_t k = 0; k < ids.size(); ++k)
        if (ids[k] >= 0 && ids[k] < vocab_size) fn(items[static_cast<size_t>(ids[k])], k);
      return;
    }
    for (Candidate& c : items) {
      auto it = std::lower_bound(ids.begin(), ids.end(), c.id);
      if (it != ids.end() && *it == c.id) fn(c, static_cast<size_t>(it - ids.begin()));
    }
  }
};

}  // namespace gb
