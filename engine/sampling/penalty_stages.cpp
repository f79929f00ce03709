// History-based stages: repetition / presence / frequency penalties and DRY.
// Both only touch the logits of tokens that occur in the history window, so they
// cost O(window) on a dense candidate set, independent of the vocabulary size.
#include <algorithm>
#include <cmath>

#include "sampling/sampler_stages.h"

namespace gb {
namespace {

// The last `last_n` tokens of history (-1 = all, 0 = none).
std::span<const TokenId> window(std::span<const TokenId> history, int last_n) {
  if (last_n < 0 || static_cast<size_t>(last_n) >= history.size()) return history;
  return history.subspan(history.size() - static_cast<size_t>(last_n));
}

// Z-array of s: z[i] = length of the longest common prefix of s and s[i..].
// (Gusfield's Z-algorithm; z[0] is set to s.size().) O(n).
std::vector<int> z_array(const std::vector<TokenId>& s) {
  const int n = static_cast<int>(s.size());
  std::vector<int> z(s.size(), 0);
  if (n == 0) return z;
  z[0] = n;
  int left = 0, right = 0;  // [left, right) is the rightmost window matching a prefix
  for (int i = 1; i < n; ++i) {
    if (i < right) z[i] = std::min(right - i, z[i - left]);
    while (i + z[i] < n && s[z[i]] == s[i + z[i]]) ++z[i];
    if (i + z[i] > right) {
      left = i;
      right = i + z[i];
    }
  }
  return z;
}

}  // namespace

void apply_penalties(CandidateSet& set, std::span<const TokenId> history, const SamplerSettings& s) {
  if (s.repeat_penalty == 1.0f && s.presence_penalty == 0.0f && s.frequency_penalty == 0.0f) return;
  const std::span<const TokenId> recent = window(history, s.penalty_last_n);
  if (recent.empty()) return;
  // Distinct ids of the window with their counts: (num_distinct) each.
  std::vector<TokenId> ids(recent.begin(), recent.end());
  std::sort(ids.begin(), ids.end());
  std::vector<int> counts;
  size_t num_distinct = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (num_distinct > 0 && ids[num_distinct - 1] == ids[i]) {
      ++counts.back();
    } else {
      ids[num_distinct++] = ids[i];
      counts.push_back(1);
    }
  }
  ids.resize(num_distinct);
  set.for_each_listed(ids, [&](Candidate& c, size_t k) {
    // CTRL divides positive logits and multiplies negative ones so that the
    // penalty always makes the token less likely.
    c.logit = c.logit > 0.0f ? c.logit / s.repeat_penalty : c.logit * s.repeat_penalty;
    c.logit -= s.frequency_penalty * static_cast<float>(counts[k]) + s.presence_penalty;
  });
  set.remove_banned();  // -inf only through float overflow, but then it is a ban
}

std::vector<std::pair<TokenId, int>> apply_dry(CandidateSet& set, std::span<const TokenId> history,
                                               const DrySettings& dry) {
  std::vector<std::pair<TokenId, int>> penalized;
  if (dry.multiplier <= 0.0f) return penalized;
  const std::span<const TokenId> ctx = window(history, dry.penalty_last_n);
  const int n = static_cast<int>(ctx.size());
  if (n < 2) return penalized;
  auto is_breaker = [&](TokenId t) {
    return std::find(dry.sequence_breaker_ids.begin(), dry.sequence_breaker_ids.end(), t) !=
           dry.sequence_breaker_ids.end();
  };
  // A repeated sequence may not contain a breaker. The suffix of the context is
  // the thing being repeated, so its breaker-free length bounds every match; an
  // earlier occurrence equal to it is then breaker-free too.
  int max_len = 0;
  while (max_len < n && !is_breaker(ctx[n - 1 - max_len])) ++max_len;
  if (max_len == 0) return penalized;

  // reversed[j] = ctx[n - 1 - j]. The suffix of ctx ending at position i matches
  // the suffix of the whole context for z[n - 1 - i] tokens.
  std::vector<TokenId> reversed(ctx.rbegin(), ctx.rend());
  const std::vector<int> z = z_array(reversed);

  // Every (following token, match length) pair, then the longest per token.
  std::vector<std::pair<TokenId, int>> matches;
  for (int i = 0; i + 1 < n; ++i) {  // i = end of an earlier occurrence; ctx[i + 1] follows it
    const int len = std::min(z[static_cast<size_t>(n - 1 - i)], max_len);
    if (len < dry.allowed_length) continue;
    const TokenId next = ctx[static_cast<size_t>(i + 1)];
    if (is_breaker(next)) continue;  // breakers are never penalized
    matches.emplace_back(next, len);
  }
  std::sort(matches.begin(), matches.end());
  for (const auto& m : matches) {
    if (!penalized.empty() && penalized.back().first == m.first)
      penalized.back().second = m.second;  // sorted ascending: the last one is the longest
    else
      penalized.push_back(m);
  }
  std::vector<TokenId> ids;
  ids.reserve(penalized.size());
  for (const auto& p : penalized) ids.push_back(p.first);
  set.for_each_listed(ids, [&](Candidate& c, size_t k) {
    const double exponent = penalized[k].second - dry.allowed_length;
    const double penalty = dry.multiplier * std::pow(static_cast<double>(dry.base), exponent);
    // A very long repetition overflows to an infinite penalty: that is a ban.
    c.logit = static_cast<float>(static_cast<double>(c.logit) - penalty);
  });
  set.remove_banned();
  return penalized;
}

}  // namespace gb
