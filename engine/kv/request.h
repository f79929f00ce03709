// Request: one generation request as the scheduler sees it -- "computed tokens
// catching up with total tokens". Prefill, chunked prefill, decode, prefix hits
// and recompute after preemption are all the same thing: schedule the tokens
// in [num_tokens_computed, num_tokens_total()) when budget and blocks allow.
//
//   tokens: | prompt (num_prompt) ................ | output ........... |
//           |<---- num_tokens_computed ---->|                          |
//           |<------------------- num_tokens_total() --------------->|
//
// The history is kept once, in `tokens`, and handed out as spans (valid until
// the request changes: the scheduler appends after each step).
//
// The last output token is never computed before it is sampled; a request is
// decoding when only that one token is left. Owned by the Scheduler; engine
// thread only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/ids.h"
#include "kv/isolation_key.h"
#include "kv/kv_policy.h"

namespace gb {

// Interactive requests are always scheduled before batch requests.
enum class Priority : uint8_t { Interactive = 0, Batch = 1 };

enum class RequestState : uint8_t {
  Waiting,    // submitted, holds no blocks
  Running,    // holds blocks, scheduled each step while budget allows
  Preempted,  // lost its blocks under pressure; waits to recompute prompt + output
  Finished,
  Cancelled,
};

enum class FinishReason : uint8_t {
  None,
  Stop,       // the engine saw a stop token / condition
  MaxTokens,  // the output reached max_tokens
  Length,     // prompt + output reached the context limit (config or pool capacity)
  Cancelled,
};

const char* request_state_name(RequestState state);
const char* finish_reason_name(FinishReason reason);

// What a caller submits.
struct RequestSpec {
  RequestId id;
  std::vector<TokenId> prompt_ids;
  int32_t max_tokens = 256;
  Priority priority = Priority::Interactive;
  IsolationKey isolation;
  bool use_prefix_cache = true;
  // Keep the KV blocks after the request finishes, so it can be forked later
  // (branching a conversation); Scheduler::release() frees them, and so does
  // pressure on the pool (SchedulerConfig::evict_retained, max_retained).
  bool retain_kv = false;
  // Output tokens given up front (a branch's forced first token when the parent
  // no longer holds its KV): they count as generated, and are computed like the
  // prompt (prefix hits included) before the first sampled token.
  std::vector<TokenId> initial_output;
  // KV eviction (kv/kv_policy.h; resolved by the scheduler): full keeps
  // everything. A request that evicts never uses the prefix cache.
  KvPolicy kv_policy;
};

struct Request {
  RequestId id;
  std::vector<TokenId> tokens;      // prompt, then output
  int32_t num_prompt = 0;
  int32_t num_tokens_computed = 0;  // tokens whose K/V is in this request's blocks
  int32_t max_tokens = 0;
  Priority priority = Priority::Interactive;
  uint64_t arrival = 0;             // submission order, for FIFO within a priority
  RequestState state = RequestState::Waiting;
  IsolationKey isolation;
  bool use_prefix_cache = true;
  bool retain_kv = false;
  int32_t num_prefix_hit_tokens = 0;  // summed over admissions
  int32_t num_preemptions = 0;
  // KV eviction (kv/scheduler.h, "KV eviction"). kv_positions: the position
  // each slot of the leader's table holds, when slots are not positions
  // (a request that evicts, or a fork of one); empty: slot p holds position p.
  KvPolicy kv_policy;
  std::vector<int32_t> kv_positions;  // (slots) or empty
  std::vector<float> kv_mass;         // (slots) attention mass received, policies that rank by it
  int32_t kv_reuse_slot = -1;         // this step's decode token overwrites this slot (-1: appended)
  bool kv_pruned = false;             // snapkv: the prompt was pruned
  int32_t num_evicted = 0;            // tokens evicted so far (since the last admission)
  int32_t kv_inherited = 0;           // a fork of an evicted cache: positions before this were the parent's choice
  int32_t kv_fork_point = 0;          // a fork: the tokens it shared (its cache may exceed the budget until it runs)

  // Slots of the leader's table that hold computed tokens (between steps).
  int32_t num_kv_slots() const {
    return kv_positions.empty() ? num_tokens_computed : static_cast<int32_t>(kv_positions.size());
  }

  int32_t num_tokens_prompt() const { return num_prompt; }
  int32_t num_tokens_output() const { return num_tokens_total() - num_prompt; }
  int32_t num_tokens_total() const { return static_cast<int32_t>(tokens.size()); }
  TokenId token_at(int32_t pos) const { return tokens[static_cast<size_t>(pos)]; }
  // prompt + output (admission, prefix matching, sampling history).
  std::span<const TokenId> all_tokens() const { return tokens; }
  std::span<const TokenId> prompt() const { return all_tokens().first(static_cast<size_t>(num_prompt)); }
  std::span<const TokenId> output() const { return all_tokens().subspan(static_cast<size_t>(num_prompt)); }
  bool is_decoding() const {
    return num_tokens_computed >= num_tokens_prompt() && num_tokens_total() - num_tokens_computed == 1;
  }
  // Scheduling order: interactive first, then earlier arrival. Smaller ranks first.
  bool ranks_before(const Request& other) const {
    if (priority != other.priority) return priority < other.priority;
    return arrival < other.arrival;
  }
};

}  // namespace gb
