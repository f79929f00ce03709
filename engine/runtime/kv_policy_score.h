// What a KV eviction policy costs, by teacher forcing (docs/kv-eviction.md):
// the same text is fed token by token to two requests in one batch of the
// Scheduler -- one under the policy, one with the full cache -- and every
// position gets the pruned cache's log-probability of the text's token, KL(full
// || pruned) of the two next-token distributions, and whether their argmax
// agree. This is the path generation takes (a prefill of the first
// num_prompt tokens, then one decode step per token, evicting as the policy
// says), so the numbers are those of an answer that happened to be this text.
// snapkv prunes when the prompt is computed: give it a prompt worth pruning.
//
// Thread: the caller's; it owns the backend for the duration of the call (its
// KV pool is re-initialised).
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "core/result.h"
#include "kv/kv_policy.h"
#include "runtime/text_scorer.h"

namespace gb {

struct Model;

struct KvPolicyScoreStats {
  int64_t num_evicted = 0;   // tokens the policy dropped over the run
  int32_t max_slots = 0;     // most slots the pruned request held at a forward pass
  int64_t num_moved_rows = 0;  // K/V rows compaction moved
};

// TextScore of the pruned request over positions num_prompt .. n - 1:
// tokens[k].logprob is the pruned cache's, base_logprob the full cache's, kl
// KL(full || pruned). `policy` resolved; num_prompt in 1 .. n - 1.
// Errors: fewer than 2 tokens, ids outside the vocabulary, a policy the
// backend or model cannot run, a failed forward pass.
Result<TextScore> score_tokens_with_kv_policy(const Model& model, Backend& backend, std::span<const TokenId> tokens,
                                              const KvPolicy& policy, int32_t num_prompt = 1,
                                              const ScoreOptions& options = {}, KvPolicyScoreStats* stats = nullptr);

}  // namespace gb
