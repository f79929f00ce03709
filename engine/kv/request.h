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
