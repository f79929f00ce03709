// TraceEvent: one immutable fact about what the engine did, in the order it
// happened. The engine thread appends events to one stream; the UI, the CLI, the
// exporters and the benchmarks only read them. Every number the UI shows comes
// from these events, so a recorded trace replays to the same screens.
//
// Schema version kTraceSchemaVersion; the JSON form of every event is documented
// in docs/trace-format.md (bump the version when a field changes meaning).
//
// Common fields: `seq` (0, 1, 2 ... in stream order) and `t_us` (microseconds since
// the engine started). Request-scoped events carry the request id.
// Threads: plain values, safe to copy to any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/ids.h"
#include "kv/kv_event.h"
#include "sampling/token_record.h"

namespace gb {

inline constexpr int kTraceSchemaVersion = 1;

// A request entered the queue.
struct RequestSubmittedEvent {
  RequestId request;
  std::vector<TokenId> prompt_ids;
  int32_t max_tokens = 0;
  std::string priority;           // "interactive" | "batch"
  std::string sampler_settings;   // JSON text of the request's SamplerSettings
  std::optional<RequestId> parent;  // set for a fork (branch)
  int32_t fork_position = 0;        // tokens shared with the parent
  // Why the engine itself made the request, when it did: "inspect" (an
  // inspection's prefill, Engine::inspect); absent for the callers' requests.
  std::optional<std::string> purpose;
};

// The scheduler gave the request KV blocks for the first time (or again after a
// preemption).
struct RequestAdmittedEvent {
  RequestId request;
  int32_t num_cached_tokens = 0;  // prompt tokens served by the prefix cache
  double queue_ms = 0.0;          // submitted -> admitted
};

// Some of a request's tokens ran through the model without producing a token
// (prompt prefill, recompute after preemption).
struct PrefillChunkEvent {
  RequestId request;
  int64_t step = 0;
  int32_t start_position = 0;
  int32_t num_tokens = 0;
};

// Where a generated token came from (speculative decoding marks its own).
enum class TokenOrigin : uint8_t { Plain, Accepted, Resampled, Bonus, Forced };
const char* token_origin_name(TokenOrigin origin);

struct TokenSampledEvent {
  RequestId request;
  int64_t step = 0;
  int32_t position = 0;      // position of the token in the request (prompt included)
  int32_t index = 0;         // 0 for the first generated token
  TokenId token = 0;
  std::string text;          // complete UTF-8 text this token made available (may be empty)
  TokenOrigin origin = TokenOrigin::Plain;
  TokenRecord record;        // candidates, stage probabilities, draw, timings
};

struct RequestPreemptedEvent {
  RequestId request;
  int64_t step = 0;
};

struct RequestFinishedEvent {
  RequestId request;
  std::string reason;  // "stop" | "max_tokens" | "length" | "cancelled" | "error"
  int32_t num_prompt_tokens = 0;
  int32_t num_generated = 0;
  int32_t num_cached_tokens = 0;
  double ttft_ms = 0.0;   // submitted -> first token
  double tpot_ms = 0.0;   // mean time per output token after the first
  double e2e_ms = 0.0;    // submitted -> finished
  std::string text;       // the whole generated text
};

// One engine step: a forward pass over the scheduled tokens.
struct StepEvent {
  int64_t step = 0;
  double start_ms = 0.0;     // since engine start
  double schedule_ms = 0.0;
  double forward_ms = 0.0;
  double sample_ms = 0.0;
  int32_t num_seqs = 0;
  int32_t num_prefill_tokens = 0;
  int32_t num_decode_tokens = 0;
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_blocks_owned = 0;
  int32_t num_blocks_free = 0;
  int32_t num_blocks_cached = 0;
  int32_t num_blocks_total = 0;
  int32_t num_prefix_hit_tokens = 0;
  int32_t num_preemptions = 0;
  // The window group's pool after the step (kv/scheduler.h: the sliding layers
  // of Gemma 2/3); absent when the model has none.
  std::optional<int32_t> num_window_blocks_owned;
  std::optional<int32_t> num_window_blocks_cached;
  std::optional<int32_t> num_window_blocks_total;
};

// A change in the KV block pool (see kv/kv_event.h).
struct KvTraceEvent {
  int64_t step = 0;
  KvEvent kv;
};

// One speculative verification (see the speculative decoding docs).
struct SpeculativeEvent {
  RequestId request;
  int64_t step = 0;
  std::string drafter;                 // "draft", "ngram", "self"
  std::vector<TokenId> drafted;        // K proposed tokens
  std::vector<float> q;                // drafter probability of each drafted token
  std::vector<float> p;                // target probability of each drafted token
  int32_t num_accepted = 0;
  std::optional<TokenId> rejected;     // the first rejected drafted token
  TokenId next = 0;                    // the resampled or bonus token
  bool bonus = false;
  double draft_ms = 0.0;
  double verify_ms = 0.0;
};

// KV eviction (kv/kv_policy.h, docs/kv-eviction.md): a request's cache
// dropped tokens in this step. The sliding layers' window group never evicts
// (it keeps its window by position); this is the global layers' cache.
struct KvEvictionEvent {
  RequestId request;
  int64_t step = 0;
  std::string policy;               // describe_kv_policy: "h2o B=512 S=0 R=256"
  std::string reason;               // why these went: "outside the recent window" ...
  std::vector<int32_t> positions;   // evicted in this step
  std::vector<float> mass;          // their accumulated attention mass (h2o, snapkv; else empty)
  int32_t num_kept = 0;             // positions the cache holds after the step
  // Every kKeptSnapshotEvery-th eviction event of a request (and its first):
  // every kept position and its mass (empty for sink), for the KV view's strip.
  std::vector<int32_t> kept_positions;
  std::vector<float> kept_mass;
};
inline constexpr int32_t kKeptSnapshotEvery = 8;

// The full-cache shadow of an evicting request (GenerationRequest::kv_shadow:
// the same prompt and tokens with every token kept, in the same batches) has
// reached one of its tokens: KL(full || pruned) of the two next-token
// distributions that chose token `index` of the answer, and what each gave it.
struct KvShadowEvent {
  RequestId request;            // the evicting request
  RequestId shadow;             // its full-cache shadow
  int64_t step = 0;
  int32_t position = 0;         // of the token in the request (prompt included)
  int32_t index = 0;            // 0 for the first generated token
  double kl = 0.0;              // KL(full || pruned), nats
  bool top1_agree = true;       // the two argmax agree
  double logprob_pruned = 0.0;  // of the token the request took
  double logprob_full = 0.0;
};

struct ErrorEvent {
  std::optional<RequestId> request;  // empty for engine-wide errors
  std::string message;
};

using TraceEventBody = std::variant<RequestSubmittedEvent, RequestAdmittedEvent, PrefillChunkEvent, TokenSampledEvent,
                                    RequestPreemptedEvent, RequestFinishedEvent, StepEvent, KvTraceEvent,
                                    SpeculativeEvent, KvEvictionEvent, KvShadowEvent, ErrorEvent>;

struct TraceEvent {
  uint64_t seq = 0;
  int64_t t_us = 0;
  TraceEventBody body;
};

// The event type's name as used in the JSON form ("request_submitted", ...).
const char* trace_event_type(const TraceEventBody& body);

}  // namespace gb
