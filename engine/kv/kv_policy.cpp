#include "kv/kv_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace gb {
namespace {
// A slot's rank as the policies compare it: NaN (whatever the kernels gave)
// ranks lowest, so the order stays a strict weak order.
float comparable_rank(float v) { return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v; }

constexpr std::array<KvPolicyRow, 4> kRows{{
    {KvPolicyKind::Full, "full", "keep every token (no budget)", 0, false, false, false, ""},
    {KvPolicyKind::Sink, "sink", "StreamingLLM: the first S tokens and the most recent B - S", 4, true, false, false,
     "outside the recent window"},
    {KvPolicyKind::H2O, "h2o", "heavy hitters: the first S, the most recent R and the most attended", 0, true, false,
     true, "lowest attention mass"},
    {KvPolicyKind::SnapKV, "snapkv", "after the prompt: the prompt tokens its last W queries attend to most", 0, false,
     true, true, "least attended by the prompt's last W tokens"},
}};
}  // namespace

std::span<const KvPolicyRow> kv_policy_rows() { return kRows; }

const KvPolicyRow& kv_policy_row(KvPolicyKind kind) {
  for (const KvPolicyRow& r : kRows)
    if (r.kind == kind) return r;
  GB_CHECK_MSG(false, "kv_policy_row: a policy without a row");
  return kRows[0];
}

const char* kv_policy_name(KvPolicyKind kind) { return kv_policy_row(kind).name; }

Result<KvPolicyKind> kv_policy_from_name(const std::string& name) {
  std::string known;
  for (const KvPolicyRow& r : kRows) {
    if (name == r.name) return r.kind;
    known += known.empty() ? "" : ", ";
    known += r.name;
  }
  return make_error("unknown KV policy '" + name + "' (known: " + known + ")");
}

Result<KvPolicy> resolve_kv_policy(KvPolicy p) {
  const KvPolicyRow& row = kv_policy_row(p.kind);
  if (!p.active()) return KvPolicy{};
  const std::string name = row.name;
  if (p.budget < 1) return make_error("KV policy " + name + " needs a token budget (--kv-budget) of at least 1");
  if (p.sinks < 0) p.sinks = row.default_sinks;
  switch (p.kind) {
    case KvPolicyKind::Sink: p.recent = p.budget - p.sinks; break;
    case KvPolicyKind::H2O: if (p.recent < 0) p.recent = p.budget / 2; break;
    case KvPolicyKind::SnapKV: p.recent = p.window; break;
    case KvPolicyKind::Full: break;
  }
  if (p.kind == KvPolicyKind::SnapKV && (p.window < 1 || p.pool < 1 || p.pool % 2 == 0))
    return make_error("KV policy snapkv needs a window of at least 1 and an odd pooling width (have " +
                      std::to_string(p.window) + ", " + std::to_string(p.pool) + ")");
  if (p.recent < 1 || p.sinks + p.recent > p.budget)
    return make_error("KV policy " + name + ": a budget of " + std::to_string(p.budget) + " tokens cannot hold " +
                      std::to_string(p.sinks) + " sink tokens and a recent window of " + std::to_string(p.recent) +
                      " (need at least one recent token and sinks + recent <= budget)");
  return p;
}

std::string describe_kv_policy(const KvPolicy& p) {
  if (!p.active()) return "full";
  std::string s = std::string(kv_policy_name(p.kind)) + " B=" + std::to_string(p.budget) + " S=" +
                  std::to_string(p.sinks) + " R=" + std::to_string(p.recent);
  if (p.kind == KvPolicyKind::SnapKV) s += " W=" + std::to_string(p.window) + " pool=" + std::to_string(p.pool);
  return s;
}

int32_t kv_policy_chunk_limit(const KvPolicy& p) {
  return kv_policy_row(p.kind).evicts_while_running ? p.recent : 0;
}

