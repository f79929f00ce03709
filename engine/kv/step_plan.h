// StepPlan: what one engine step runs, decided by Scheduler::schedule() and read
// by the engine loop (runtime/). runtime/step_layout.h flattens it for the backend.
//
// Per scheduled request: new tokens at positions start_pos ... start_pos +
// num_new_tokens - 1, its whole block table, and how many logit rows the
// forward pass returns for it -- the one place that rule lives:
//   0                a prefill chunk with prompt tokens left (no use for logits)
//   1                the step reaches the last known token: its next token
//   num_new_tokens   a verification [last, d_1..d_k]: every drafted position
// The rows are those of the request's LAST num_logit_rows new tokens.
//
// Logit rows: the backend writes them request by request in the order of
// `requests` (to_batch_layout emits exactly these rows; nobody edits them).
//
// block_copies must be executed (Backend::copy_blocks) before the forward pass,
// in list order: a block freed by a preemption can be a source early in the list
// and a destination later.
//
// Plain value; built and read on the engine thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/ids.h"

namespace gb {

struct ScheduledRequest {
  RequestId id;
  int32_t start_pos = 0;           // == num_tokens_computed before the step
  int32_t num_new_tokens = 0;
  std::vector<TokenId> token_ids;  // (num_new_tokens)
  std::vector<int32_t> block_ids;  // (ceil((start_pos + num_new_tokens) / block_size))
  // The sliding layers' own table when the model has a window group
  // (SchedulerConfig::window_group), same length; else empty.
  std::vector<int32_t> window_block_ids;
  // KV eviction (kv/scheduler.h): the leader table's slot of each new token
  // when slots are not positions (empty: slot == position), the slots it holds
  // after the step, and the first position whose queries add their attention
  // weights to the request's mass (-1: none wanted).
  std::vector<int32_t> kv_slots;   // (num_new_tokens) or empty
  int32_t num_kv_slots = 0;
  int32_t mass_from = -1;
  int32_t num_logit_rows = 0;      // 0, 1 or num_new_tokens (see above)
  bool is_decode = false;          // the last known token (+ drafts) after a computed prompt (else prefill/recompute)

  bool needs_logits() const { return num_logit_rows > 0; }
};

// What the scheduler did in one step. Only what it alone knows: the engine's
// StepEvent adds the timings and the pool and queue state after the step.
struct StepStats {
  int64_t step = 0;
  int32_t num_seqs = 0;
  int32_t num_prefill_tokens = 0;  // includes recompute after preemption
  int32_t num_decode_tokens = 0;
  int32_t num_prefix_hit_tokens = 0;  // tokens taken from the prefix cache at admission
  int32_t num_preemptions = 0;
  int32_t num_evicted_tokens = 0;  // KV eviction: tokens dropped from caches this step
};

// Tokens KV eviction dropped from a request's cache in this step, and the
// attention mass each had (empty for a policy that does not rank by it).
struct EvictedTokens {
  RequestId id;
  std::vector<int32_t> positions;
  std::vector<float> mass;
};

struct StepPlan {
  std::vector<ScheduledRequest> requests;
  std::vector<std::pair<int32_t, int32_t>> block_copies;  // (src, dst), run first, in order
  std::vector<std::pair<int32_t, int32_t>> window_block_copies;  // the same in the window group's pool
  // KV eviction's row moves in the leader's pool (physical slots, src -> dst),
  // in order, after the first num_fork_copies block copies (forks made before
  // this step: a move may read their destination, or write their source's
  // rows) and before the rest (this step's copies may write blocks the moves
  // read, freed by a compaction).
  std::vector<std::pair<int32_t, int32_t>> slot_moves;
  int32_t num_fork_copies = 0;
  std::vector<EvictedTokens> evictions;                   // what KV eviction dropped this step
  std::vector<RequestId> preempted;                       // lost their blocks this step
  int32_t block_size = 16;
  StepStats stats;

  bool empty() const { return requests.empty(); }
  int32_t num_tokens() const {
    int32_t n = 0;
    for (const ScheduledRequest& r : requests) n += r.num_new_tokens;
    return n;
  }
  int32_t num_logits() const {
    int32_t n = 0;
    for (const ScheduledRequest& r : requests) n += r.num_logit_rows;
    return n;
  }
};

}  // namespace gb
