// Comparison: one prompt, 2-6 named sampler settings ("lanes") x 1-32 samples
// per lane, run as one batch on one Engine so that the lanes differ only in
// their sampler settings (docs/compare.md).
//
// How it runs (a driver over the Engine's public API; it owns no tensors):
//   1. start():   the prompt is submitted once (retain_kv, one throw-away token)
//                 and prefilled once.
//   2. advance(): when the prompt request has finished, every lane x sample is a
//                 Engine::fork_with_settings() child at the end of the prompt
//                 (a lane with a KV eviction policy: a request of its own over
//                 the prompt, see ComparisonLane::kv_policy):
//                 the prompt's full KV blocks are shared copy-on-write (ref count
//                 1 + children), only the partial last block is copied. The
//                 children then decode together in the same engine steps and
//                 free their own blocks as each finishes (not retained, so a
//                 pool too small for all at once still finishes: the others
//                 wait, or are preempted and recompute, with the same tokens).
//   3. observe(): every TraceEvent of the engine is fed in; the comparison keeps
//                 the tokens (with records) and finish reasons of its requests.
//   4. when all children are done, the statistics and divergence points are
//      computed (finalize); close() releases every block the comparison holds.
//
// Seeds. One seed S per comparison. Sample j of lane i draws from the
// counter-based SamplerRng stream of seed
//   crn:      sample_seed(S, j, 0)                    -- the same for every lane
//   not crn:  sample_seed(S, j, lane_stream_key(settings_i))
// and a stream is a pure function of (seed, generated-token index), so with CRN
// every lane consumes the same uniform at each position, even after the lanes
// diverge in length; without CRN each distinct setting has its own luck, and
// identical settings still get identical streams (and tokens).
//
// Thread: the engine's thread (like Engine itself).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "core/result.h"
#include "kv/isolation_key.h"
#include "kv/kv_policy.h"
#include "sampling/sampler_settings.h"
#include "trace/trace_event.h"

namespace gb {

class Engine;

inline constexpr int32_t kMinComparisonLanes = 2;
inline constexpr int32_t kMaxComparisonLanes = 6;
inline constexpr int32_t kMaxComparisonSamples = 32;

struct ComparisonLane {
  std::string name;
  SamplerSettings settings;  // the whole chain (order included); seed and max_tokens are the comparison's
  // KV eviction (kv/kv_policy.h): a lane with a policy other than full runs
  // its samples as requests of their own over the prompt (an evicting cache
  // is pruned while the prompt is computed, so it cannot share the prompt's
  // full blocks), in the same engine steps as the other lanes. The policy is
  // not part of the lane's stream key: lanes that differ only in their policy
  // draw the same numbers, so what tells them apart is the eviction.
  KvPolicy kv_policy;
};

struct ComparisonSpec {
  std::vector<TokenId> prompt_ids;  // BOS included if wanted
  std::vector<ComparisonLane> lanes;
  int32_t num_samples = 1;
  uint64_t seed = 0;
  bool crn = false;
  int32_t max_tokens = 64;  // generated tokens per sample (replaces each lane's max_tokens)
  bool ignore_eos = false;
  // A chat prompt (runtime/chat_request.h): the turn's end-of-generation ids,
  // added to every lane's stop tokens, and the prompt's isolation key (the
  // template's hash). Empty for a plain prompt.
  std::vector<TokenId> stop_token_ids;
  IsolationKey isolation;
};

// Lane count, sample count, names (non-empty, distinct), max_tokens, every
// lane's settings and KV policy (resolved in place by start()); the message
// names the lane.
Status validate_comparison(const ComparisonSpec& spec);

// The seed of sample `sample` of a lane whose stream key is `lane_key` (0 under CRN).
uint64_t comparison_sample_seed(uint64_t seed, int32_t sample, uint64_t lane_key);
// A hash of the settings that decide tokens (seed, max_tokens and top_n_record
// left out): equal settings give equal keys. Never 0.
uint64_t lane_stream_key(const SamplerSettings& settings);

// Per-sample statistics (docs/compare.md defines each).
struct SampleStats {
  int32_t length = 0;               // generated tokens
  double mean_logprob = 0.0;        // mean log p(token) under the raw model (softmax of logits, T = 1)
  double mean_entropy = 0.0;        // mean entropy (nats) of the raw model's next-token distribution
  double mean_entropy_sampled = 0.0;// mean entropy of the distribution after the lane's chain
  double distinct_1 = 0.0;          // distinct tokens / tokens
  double distinct_2 = 0.0;          // distinct bigrams / bigrams
  double repetition_rate = 0.0;     // seq-rep-4: 1 - distinct 4-grams / 4-grams
};
// From the generated tokens and their records (records without candidates are
// left out of the means).
SampleStats compute_sample_stats(const std::vector<TokenSampledEvent>& tokens);
// First index where `a` and `b` differ (a shorter one differs where it ends), or
// nullopt when they are equal.
std::optional<int32_t> first_divergence(const std::vector<TokenId>& a, const std::vector<TokenId>& b);
// log p(chosen) under the raw model from a token's record; nullopt without candidates.
std::optional<double> raw_logprob(const TokenRecord& record);

struct ComparisonSample {
  int32_t lane = 0;
  int32_t sample = 0;
  uint64_t seed = 0;
  RequestId request;
  std::vector<TokenSampledEvent> tokens;  // generated tokens with records, in order
  std::vector<TokenId> token_ids;
  std::string text;
  bool finished = false;
  std::string stop_reason;                 // "stop" | "max_tokens" | "length" | "error" ...
  std::string error;                       // the request's error message, if any
  double tokens_per_s = 0.0;               // 1000 / mean time per output token after the first
  std::optional<int32_t> first_divergence; // vs lane 0, same sample (set by finalize)
  SampleStats stats;                       // set by finalize
};

class Comparison {
 public:
  // Validates the spec and submits the prompt to `engine` (which must be started).
  static Result<std::unique_ptr<Comparison>> start(Engine& engine, ComparisonSpec spec);

