// KV eviction policies: which of a sequence's cached tokens to keep when its
// cache holds more than a token budget B. Plain functions over the cache's
// slots (their token positions, ascending, and the attention mass each has
// received); the Scheduler applies the result to the paged cache
// (docs/kv-eviction.md).
//
//   policy   keeps, of the tokens cached before the next forward pass
//   full     everything (the default; no budget)
//   sink     the first S positions (attention sinks) and the most recent
//            B - S (StreamingLLM, Xiao et al. 2023)
//   h2o      the first S, the most recent R, and the rest by largest
//            accumulated attention mass (Heavy-Hitter Oracle, Zhang et al. 2023)
//   snapkv   at the end of the prompt: the first S, the last W prompt tokens
//            (the observation window), and the rest by the mass the window's
//            queries gave them, max-pooled over `pool` neighbouring slots
//            (Li et al. 2024); the answer then appends without eviction
//
// Attention mass is summed over every query head and every layer that reads
// the evicted cache: one kept set per sequence, because a paged cache shares
// one block table across heads and layers (per-head sets would free memory
// only where every head agrees). Positions are never re-assigned: a kept
// token's key stays rotated at its original position, so with a budget at
// least the sequence length every policy computes exactly what `full` does.
//
// Variation is the table kv_policy_rows(): a new policy is a row plus its
// ranking in kv_select_kept.
//
// Thread: plain values and functions, any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace gb {

enum class KvPolicyKind : uint8_t { Full, Sink, H2O, SnapKV };

// What each policy needs from the engine, and its defaults.
struct KvPolicyRow {
  KvPolicyKind kind;
  const char* name;     // CLI, server and trace spelling
  const char* summary;  // one line for --help and the workbench
  int32_t default_sinks;
  bool evicts_while_running;  // keeps the budget during prefill and decode (sink, h2o)
  bool prunes_after_prompt;   // one pruning when the prompt is computed (snapkv)
  bool uses_mass;             // needs the attention mass the kernels accumulate
  const char* evict_reason;   // why a token went (the trace's kv_eviction.reason)
};
std::span<const KvPolicyRow> kv_policy_rows();
const KvPolicyRow& kv_policy_row(KvPolicyKind kind);
const char* kv_policy_name(KvPolicyKind kind);
// "full", "sink", "h2o", "snapkv"; an error listing them otherwise.
Result<KvPolicyKind> kv_policy_from_name(const std::string& name);

struct KvPolicy {
  KvPolicyKind kind = KvPolicyKind::Full;
  int32_t budget = 0;   // B: tokens a sequence's cache holds at most (0 with full)
  int32_t sinks = -1;   // S: leading positions never evicted; -1: the row's default
  int32_t recent = -1;  // R: most recent positions always kept; -1: sink B - S, h2o B / 2
  int32_t window = 32;  // snapkv: W, the last prompt queries whose attention ranks the prompt
  int32_t pool = 7;     // snapkv: max-pooling width over neighbouring slots (odd)

  bool active() const { return kind != KvPolicyKind::Full; }
  friend bool operator==(const KvPolicy&, const KvPolicy&) = default;
};

// The policy with every default filled in (sinks, recent), or an error naming
// what does not fit: a budget below S + R + 1, an even or non-positive pool...
// `full` comes back as it is (budget 0).
Result<KvPolicy> resolve_kv_policy(KvPolicy policy);
// "h2o B=512 S=0 R=256" (resolved policies): the trace's and the prefix
// cache isolation key's spelling; "full" for full.
std::string describe_kv_policy(const KvPolicy& policy);
// Most new tokens a running step may add to a sequence whose cache the policy
// keeps at the budget: the new tokens must fit in the recent window (they are
// the most recent ones). 0: no limit (full, snapkv).
int32_t kv_policy_chunk_limit(const KvPolicy& resolved);

// The slots to keep (indices into positions, ascending) so that `keep` of the
// cached slots remain, when the tokens after them end at end_pos (exclusive:
// the next forward pass's new tokens are end_pos - n .. end_pos - 1, and the
// recent window is positions end_pos - R ..). positions ascending, scores one
// per slot (ignored by sink). Forced: positions < S and >= end_pos - R (the
// sinks first, then the most recent, if they alone exceed keep). The rest by
// the policy's rank: sink the most recent, h2o the largest score, snapkv the
// largest max-pooled score; ties go to the later position.
// resolved: from resolve_kv_policy. All slots when keep >= their number.
std::vector<int32_t> kv_select_kept(const KvPolicy& resolved, std::span<const int32_t> positions,
                                    std::span<const float> scores, int32_t keep, int32_t end_pos);
// The one slot kv_select_kept(resolved, positions, scores, n - 1, end_pos)
// leaves out (n = positions.size() >= 1), in one pass: a decode at the budget
// drops it.
int32_t kv_select_victim(const KvPolicy& resolved, std::span<const int32_t> positions, std::span<const float> scores,
                         int32_t end_pos);
// snapkv's ranking score per slot: the max of scores over slots i - pool / 2 .. i + pool / 2.
std::vector<float> kv_pooled_scores(std::span<const float> scores, int32_t pool);

}  // namespace gb
