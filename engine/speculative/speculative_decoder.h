// SpeculativeDecoder = DraftProposer + Verifier, for every request of one
// Engine that asked for speculative decoding. The Engine calls it at three
// points of its step loop (runtime/engine.cpp); the Scheduler only sees a
// decoding request with more than one new token (kv/scheduler.h, set_draft).
//
//   before schedule():  propose()  -> up to k drafted tokens d_1..d_k
//                       Scheduler::set_draft(id, d)
//   schedule + forward: the target computes [last, d_1..d_k] at once, with
//                       logits for all k + 1 positions (one target forward)
//   after forward:      verify()   -> accepted d_1..d_m, then the resampled or
//                       bonus token; the engine emits them (stop checks per
//                       token) and on_step_done() truncates the k - m rejected
//                       slots from the block table (KvCacheManager::truncate)
//
// Random draws (sampled mode), all from the request's seed, so seeded runs
// repeat exactly: drafted token at output index j uses the speculative stream
// (seed scrambled, counter j) lane 0, its acceptance test lane 1; the resampled
// or bonus token at output index j uses the request's own SamplerRng at
// counter j (the lane plain decoding would use). The request's rng advances
// once per emitted token.
//
// Owns the draft models (one per path, shared by requests) and per-request
// state and statistics (kept after the request finishes, for the CLI). A
// self-drafting request's scratch blocks are lookahead blocks of the engine's
// own KV pool (KvCacheManager::allocate_lookahead, from the reserve of
// EngineConfig::num_scratch_blocks), so the pool's invariants, snapshot and KV
// events see them; it holds them from its first draft until it finishes.
//
// Thread: engine thread only.
#pragma once

#include <map>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "core/ids.h"
#include "core/result.h"
#include "kv/kv_cache_manager.h"
#include "model/model.h"
#include "sampling/sampler_settings.h"
#include "speculative/adaptive_k.h"
#include "speculative/draft_proposer.h"
#include "speculative/speculative_config.h"
#include "speculative/speculative_stats.h"
#include "speculative/verifier.h"
#include "tokenizer/tokenizer.h"
#include "trace/trace_event.h"

namespace gb {

class DraftModel;
class SamplerChain;

struct SpeculativeLimits {
  int32_t max_context = 0;
  int32_t max_seqs = 1;
  int32_t block_size = 16;
};

// Scratch blocks one self-drafting request needs for drafts of up to k_max tokens.
int32_t self_draft_scratch_blocks(int32_t k_max, int32_t block_size);

// One token verification emits, in order.
struct EmittedToken {
  TokenId token = -1;
  TokenOrigin origin = TokenOrigin::Plain;
};

struct VerifyOutcome {
  std::vector<EmittedToken> tokens;  // accepted drafts, then the resampled or bonus token
  SpeculativeEvent event;            // step, timings and tokens filled in
};

class SpeculativeDecoder {
 public:
  // kv: the target's block pool (the scheduler's), lending self-draft scratch.
  SpeculativeDecoder(std::shared_ptr<const Model> target, std::shared_ptr<const Tokenizer> tokenizer,
                     Backend& target_backend, KvCacheManager& kv, const SpeculativeLimits& limits,
                     KvCacheManager* window_kv = nullptr);
  ~SpeculativeDecoder();

  // Sets up the request's drafter (loading a draft model on first use, with the
  // vocabulary check). Errors name the file or the setting.
  Status add_request(RequestId id, const SpeculativeConfig& config, const SamplerSettings& settings);
  bool has(RequestId id) const { return requests_.contains(id); }

  // Before schedule(): the draft for a decoding request, at most max_k tokens
  // (the engine's bound from max_tokens and the context). Empty: decode plainly.
  // tokens: prompt + output; block_ids: the request's target block table;
  // window_block_ids: its window-group table (empty: the target has none).
  Result<std::vector<TokenId>> propose(RequestId id, std::span<const TokenId> tokens, int32_t num_prompt, int32_t max_k,
                                       std::span<const int32_t> block_ids, uint64_t output_index,
                                       std::span<const int32_t> window_block_ids = {});
  // After the forward: verify the first num_drafted tokens of the draft
  // (schedule() may have cut it) against logits (num_drafted + 1 rows of vocab).
  // history: prompt + output before the draft; chain/rng: the request's own.
  // before_row (optional) runs before the chain sees row i, with the drafted
  // tokens before it: a format sets the grammar mask of the state after them.
  using BeforeRow = std::function<void(int32_t row, std::span<const TokenId> drafted_before)>;
  Result<VerifyOutcome> verify(RequestId id, std::span<const float> logits, int32_t num_drafted,
                               std::span<const TokenId> history, SamplerChain& chain, SamplerRng& rng,
                               double forward_ms, int64_t step, const BeforeRow& before_row = {});
  // A step that gave a speculative request a token without a draft; `decode`
  // false for the prefill step (counted, but not a baseline for the timing).
  void on_plain_step(RequestId id, double ms, bool decode);
  // Requests with live drafters, in id order (deterministic drafting order).
  std::vector<RequestId> live_requests() const;
  // The request ended: drafter state released, statistics kept.
  void finish(RequestId id);
  // The new sampler settings apply to the draft chain too.
  void set_sampler_settings(RequestId id, const SamplerSettings& settings);

  std::optional<SpeculativeStats> stats(RequestId id) const;

 private:
  struct PerRequest;
  Result<std::shared_ptr<DraftModel>> draft_model(const SpeculativeConfig& config);
  // n lookahead blocks lent to `id` as plain ids, or empty when the reserve is short.
  std::vector<int32_t> take_scratch(RequestId id, int32_t n);

  std::shared_ptr<const Model> target_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  Backend& backend_;
  KvCacheManager& kv_;
  KvCacheManager* window_kv_ = nullptr;  // the window group's pool (kv/scheduler.h), lending its scratch too
  SpeculativeLimits limits_;
  std::map<std::string, std::shared_ptr<DraftModel>> draft_models_;  // by path
  std::unordered_map<RequestId, std::unique_ptr<PerRequest>> requests_;
  std::unordered_map<RequestId, SpeculativeStats> finished_;
};

}  // namespace gb