  // Every event the engine emits, in order (others' events are ignored).
  void observe(const TraceEvent& event);
  // Between engine steps: forks the lanes once the prompt is prefilled, and
  // finalizes when every sample has finished. Errors: a fork that failed.
  Status advance(Engine& engine);
  bool forked() const { return forked_; }
  bool done() const { return done_; }
  // Cancels samples still running and releases the prompt's KV blocks.
  // Idempotent.
  void close(Engine& engine);

  const ComparisonSpec& spec() const { return spec_; }
  RequestId prompt_request() const { return prompt_request_; }
  // lanes x samples, lane-major.
  const std::vector<ComparisonSample>& samples() const { return samples_; }
  const ComparisonSample& sample(int32_t lane, int32_t s) const;
  // Full prompt blocks each forked sample shares with the prompt request (taken
  // at fork time; samples of a lane with a KV policy share none).
  int32_t num_prompt_blocks_shared() const { return num_prompt_blocks_shared_; }
  // Ids of the prompt's blocks that the samples share, at fork time.
  const std::vector<int32_t>& shared_prompt_blocks() const { return shared_prompt_blocks_; }
  double wall_ms() const { return wall_ms_; }
  const std::string& prompt_error() const { return prompt_error_; }

 private:
  Comparison() = default;
  ComparisonSample* find(RequestId id);
  Result<RequestId> start_sample(Engine& engine, const ComparisonLane& lane, const SamplerSettings& settings);
  Status fork_lanes(Engine& engine);
  void finalize();

  ComparisonSpec spec_;
  RequestId prompt_request_;
  bool prompt_done_ = false;
  std::string prompt_error_;
  bool forked_ = false;
  bool done_ = false;
  bool closed_ = false;
  std::vector<ComparisonSample> samples_;
  std::unordered_map<uint64_t, size_t> sample_of_;  // request id -> index in samples_
  int32_t num_prompt_blocks_shared_ = 0;
  std::vector<int32_t> shared_prompt_blocks_;
  double start_ms_ = 0.0;
  double wall_ms_ = 0.0;
};

// Runs a whole comparison on `engine` (steps until done, then closes it) and
// returns it; `on_event` sees every engine event on the way (may be empty).
Result<std::unique_ptr<Comparison>> run_comparison(Engine& engine, ComparisonSpec spec,
                                                   const std::function<void(const TraceEvent&)>& on_event = {});

}  // namespace gb
