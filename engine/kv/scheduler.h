// Scheduler: continuous batching over a paged KV cache. Each step it decides
// which requests run and how many of their tokens, under a token budget and a
// sequence limit, and it owns the KvCacheManager that says where those tokens'
// K/V live. It never touches tensors.
//
// Policy, in order, every schedule():
//   1. Running requests that are decoding (one token left), interactive before
//      batch, earlier arrival first. Decodes go first so a long prompt cannot
//      starve them.
//   2. Running requests still in prefill (or recompute): the next chunk,
//      min(tokens left, budget left, max_prefill_chunk).
//   3. Waiting requests in the same order, while budget and sequences remain:
//      prefix-cache hit first, then a first chunk. Admission stops at the first
//      request that does not fit (no overtaking, so big requests do not starve):
//      it waits while the free blocks would drop below the watermark
//      (admission_watermark x num_blocks), unless nothing is running. No
//      admission in a step that had to preempt.
//   If a running request needs a block and none is left, the lowest-ranked
//   running request (batch before interactive, latest arrival first) is
//   preempted: its blocks are freed, it goes back to waiting and later
//   recomputes prompt + output, so it finishes with the same tokens.
//
// Retained KV (branching): a finished retain_kv request keeps its blocks so a
// fork from it is copy-on-write, but only while nobody needs them. At most
// max_retained requests keep blocks (the longest unused is released first), and
// with evict_retained a running request that needs a block, a waiting request
// that does not fit, or a fork short of a block for its copy releases retained
// requests, longest unused first, before anyone is preempted or kept waiting.
// Released full blocks stay in the prefix cache (evictable, LRU), so a later
// branch from such a request is a prefix hit plus a short re-prefill.
// Nothing running and the first waiting request still not admissible is a stall
// that cannot resolve itself (only possible without evict_retained, or with a
// bug): stalled_request() names that request so the engine can fail it.
//
// Rejection: submit() refuses, with a message for that request only, a prompt
// that can never run: empty, or with no room for one generated token within
// min(max_context, num_blocks x block_size).
//
// Sliding window (config.sliding_window = W > 0): a request holds only the
// blocks its window and its current chunk cover, so when the pool holds a
// window plus a block ((num_blocks - 1) x block_size >= W) the limit is
// max_context alone, and every prefill chunk is capped at (num_blocks - 1) x
// block_size - W + 1 tokens: the most that, with the window before it, spans
// num_blocks blocks however it is aligned, so one request alone always fits.
//
// Layer groups (config.window_group, models whose layers do not all slide:
// Gemma 2/3): the sliding layers keep their K/V in a pool of their own, with a
// block table per request that holds only the window (a follower
// KvCacheManager), beside the global layers' tables (kv_cache(), the leader).
// Both groups move in lockstep, token for token: a request is admitted, gets
// slots, is computed, truncated, forked, preempted and freed in both at once,
// and a step that needs a block either group lacks preempts as above. A prefix
// hit is the longest one both groups can serve (the follower needs only its
// window's blocks cached). The chunk cap above then comes from the window
// group's pool, and the limit from the leader's. StepPlan carries both
// groups' tables and copies.
//
// KV eviction (kv/kv_policy.h; RequestSpec::kv_policy, docs/kv-eviction.md):
// a request whose policy keeps a budget B holds at most B slots in the
// leader's table at every forward pass. Its slots stop being its positions
// (Request::kv_positions says which position each holds; keys stay rotated
// at their own positions). Before the request's entry is scheduled:
//   sink, h2o  a prefill chunk of n tokens that would pass B compacts the
//              cache to the B - n slots the policy keeps (chunks are at most
//              the policy's recent window); a decode at B overwrites the
//              slot of the one token the policy drops (no data moves)
//   snapkv     the first decode after the prompt compacts the prompt to B;
//              the answer then appends
// Compaction moves rows down (SlotMoves, StepPlan::slot_moves) and frees the
// blocks past them. The attention mass the policies rank by comes from the
// backend (add_kv_mass, between schedule() and on_step_done()). A request
// that evicts takes no prefix hits and commits nothing (its blocks hold other
// values than a full cache would), may run past max_context up to
// max_positions (sink, h2o), and after a preemption recomputes with a fresh
// cache. The window group (the sliding layers) never evicts: it keeps its
// window by position. A fork shares the parent's slots that hold positions
// before the fork point when those are the table's first slots.
//
// The engine loop (runtime/) -- one step:
//
//   StepPlan plan = scheduler.schedule();
//   if (plan.empty()) { wait for work; continue; }
//   GB_TRY(backend.copy_blocks(plan.block_copies));
//   BatchLayout layout = to_batch_layout(plan);         // runtime/step_layout.h
//   GB_TRY(backend.forward(layout, logits));            // (plan.num_logits(), vocab)
//   std::vector<StepToken> sampled;                   // one per needs_logits(), plan order
//   for (row = 0; const ScheduledRequest& r : plan.requests) {
//     if (r.needs_logits()) sampled.push_back({r.id, sample(rows row .. row + r.num_logit_rows), is_stop});
//     row += r.num_logit_rows;
//   }
//   for (const FinishedRequest& f : scheduler.on_step_done(plan, sampled)) report(f);
//   forward scheduler.kv_cache().drain_events() and plan.stats to the trace.
//
// Speculative decoding (engine/speculative/): before schedule(), the engine may
// give a decoding request draft tokens with set_draft(). schedule() then
// reserves slots for [last token, draft...] (cut to the budget; dropped, never
// preempting anyone, when the pool is short) and the entry has is_decode with
// num_new_tokens = 1 + drafts and num_logit_rows = num_new_tokens (logits at
// every one of those positions). The StepToken for it says how many
// drafts were accepted; on_step_done() keeps their K/V, truncates the rejected
// slots from the block table, and appends the accepted drafts plus the token.
// Drafts not scheduled in this step are dropped.
//
// If copy_blocks or forward fails, call on_step_failed(plan) instead of
// on_step_done: the step's slots are given back and the requests run again.
// submit() and cancel() are called between steps (never between schedule() and
// on_step_done()).
//
// Thread: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "kv/kv_cache_manager.h"
#include "kv/request.h"
#include "kv/step_plan.h"

