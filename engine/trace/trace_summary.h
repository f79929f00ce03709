// TraceSummary: the numbers a person asks of a trace — latency per request and
// overall, throughput, entropies, what each sampler stage removed, preemptions,
// prefix-cache hits and speculative acceptance — computed from the events alone
// (so a recorded trace summarizes the same as a live run).
//
// Definitions (times from the events' t_us, so they work for unfinished
// requests and do not depend on the engine's own TTFT bookkeeping):
//   ttft     = first token_sampled.t_us - request_submitted.t_us
//   tpot     = (last token t_us - first token t_us) / (num_generated - 1); needs >= 2 tokens
//   e2e      = request_finished.t_us (else the last token's t_us) - submitted t_us
//   tokens/s = num_generated / e2e; overall: all tokens / (last event - first event)
//   entropy  = mean of TokenRecord::entropy_before / entropy_after over the tokens, nats
//   removed by stage s in one token = (s == 0 ? num_candidates_before
//                                              : num_candidates_after_stage[s-1])
//                                     - num_candidates_after_stage[s]
//   prefix hit tokens = sum of request_admitted.num_cached_tokens
//   acceptance = sum num_accepted / sum drafted tokens over speculative events
// Values that do not exist for a request (no token yet) are nullopt / JSON null.
// Threads: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "trace/trace_event.h"

namespace gb {

struct StageRemoval {
  std::string stage;          // canonical stage name
  int64_t num_removed = 0;    // candidates removed, summed over tokens
  int64_t num_tokens = 0;     // tokens whose chain ran this stage
  int64_t num_active = 0;     // of those, how many had the stage switched on
};

struct RequestSummary {
  RequestId request;
  std::string finish_reason;  // "" while unfinished
  int32_t num_prompt_tokens = 0;
  int32_t num_generated = 0;        // token_sampled events
  std::optional<double> queue_ms;   // submitted -> first admission
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2e_ms;
  std::optional<double> tokens_per_s;
  std::optional<double> mean_entropy_before;  // nats
  std::optional<double> mean_entropy_after;   // nats
  int32_t num_preemptions = 0;
  int64_t num_prefix_hit_tokens = 0;
  int64_t num_drafted = 0;
  int64_t num_accepted = 0;
  std::optional<double> acceptance_rate;
  std::vector<StageRemoval> stage_removals;  // stages in first-seen order
};

struct TraceSummary {
  int32_t num_requests = 0;
  int32_t num_finished = 0;
  int64_t num_tokens = 0;
  int64_t num_steps = 0;
  int32_t num_errors = 0;
  double duration_ms = 0.0;  // first to last event
  std::optional<double> mean_ttft_ms, max_ttft_ms;
  std::optional<double> mean_tpot_ms;  // over requests with >= 2 tokens
  std::optional<double> tokens_per_s;
  std::optional<double> mean_step_ms;  // schedule + forward + sample
  std::optional<double> mean_entropy_before, mean_entropy_after;  // over all tokens
  int32_t num_preemptions = 0;
  int64_t num_prefix_hit_tokens = 0;
  int64_t num_drafted = 0;
  int64_t num_accepted = 0;
  std::optional<double> acceptance_rate;
  std::vector<StageRemoval> stage_removals;
  std::vector<RequestSummary> requests;  // by request id
};

TraceSummary summarize(const std::vector<TraceEvent>& events);

nlohmann::json trace_summary_to_json(const TraceSummary& summary);
// A readable multi-line report (the CLI's default output).
std::string format_trace_summary(const TraceSummary& summary);

}  // namespace gb