std::vector<float> kv_pooled_scores(std::span<const float> scores, int32_t pool) {
  const auto n = static_cast<int32_t>(scores.size());
  const int32_t half = pool / 2;
  std::vector<float> out(scores.size());
  for (int32_t i = 0; i < n; ++i) {
    float m = scores[static_cast<size_t>(i)];
    for (int32_t j = std::max(0, i - half); j <= std::min(n - 1, i + half); ++j) m = std::max(m, scores[static_cast<size_t>(j)]);
    out[static_cast<size_t>(i)] = m;
  }
  return out;
}

std::vector<int32_t> kv_select_kept(const KvPolicy& p, std::span<const int32_t> positions,
                                    std::span<const float> scores, int32_t keep, int32_t end_pos) {
  const auto n = static_cast<int32_t>(positions.size());
  std::vector<int32_t> kept;
  if (keep >= n) {
    for (int32_t i = 0; i < n; ++i) kept.push_back(i);
    return kept;
  }
  if (keep <= 0) return kept;
  const bool ranked = kv_policy_row(p.kind).uses_mass;
  GB_CHECK_MSG(!ranked || scores.size() == positions.size(), "kv_select_kept: one score per slot");
  std::vector<float> rank = p.kind == KvPolicyKind::SnapKV ? kv_pooled_scores(scores, p.pool)
                                                           : std::vector<float>(scores.begin(), scores.end());
  for (float& v : rank) v = comparable_rank(v);
  // Order of preference: sinks (earliest first), the recent window (latest
  // first), then the rest by the policy's rank (later position on ties).
  const auto at = [&](int32_t i) { return positions[static_cast<size_t>(i)]; };
  const auto tier = [&](int32_t i) { return at(i) < p.sinks ? 0 : at(i) >= end_pos - p.recent ? 1 : 2; };
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const int32_t ta = tier(a), tb = tier(b);
    if (ta != tb) return ta < tb;
    if (ta == 0) return at(a) < at(b);
    if (ta == 2 && ranked && rank[static_cast<size_t>(a)] != rank[static_cast<size_t>(b)])
      return rank[static_cast<size_t>(a)] > rank[static_cast<size_t>(b)];
    return at(a) > at(b);
  });
  kept.assign(order.begin(), order.begin() + keep);
  std::sort(kept.begin(), kept.end());
  return kept;
}

int32_t kv_select_victim(const KvPolicy& p, std::span<const int32_t> positions, std::span<const float> scores,
                         int32_t end_pos) {
  const auto n = static_cast<int32_t>(positions.size());
  GB_CHECK_MSG(n >= 1, "kv_select_victim: no slot to drop");
  GB_CHECK_MSG(p.kind != KvPolicyKind::SnapKV, "kv_select_victim: snapkv prunes whole prompts (kv_select_kept)");
  const bool ranked = kv_policy_row(p.kind).uses_mass;
  GB_CHECK_MSG(!ranked || scores.size() == positions.size(), "kv_select_victim: one score per slot");
  // The last in kv_select_kept's order of preference: among the unforced
  // slots the lowest ranked (the earliest on ties); else the oldest of the
  // recent window; else the latest sink.
  int32_t victim = -1, oldest_recent = -1, latest_sink = -1;
  const auto rank = [&](int32_t i) { return ranked ? comparable_rank(scores[static_cast<size_t>(i)]) : 0.0f; };
  for (int32_t i = 0; i < n; ++i) {
    const int32_t q = positions[static_cast<size_t>(i)];
    if (q < p.sinks) {
      if (latest_sink < 0 || q > positions[static_cast<size_t>(latest_sink)]) latest_sink = i;
    } else if (q >= end_pos - p.recent) {
      if (oldest_recent < 0 || q < positions[static_cast<size_t>(oldest_recent)]) oldest_recent = i;
    } else if (victim < 0 || rank(i) < rank(victim) ||
               (rank(i) == rank(victim) && q < positions[static_cast<size_t>(victim)])) {
      victim = i;
    }
  }
  return victim >= 0 ? victim : oldest_recent >= 0 ? oldest_recent : latest_sink;
}

}  // namespace gb
