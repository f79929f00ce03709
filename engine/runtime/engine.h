// Engine: continuous-batching inference for many requests on one backend, and
// the one producer of the trace-event stream.
//
// step() = schedule -> run model -> process outputs (after nano-vllm):
//   1. Scheduler::schedule() picks requests and token counts under the budget,
//      and how many logit rows each needs (begin_step publishes admissions).
//   2. run_forward(): the backend runs copy-on-write block copies, then one
//      forward pass over the whole ragged batch (BatchLayout).
//   3. sample_outputs() (engine_outputs.cpp): each request with logit rows gets
//      its token(s) from its own SamplerChain and SamplerRng (so a request's
//      tokens do not depend on what else is batched); its RequestOutput
//      (output_processor.h) detokenizes and checks EOS / stop tokens / stop
//      strings / the reasoning budget.
//   4. end_step(): Scheduler::on_step_done() appends the tokens and finishes
//      requests; tokens, KV events and step statistics become TraceEvents.
// Speculative decoding (GenerationRequest::speculative, engine/speculative/)
// adds a step 0 -- each decoding request's drafter proposes tokens, handed to
// the scheduler with set_draft() -- and in step 3 such a request verifies its
// drafts against the logits of all drafted positions and emits the accepted
// ones plus one more (SpeculativeDecoder; docs/speculative.md).
//
// Thread: one thread owns an Engine (the CLI's main thread, or the UI's engine
// thread). Events go out through one channel: an append-only buffer the owner
// empties with drain_events() after each call that can publish (step, submit,
// fork, cancel, release); nothing else holds on to them.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_pool_sizing.h"
#include "core/ids.h"
#include "core/result.h"
#include "kv/isolation_key.h"
#include "kv/kv_snapshot.h"
#include "kv/request.h"
#include "model/model.h"
#include "runtime/inside.h"
#include "sampling/sampler_settings.h"
#include "speculative/speculative_config.h"
#include "speculative/speculative_stats.h"
#include "tokenizer/tokenizer.h"
#include "trace/trace_event.h"

namespace gb {
class FormatCache;
}

