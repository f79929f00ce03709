#include "speculative/verifier.h"

#include <algorithm>
#include <string>

#include "sampling/sampler_chain.h"

namespace gb {

std::vector<double> residual_distribution(std::span<const double> p, std::span<const double> q, TokenId drafted) {
  std::vector<double> r(p.begin(), p.end());
  if (q.empty()) {
    r[static_cast<size_t>(drafted)] = 0.0;  // max(0, p(d) - 1) = 0
  } else {
    GB_CHECK(q.size() == p.size());
    for (size_t i = 0; i < r.size(); ++i) r[i] = std::max(0.0, p[i] - q[i]);
  }
  double total = 0.0;
  for (double v : r) total += v;
  if (!(total > 0.0)) return std::vector<double>(p.begin(), p.end());
  for (double& v : r) v /= total;
  return r;
}

Result<VerifyResult> verify_draft(const VerifyInput& in) {
  const auto num_draft = static_cast<int32_t>(in.drafted.size());
  GB_CHECK(in.q.size() == in.drafted.size() && in.u_accept.size() == in.drafted.size() &&
           in.u_final.size() == in.drafted.size() + 1);
  VerifyResult out;
  for (int32_t i = 0; i < num_draft; ++i) {
    auto p = in.p(i);
    if (!p) return p.error();
    const TokenId d = in.drafted[static_cast<size_t>(i)];
    GB_CHECK_MSG(d >= 0 && static_cast<size_t>(d) < p->size(), "verify_draft: drafted token outside the vocabulary");
    const std::vector<double>& q_row = in.q[static_cast<size_t>(i)];
    const double pd = (*p)[static_cast<size_t>(d)];
    const double qd = q_row.empty() ? 1.0 : q_row[static_cast<size_t>(d)];
    out.p_of_draft.push_back(static_cast<float>(pd));
    out.q_of_draft.push_back(static_cast<float>(qd));
    // A proposal the drafter gave zero mass can only come from a broken
    // drafter; treating it as ratio 0 keeps the output exact anyway.
    const double ratio = qd > 0.0 ? std::min(1.0, pd / qd) : 0.0;
    if (in.u_accept[static_cast<size_t>(i)] < ratio) {
      ++out.num_accepted;
      continue;
    }
    out.rejected = d;
    const std::vector<double> r = residual_distribution(*p, q_row, d);
    out.next = pick_from_distribution(r, in.u_final[static_cast<size_t>(i)]);
    if (out.next < 0) return make_error("speculative verification: the target distribution is empty");
    return out;
  }
  auto p = in.p(num_draft);
  if (!p) return p.error();
  out.bonus = true;
  out.next = pick_from_distribution(*p, in.u_final[static_cast<size_t>(num_draft)]);
  if (out.next < 0) return make_error("speculative verification: the target distribution is empty");
  return out;
}

}  // namespace gb
