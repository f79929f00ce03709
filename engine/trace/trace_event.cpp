#include "trace/trace_event.h"

namespace gb {

const char* token_origin_name(TokenOrigin origin) {
  switch (origin) {
    case TokenOrigin::Plain: return "plain";
    case TokenOrigin::Accepted: return "accepted";
    case TokenOrigin::Resampled: return "resampled";
    case TokenOrigin::Bonus: return "bonus";
    case TokenOrigin::Forced: return "forced";
  }
  return "?";
}

const char* trace_event_type(const TraceEventBody& body) {
  struct Namer {
    const char* operator()(const RequestSubmittedEvent&) const { return "request_submitted"; }
    const char* operator()(const RequestAdmittedEvent&) const { return "request_admitted"; }
    const char* operator()(const PrefillChunkEvent&) const { return "prefill_chunk"; }
    const char* operator()(const TokenSampledEvent&) const { return "token_sampled"; }
    const char* operator()(const RequestPreemptedEvent&) const { return "request_preempted"; }
    const char* operator()(const RequestFinishedEvent&) const { return "request_finished"; }
    const char* operator()(const StepEvent&) const { return "step"; }
    const char* operator()(const KvTraceEvent&) const { return "kv"; }
    const char* operator()(const SpeculativeEvent&) const { return "speculative"; }
    const char* operator()(const ErrorEvent&) const { return "error"; }
  };
  return std::visit(Namer{}, body);
}

}  // namespace gb
