// CandidateSet::select_best (candidate_set.h): top-k selection with a k-element
// heap, skipping 8 losers at a time.
#include "sampling/candidate_set.h"

#include <algorithm>
#include <cstddef>

#include "cpu/exp_sums.h"

namespace gb {

void CandidateSet::select_best(std::span<const Candidate> items, size_t k, std::vector<Candidate>& out) {
  out.clear();
  if (k == 0 || items.empty()) return;
  out.reserve(std::min(k, items.size()));
  const float* logits = &items.data()->logit;
  const auto n = static_cast<int64_t>(items.size());
  int64_t i = 0;
  for (; i < n && out.size() < k; ++i) {
    out.push_back(items[static_cast<size_t>(i)]);
    std::push_heap(out.begin(), out.end(), RanksBefore{});
  }
  while (i < n) {
    // Everything skipped is below the worst kept logit, so ranks after it.
    i = kernels::skip_below(logits, n, 2, i, out.front().logit);
    for (const int64_t end = std::min(i + 8, n); i < end; ++i) {
      const Candidate& c = items[static_cast<size_t>(i)];
      if (!RanksBefore{}(c, out.front())) continue;
      std::pop_heap(out.begin(), out.end(), RanksBefore{});
      out.back() = c;
      std::push_heap(out.begin(), out.end(), RanksBefore{});
    }
  }
  std::sort_heap(out.begin(), out.end(), RanksBefore{});
}

}  // namespace gb