namespace gb {

// A layer group's pool beside the leader's (SchedulerConfig::window_group).
struct KvGroupSpec {
  int32_t num_blocks = 0;  // 0: no such group
  int32_t window = 0;      // the group's sliding window W
};

struct SchedulerConfig {
  int32_t num_blocks = 0;
  // Extra blocks in the same pool lent only as lookahead scratch
  // (KvCacheManager::allocate_lookahead); never counted as room for requests.
  int32_t num_lookahead_blocks = 0;
  int32_t block_size = 16;
  int32_t max_batch_tokens = 512;   // tokens per forward pass (the TokenBudget)
  int32_t max_seqs = 32;            // sequences per forward pass
  int32_t max_context = 2048;       // prompt + output tokens per request
  int32_t max_prefill_chunk = 0;    // 0: a prefill chunk may use the whole remaining budget
  float admission_watermark = 0.01f;  // fraction of blocks admission keeps free
  int32_t max_retained = 0;         // finished requests keeping blocks; 0: no bound
  bool evict_retained = true;       // release retained blocks whenever someone needs them
  // W when every layer of the model slides (ModelConfig::kv_release_window),
  // else 0: blocks that leave a request's window are released (KvCacheManager).
  int32_t sliding_window = 0;
  // The sliding layers of a model whose other layers are global (see above);
  // num_blocks 0: every layer uses the one table. Needs (num_blocks - 1) x
  // block_size >= window, so one request alone always fits. Its pool has the
  // same lookahead reserve (num_lookahead_blocks) beside num_blocks.
  KvGroupSpec window_group;
  // Positions a request whose policy keeps its budget while running (sink,
  // h2o) may reach; 0: max_context (see KV eviction above).
  int32_t max_positions = 0;
};

struct StepToken {
  RequestId id;
  TokenId token = 0;
  bool stop = false;  // the engine decided this token ends the request (EOS, stop string)
  // Verification entries only: the first num_accepted_draft drafted tokens
  // (token_ids[1 ..]) are kept and come before `token` in the output.
  int32_t num_accepted_draft = 0;
};

struct FinishedRequest {
  RequestId id;
  FinishReason reason = FinishReason::None;
  std::vector<TokenId> tokens;  // prompt + output (the Request's, moved)
  int32_t num_prompt = 0;
  std::span<const TokenId> output_ids() const {
    return std::span<const TokenId>(tokens).subspan(static_cast<size_t>(num_prompt));
  }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Queues a request, or returns an error naming it when it can never run.
  Status submit(RequestSpec spec);
  // Drops a waiting or running request and returns its blocks. False if unknown
  // (already finished).
  bool cancel(RequestId id);
  // Starts `child` as a copy-on-write fork of `parent` (running, or finished
  // with retain_kv) sharing its first num_shared_tokens computed tokens: full
  // blocks are shared, a partial last block is copied before the next forward
  // pass. child.prompt_ids must begin with those tokens; the tokens after them
  // are computed like a prompt. `initial_output` starts the child's output
  // (e.g. the alternative token a user picked): it counts as generated and is
  // computed next. Errors when the parent is unknown, has not computed that far,
  // or no block is free for the copy.
  Status fork(RequestId parent, RequestSpec child, int32_t num_shared_tokens,
              std::vector<TokenId> initial_output = {});
  // Frees the blocks a finished retain_kv request kept. False if it kept none.
  bool release(RequestId id);
  bool is_retained(RequestId id) const { return retained_.contains(id); }
  // Finished requests that still keep blocks, longest unused first.
  std::vector<RequestId> retained_requests() const;
  // Tokens whose K/V `id` holds now (a running or retained request), else 0:
  // a fork may share at most this many without recomputing.
  int32_t num_tokens_held(RequestId id) const;
  // After a schedule() that ran nothing and preempted nobody: the first waiting
  // request when nothing runs (it can never be admitted as things are), else
  // nullopt.
  std::optional<RequestId> stalled_request() const;

