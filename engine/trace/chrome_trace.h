// Chrome Trace Event Format export (the JSON that chrome://tracing, Perfetto
// UI and speedscope open): {"traceEvents":[...],"displayTimeUnit":"ms",
// "metadata":{...}}. Times are microseconds since the engine started.
//
// Mapping (docs/trace-format.md, "Chrome trace"):
//   pid 1 "glassbox engine"
//     tid 1 "engine steps": "step N" complete events ("ph":"X") split into
//           nested "schedule" / "forward" / "sample" children;
//     counters ("ph":"C") at the end of each step: "KV blocks" {used, cached,
//           free}, "requests" {running, waiting}, "step tokens" {prefill, decode};
//     errors: global instant events.
//   tid 1000 + request id "request N": back-to-back phase spans "queue",
//     "prefill", "decode", "recompute" (after a preemption), "queue (preempted)";
//     "prefill chunk" spans at the step's forward time, nested in the phase span;
//     one instant event ("ph":"i","s":"t") per sampled token, per preemption and
//     per speculative verification.
// KV block events are not mapped (they are per-block detail; the counters carry
// the pool state).
// Threads: pure functions plus file I/O.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/result.h"
#include "trace/trace_event.h"
#include "trace/trace_header.h"

namespace gb {

inline constexpr int kChromeEnginePid = 1;
inline constexpr int kChromeStepTid = 1;
inline constexpr uint64_t kChromeRequestTidBase = 1000;

nlohmann::json chrome_trace_json(const TraceHeader& header, const std::vector<TraceEvent>& events);

// Written atomically (atomic_file.h), one trace event per line.
Status write_chrome_trace(const std::string& path, const TraceHeader& header, const std::vector<TraceEvent>& events,
                          const AtomicWriteFailHook& hook = {});

}  // namespace gb