namespace gb {

class Scheduler;
struct ScheduledRequest;
struct StepPlan;
struct StepOutputs;
class SamplerChain;
class SamplerRng;
class StopStringMatcher;
class SpeculativeDecoder;

// EngineConfig::check_invariants' default (see there).
bool invariant_checks_by_default();

struct EngineConfig {
  // The KV pool (plan_kv in backend/kv_pool_sizing.h): explicit blocks, or
  // bytes, or sized from the memory budget of the host: the context (max_context,
  // else the model's, lowered to what fits) times kv_full_contexts (> 0) or
  // max_seqs / 4 contexts, fewer where they do not fit.
  int32_t num_blocks = 0;          // KV pool blocks; 0: derive from kv_bytes or context
  size_t kv_bytes = 0;             // KV pool size in bytes (used when num_blocks == 0)
  int32_t kv_full_contexts = 0;    // > 0 (and no blocks/bytes): this many whole contexts
  KvTypes kv_types;                // K and V element types (default F16, kernels/cpu/kv_type.h)
  // The memory the budget starts from (0: read MemAvailable, or the device's
  // free memory): tests.
  size_t memory_available = 0;
  int32_t block_size = 16;
  int32_t max_batch_tokens = 512;
  int32_t max_seqs = 32;
  int32_t max_context = 0;         // 0: the model's context length
  int32_t max_prefill_chunk = 0;   // 0: whole budget
  float admission_watermark = 0.01f;
  bool record_kv_events = true;    // emit KvTraceEvents
  bool record_tokens = true;       // fill TokenRecords (top-N candidates per token)
  // Sweep the scheduler's and block pool's invariants after every step. The
  // default is one switch, decided in one place (engine.cpp): on in debug
  // builds of the engine and wherever GLASSBOX_CHECK_INVARIANTS=1 is set (every
  // CTest test but the workbench's, tests/glassbox_tests.cmake), else off.
  bool check_invariants = invariant_checks_by_default();
  // Extra KV blocks for self-drafting requests' drafted positions
  // (self_draft_scratch_blocks(k_max, block_size) each): a lookahead reserve in
  // the scheduler's pool that requests' tables never take
  // (KvCacheManager::allocate_lookahead). 0: self-draft requests are refused.
  int32_t num_scratch_blocks = 0;
  // Finished retain_kv requests that keep their blocks (copy-on-write forks);
  // past the bound the longest unused one is released into the prefix cache.
  // 0: no bound.
  int32_t max_retained = 16;
  // Release retained blocks whenever a request needs them (never a stall).
  // false: only release() frees them, and a pool full of them fails the
  // waiting request with an ErrorEvent (tests of that path).
  bool evict_retained = true;
  // When every layer of the model slides (ModelConfig::kv_release_window),
  // give back the KV blocks that have left a request's window, so a generation
  // can be longer than the pool; when only some do (Gemma 2/3,
  // ModelConfig::has_window_group) and the backend can, keep the sliding
  // layers in a window group of their own that holds only the window
  // (kv/scheduler.h). false keeps every block of every layer (comparison runs).
  bool release_window_blocks = true;
  // The window group's pool in blocks (0: plan_kv sizes it from max_seqs and
  // the prefill chunk); at least a window and a block.
  int32_t num_window_blocks = 0;
  // Finished (or cancelled) requests remembered so they can still be forked
  // after their blocks are gone (re-prefill, mostly prefix hits); oldest
  // forgotten first.
  int32_t max_finished_records = 256;
};

struct GenerationRequest {
  std::vector<TokenId> prompt_ids;  // BOS included if wanted
  // Sampler chain, seed, max_tokens, stop strings and stop token ids.
  SamplerSettings sampling;
  Priority priority = Priority::Interactive;
  IsolationKey isolation;           // empty model field: the engine fills the model identity
  bool use_prefix_cache = true;
  bool ignore_eos = false;          // do not stop at EOS (BOS always stops, as in llama2.c)
  bool retain_kv = false;           // keep KV after finishing so the request can be forked
  // Draft and verify (greedy: token-identical to plain decoding; sampled: the
  // same distribution). Not inherited by forks; off while a reasoning budget
  // forces tokens.
  std::optional<SpeculativeConfig> speculative;
  // KV eviction (kv/kv_policy.h, docs/kv-eviction.md): full keeps everything.
  // Another policy holds the request's cache to its budget; it needs the CPU
  // backend, no speculative decoding, and a model whose sliding layers (if
  // any) keep a window group. It never shares the prefix cache.
  KvPolicy kv_policy;
  // With an evicting kv_policy: also run a full-cache shadow of this request
  // (the same prompt, then this request's tokens, forced; every token kept) in
  // the same batches, and publish a KvShadowEvent per generated token: what
  // the eviction cost there (KL(full || pruned)). The shadow's own events carry
  // the purpose "kv_shadow"; it ends with this request.
  bool kv_shadow = false;
  // Requests this one branches from (an edited earlier chat message, a
  // regenerated answer): the candidate whose tokens (prompt + output) share the
  // longest common prefix with prompt_ids becomes the parent, and while it holds
  // the K/V of that prefix the request is a copy-on-write fork of it up to that
  // token (full blocks shared, a partial block copied; only the rest of the
  // prompt is prefilled). Otherwise the prefix cache serves what it can. Either
  // way the submitted event names the parent and the common prefix length
  // (fork_position). Unknown candidates are ignored.
  std::vector<RequestId> branch_from;
  // The engine's own requests name why they exist ("inspect"; the submitted
  // event's `purpose`, so front ends can keep them out of the conversation);
  // empty for everyone else's.
  std::string purpose;
};

// Positions a request that evicts while it runs may reach (past the model's
// context: how far the model stays sensible there is for it to show).
inline constexpr int32_t kMaxEvictingPositions = 1 << 24;

class Engine {
 public:
  Engine(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
         std::unique_ptr<Backend> backend, const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Initialises the KV pool; call once before submitting.
  Status start();

  // Queues a request. Errors (invalid sampler settings, a prompt that can never
  // fit) are returned for this request only and also emitted as an ErrorEvent.
  Result<RequestId> submit(GenerationRequest request);
  // Branches `parent` after its first num_tokens tokens (prompt + output), then
  // continues with `forced_next` as the next token if given. While the parent
  // holds the K/V of those tokens (running, or finished with retain_kv and not
  // yet released) the child shares its blocks copy-on-write; otherwise (or when
  // no block is free for the copy of a partial last block) it is a new request
  // over the same tokens (prefix-cache hits, then a short re-prefill) with the
  // same outcome. The child keeps the parent's settings
  // and is itself retained. Errors when the parent is unknown or was
  // forgotten (EngineConfig::max_finished_records).
  Result<RequestId> fork(RequestId parent, int32_t num_tokens, std::optional<TokenId> forced_next,
                         int32_t max_tokens);
  // The same fork without a forced token, with the child's own sampler settings
  // (chain, seed, stop strings, max_tokens): a sampler comparison's lane. Its
  // random counter continues from the branch point like fork()'s, so forking at
  // the end of the parent's prompt draws what submit() with `settings` would.
  // retain_kv: keep the child's blocks after it finishes (so it can be forked
  // or inspected; release() frees them); false frees them at once.
  Result<RequestId> fork_with_settings(RequestId parent, int32_t num_tokens, SamplerSettings settings,
                                       bool retain_kv = true);
  // What KV eviction needs besides a valid policy (the CPU backend, no
  // speculative decoding, sliding layers in a window group): the reason submit()
  // would refuse `request`'s policy, checked before anything runs.
  Status check_kv_eviction(const GenerationRequest& request) const;
  bool cancel(RequestId id);
  // Frees the KV blocks a finished retain_kv request kept (full blocks stay in
  // the prefix cache). It can still be forked, by re-prefill.
  bool release(RequestId id);
  // Finished requests that still keep their KV, longest unused first.
  std::vector<RequestId> retained_requests() const;
  // New settings apply from the request's next sampled token.
  Status set_sampler_settings(RequestId id, const SamplerSettings& settings);

  // Runs one step. False when there was nothing to do. A forward pass the
  // backend fails (a device out of memory, a fault) is not an engine error:
  // the step's requests end with an ErrorEvent naming the reason and finish
  // reason "error", their blocks go back, and the other requests go on.
  Result<bool> step();
  // Steps until every request has finished (CLI, tests).
  Status run_until_idle();
  bool has_work() const;

  // Every event published since the last call, in publication order (seq
  // ascending). The buffer grows until drained.
  std::vector<TraceEvent> drain_events();

  const Model& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Backend& backend() { return *backend_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  Scheduler& scheduler() { return *scheduler_; }
  // The pool and context start() chose, and the line that says why when they
  // are less than asked (KvPlan::note).
  const KvPlan& kv_plan() const { return kv_plan_; }
  int32_t num_blocks() const { return num_blocks_; }  // for requests' tables (without the lookahead reserve)
  // Every block of the KV pool: num_blocks() plus the self-draft lookahead
  // reserve (EngineConfig::num_scratch_blocks).
  int32_t num_pool_blocks() const { return num_blocks_ + std::max(0, config_.num_scratch_blocks); }
  int32_t block_size() const { return config_.block_size; }
  int32_t max_context() const { return max_context_; }
  // The KV pool and the requests holding it now, for front ends that report it
  // (serve-bench) without walking the scheduler's pool. O(blocks).
  struct KvUsage {
    int32_t num_blocks = 0;              // the whole pool (the lookahead reserve included)
    int32_t num_owned = 0;               // held by running or retained requests
    int32_t num_free = 0;
    int32_t num_cached = 0;              // free but holding a reusable prefix
    int64_t num_empty_owned_slots = 0;   // unwritten slots in owned blocks (with count_empty_slots)
    int32_t num_running = 0;             // requests holding blocks this step
    int32_t num_waiting = 0;             // requests queued, not yet admitted
    // The window group's pool (num_window_blocks 0: none; sliding-window layers
    // keep only their window there), its lookahead reserve included.
    int32_t num_window_blocks = 0;
    int32_t num_window_owned = 0;
  };
  // O(1), unless count_empty_slots (internal fragmentation): then O(blocks).
  KvUsage kv_usage(bool count_empty_slots = false) const;
  // The main pool block by block (ref counts, hashes, the sliding window's
  // releases), for front ends that draw or check it. O(blocks).
  KvSnapshot kv_snapshot() const;
  // Whether a request is queued or running (not finished, cancelled or unknown).
  bool is_live(RequestId id) const;
  // A live request's tokens, prompt then output; empty when it is not live.
  std::vector<TokenId> live_tokens(RequestId id) const;
  // The most tokens (prompt + output) one request may hold.
  int32_t max_tokens_per_request() const;
  // The scheduler's and pools' invariants, and that every pool's owned blocks
  // are exactly those held by `live` (the requests the caller believes are
  // queued or running: an independent view, e.g. a soak's own bookkeeping)
  // and the retained requests (self-draft scratch included). O(blocks).
  Status check_kv_ownership(std::span<const RequestId> live) const;
  // Drafted / accepted counts, acceptance by position, timings of a request
  // that asked for speculative decoding (also after it finished); else nullopt.
  std::optional<SpeculativeStats> speculative_stats(RequestId id) const;

  // Inside the model at `position` of `tokens` (runtime/inside.h,
  // docs/inside.md): tokens 0 .. position go in as an internal prefill-only
  // request (prefix-cache hits reuse what the engine holds; the rest is
  // prefilled), then that position's forward runs again with capture on,
  // reading the cached K/V and writing none. Steps the engine meanwhile (other
  // requests advance too). Errors: a position outside the tokens or the
  // context, a backend that cannot capture.
  Result<InsideReport> inspect(std::span<const TokenId> tokens, int32_t position, const InsideOptions& options);

 private:
  struct RequestState;
  // What a finished or cancelled request leaves for later forks.
  struct FinishedRecord {
    std::vector<TokenId> tokens;  // prompt + output
    SamplerSettings settings;
    int32_t num_prompt = 0;
    bool ignore_eos = false;
  };
  void remember_finished(RequestId id, const RequestState& rs, std::vector<TokenId> tokens);
  // The branch_from candidate sharing the longest prefix with `prompt`.
  struct BranchChoice {
    RequestId parent;
    int32_t num_common = 0;  // tokens equal at the start of both
    int32_t num_shared = 0;  // of those, K/V the child takes copy-on-write (0: none held)
  };
  std::optional<BranchChoice> choose_branch(const std::vector<RequestId>& candidates,
                                            const std::vector<TokenId>& prompt) const;
  // Prompt + output of a live or remembered request (empty if unknown); valid
  // until that request changes.
  std::span<const TokenId> known_tokens(RequestId id) const;
  void fail_stalled_request();
  void fail_requests(const StepPlan& plan, const std::string& message);
  void end_with_error(RequestId id);
  void end_shadow_links(RequestState& rs);
  void publish(TraceEventBody body);
  double ms_now() const;
  Status run_step_or_fail();
  void forward_kv_events();
  void complete_settings(SamplerSettings& settings) const;
  // The request's sampler chain and output state (rs.settings and
  // rs.ignore_eos set); prompt: the tokens before its output. With a format,
  // its grammar state starts after `replay` (a fork's output before the branch
  // point); fails when the format does not compile or `replay` leaves it.
  Status make_helpers(RequestState& rs, std::span<const TokenId> prompt, std::span<const TokenId> replay = {});
  void finish(RequestId id, const std::string& reason, const RequestState& rs);
  void propose_drafts();
  // The phases of step() (engine.cpp), sampling in engine_outputs.cpp.
  struct StepTimes {
    double start_ms = 0.0;      // before schedule()
    double scheduled_ms = 0.0;  // after schedule()
    double forward_ms = 0.0;    // after the forward pass
    double forward_time() const { return forward_ms - scheduled_ms; }
  };
  bool begin_step(const StepPlan& plan, double start_ms);
  Status run_forward(const StepPlan& plan);
  void publish_evictions(const StepPlan& plan);
  void start_shadows(const StepPlan& plan);
  // A shadow's row (sample_token): the token its request took there, forced,
  // and the KvShadowEvent comparing the two rows. False when the request has
  // not reached that position (the shadow then fails).
  bool shadow_token(const ScheduledRequest& s, RequestState& rs, std::span<const float> logits, TokenId& token,
                    StepOutputs& out);
  StepOutputs sample_outputs(const StepPlan& plan, const StepTimes& t);
  // first_row: the request's first logit row in the step (its routing's row).
  void sample_token(const ScheduledRequest& s, std::span<const float> logits, size_t first_row, const StepTimes& t,
                    StepOutputs& out);
  void verify_drafts(const ScheduledRequest& s, std::span<const float> rows, size_t first_row, const StepTimes& t,
                     StepOutputs& out);
  // A mixture of experts: the routing of logit row `row` of the last forward
  // pass, for a token's record (nothing when the pass recorded none).
  std::optional<RoutingRecord> routing_of_row(size_t row) const;
  void end_step(const StepPlan& plan, StepOutputs out, const StepTimes& t, double sampled_ms);
  void publish_step_event(const StepPlan& plan, const StepTimes& t, double sampled_ms);
  Result<RequestId> fork_impl(RequestId parent, int32_t num_tokens, std::optional<TokenId> forced_next,
                              const SamplerSettings* settings, int32_t max_tokens, bool retain_kv);
  // What a fork inherits from its parent (live or finished).
  struct ForkParent {
    std::span<const TokenId> tokens;  // prompt + output; valid until the scheduler changes
    const SamplerSettings* settings = nullptr;
    int32_t num_prompt = 0;
    bool ignore_eos = false;
  };
  std::optional<ForkParent> fork_parent(RequestId parent) const;
  // Places the child in the scheduler: copy-on-write of the parent's blocks when
  // it still holds them, else as a new request; returns the tokens shared (0: none).
  Result<int32_t> schedule_fork(RequestId parent, RequestSpec spec, int32_t num_shared,
                                std::optional<TokenId> forced_next);
  // The child's submitted event and, with a forced token, its first token.
  void publish_fork(RequestId id, RequestId parent, RequestState& rs, std::span<const TokenId> shared,
                    int32_t max_tokens, std::optional<TokenId> forced_next);

  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  EngineConfig config_;
  std::unique_ptr<Scheduler> scheduler_;
  int32_t num_blocks_ = 0;
  KvPlan kv_plan_;
  int32_t max_context_ = 0;
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> states_;
  uint64_t next_request_id_ = 1;
  int64_t step_index_ = 0;
  uint64_t next_seq_ = 0;
  std::chrono::steady_clock::time_point t0_;
  std::vector<TraceEvent> events_;  // published, not yet drained
  // Live requests only (waiting, running); finished ones leave a record.
  std::unordered_map<RequestId, FinishedRecord> finished_;
  std::deque<RequestId> finished_order_;  // oldest first, for max_finished_records
  std::vector<float> logits_;  // (num_logits, vocab_size) of the last step
  RoutingRows routing_;        // a mixture's routing of those rows, when tokens are recorded
  AttentionMass mass_;         // the step's attention mass for KV eviction (h2o, snapkv)
  std::unique_ptr<SpeculativeDecoder> spec_;  // drafters and verifier (created by start())
  std::unique_ptr<FormatCache> formats_;      // compiled formats (grammar stage), shared by requests
};

}  // namespace gb