  // Draft tokens for a running, decoding request, verified in the next step
  // (see above). Replaces an earlier draft; empty clears it.
  void set_draft(RequestId id, std::vector<TokenId> draft_ids);

  StepPlan schedule();
  // Records the step: advances num_tokens_computed, commits full blocks to the
  // prefix cache, appends sampled tokens, finishes requests (their blocks freed).
  std::vector<FinishedRequest> on_step_done(const StepPlan& plan, std::span<const StepToken> sampled);
  // The step did not run: releases the slots it reserved.
  void on_step_failed(const StepPlan& plan);

  // The backend's attention mass for a request scheduled in this step (its
  // ScheduledRequest::mass_from was >= 0): one value per slot after the step.
  void add_kv_mass(RequestId id, std::span<const float> mass);

  const Request* find(RequestId id) const;
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  const SchedulerConfig& config() const { return config_; }
  // min(max_context, pool capacity): the most tokens one request can reach.
  int32_t max_tokens_per_request() const { return max_total_tokens_; }
  KvCacheManager& kv_cache() { return kv_; }
  const KvCacheManager& kv_cache() const { return kv_; }
  // The sliding layers' group (config.window_group), or null.
  const KvCacheManager* window_kv_cache() const { return window_kv_.get(); }
  KvCacheManager* window_kv_cache() { return window_kv_.get(); }

  Status check_invariants() const;

 private:
  Status check_kv_policy(const Request& r) const;
  struct Entry {
    RequestId id;
    int32_t num_new_tokens;
    bool is_decode;
    int32_t num_draft = 0;  // of num_new_tokens, drafted tokens to verify
  };
  struct GroupMove {
    RequestId id;
    SlotMove move;
  };
  struct GroupCopy {
    RequestId id;
    BlockCopy copy;
    int32_t group = 0;  // 0: the leader's pool, 1: the window group's
  };
  struct StepState {
    std::vector<Entry> entries;
    std::vector<GroupCopy> copies;
    std::vector<GroupMove> moves;
    int32_t budget = 0;
    StepPlan* plan = nullptr;
  };

  Request& at(RequestId id);
  // The n tokens after r's computed ones (a view of r.tokens).
  std::span<const TokenId> tokens_to_compute(const Request& r, int32_t n) const;
  void schedule_running(StepState& step, bool decodes);
  void schedule_waiting(StepState& step);
  // Schedules [last, draft...] for a decoding request with a draft; false
  // (nothing changed) when it has none or it does not fit.
  bool try_schedule_draft(RequestId id, std::span<const TokenId> last, StepState& step);
  void preempt(RequestId victim, StepState& step);
  RequestId lowest_ranked_running() const;
  void sort_by_rank(std::vector<RequestId>& ids) const;
  void remove_from(std::vector<RequestId>& list, RequestId id);
  int32_t chunk_limit(int32_t budget) const;
  // An evicting request's next prefill chunk, a function of the request and
  // the configuration only (never of the step's budget or the batch), so its
  // evictions -- and its tokens -- are the same batched, alone and after a
  // preemption: prompt chunks of min(recent window, max_batch_tokens -
  // max_seqs, the chunk caps); snapkv's observation window in a chunk of its
  // own; computed outputs (a recompute) one token at a time, as decoded.
  int32_t fixed_chunk(const Request& r) const;
  // Most positions r may reach: max_positions when its policy keeps a budget
  // while running, else max_tokens_per_request().
  int32_t position_limit(const Request& r) const;
  // The eviction r's policy does before n new tokens (see KV eviction above):
  // compaction moves go into step. The slot a decode token overwrites, -1 when
  // the tokens append, or nullopt (nothing changed) when a block for a copy is
  // missing.
  std::optional<int32_t> evict_for(Request& r, int32_t n, StepState& step);
  // Back to waiting with no blocks (a preemption, or a failed step of a request
  // whose cache it rewrote).
  void drop_kv(Request& r);
  // Releases the longest-unused retained request other than `keep`; false when
  // there is none.
  bool release_lru_retained(RequestId keep = kNoRequest);
  // --- both layer groups in lockstep (see above) ---
  void kv_free(RequestId id);
  // append_slots in every group, or nullopt (nothing changed) when one is short.
  // leader false: only the window group appends (a decode that reuses a slot).
  std::optional<std::vector<GroupCopy>> kv_append(RequestId id, std::span<const TokenId> tokens, bool leader = true);
  // Blocks append_slots would take leaves fewer than `keep` available in some group.
  // leader false: the window group only.
  bool kv_short(RequestId id, int32_t num_new_tokens, int32_t keep, bool leader = true) const;
  // num_slots: the leader's slots the child shares (num_tokens when slots are positions).
  std::optional<std::vector<GroupCopy>> kv_fork(RequestId parent, RequestId child, int32_t num_tokens,
                                                int32_t num_slots);
  void kv_truncate(RequestId id, int32_t num_tokens);
  void kv_mark_computed(const Request& r);
  struct Retained {
    int32_t num_computed = 0;  // tokens whose K/V the kept blocks hold
    uint64_t last_used = 0;    // finish or fork order (LRU)
    std::vector<int32_t> kv_positions;  // Request::kv_positions at the finish
    std::vector<float> kv_mass;
  };
  // The slots of a running or retained request's leader table that hold the
  // positions before num_tokens, when they are its first slots; else -1.
  int32_t shared_slots(RequestId parent, int32_t num_tokens) const;

  SchedulerConfig config_;
  KvCacheManager kv_;
  std::unique_ptr<KvCacheManager> window_kv_;  // the window group (follower), or null
  int32_t max_total_tokens_;
  int32_t position_limit_;  // config.max_positions, or max_context
  int32_t watermark_blocks_;
  int32_t window_watermark_blocks_ = 0;
  int32_t window_chunk_cap_ = 0;  // > 0: the sliding-window chunk cap (see above)
  std::unordered_map<RequestId, Request> requests_;  // waiting, preempted and running
  std::vector<RequestId> running_;                   // holds blocks
  std::vector<RequestId> waiting_;                   // holds none (waiting + preempted)
  std::unordered_map<RequestId, Retained> retained_;  // finished, blocks kept
  std::vector<GroupCopy> pending_copies_;            // fork copies to run before the next forward
  std::unordered_map<RequestId, std::vector<TokenId>> drafts_;  // set_draft(), consumed by schedule()
  uint64_t next_arrival_ = 0;
  uint64_t next_use_ = 0;  // Retained::last_used clock
  int64_t next_step_ = 0;
  bool in_flight_ = false;  // between schedule() of a non-empty plan and on_step_done()
};

}  // namespace gb
