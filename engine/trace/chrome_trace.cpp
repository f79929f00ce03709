// Builds the Chrome trace in two passes: first the step timings by step index
// (a prefill chunk is reported before its step's StepEvent, and is drawn at that
// step's forward interval), then every event in stream order.
//
// Nesting rule: viewers require complete events on one track to nest properly.
// Request phase spans are back to back (each phase change closes the previous
// span), and a prefill-chunk span is clamped into the phase span that contains
// its start, so the request track is always a proper two-level tree.
#include "trace/chrome_trace.h"

#include <algorithm>
#include <map>

#include "trace/json_fields.h"

namespace gb {
namespace {

using nlohmann::json;

struct StepTimes {
  double start_us = 0, schedule_us = 0, forward_us = 0, sample_us = 0;
};

struct Span {
  std::string name;
  double start_us = 0, end_us = 0;
  json args;
};

// One request's track: closed phase spans, the open phase, chunks and instants.
struct RequestTrack {
  uint64_t tid = 0;
  std::string phase;  // "" = none open
  double phase_start_us = 0;
  bool has_tokens = false;
  std::vector<Span> phases;
  std::vector<Span> chunks;
  std::vector<json> instants;

  void change_phase(const std::string& next, double t_us) {
    if (!phase.empty()) phases.push_back({phase, phase_start_us, std::max(t_us, phase_start_us), json::object()});
    phase = next;
    phase_start_us = t_us;
  }
};

json complete(const std::string& name, const char* cat, uint64_t tid, double ts, double dur, json args) {
  return {{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", kChromeEnginePid}, {"tid", tid},
          {"ts", ts},     {"dur", std::max(0.0, dur)}, {"args", std::move(args)}};
}

json instant(const std::string& name, const char* cat, uint64_t tid, double ts, const char* scope, json args) {
  return {{"name", name}, {"cat", cat}, {"ph", "i"}, {"s", scope}, {"pid", kChromeEnginePid},
          {"tid", tid},   {"ts", ts},   {"args", std::move(args)}};
}

json counter(const std::string& name, double ts, json args) {
  return {{"name", name}, {"ph", "C"}, {"pid", kChromeEnginePid}, {"ts", ts}, {"args", std::move(args)}};
}

json metadata_event(const char* what, uint64_t tid, json args) {
  return {{"name", what}, {"ph", "M"}, {"pid", kChromeEnginePid}, {"tid", tid}, {"args", std::move(args)}};
}

std::string token_label(const TokenSampledEvent& e) {
  // The viewer shows the name on the timeline: the text if there is any, else the id.
  const std::string text = trace_json::is_valid_utf8(e.text) ? e.text : "\xEF\xBF\xBD";
  return text.empty() ? "token " + std::to_string(e.token) : text;
}

class ChromeTraceBuilder {
 public:
  explicit ChromeTraceBuilder(const std::vector<TraceEvent>& events) {
    for (const TraceEvent& e : events)
      if (const auto* s = std::get_if<StepEvent>(&e.body))
        steps_[s->step] = {s->start_ms * 1000.0, s->schedule_ms * 1000.0, s->forward_ms * 1000.0,
                           s->sample_ms * 1000.0};
  }

  void add(const TraceEvent& e) {
    const auto t = static_cast<double>(e.t_us);
    last_us_ = std::max(last_us_, t);
    std::visit([&](const auto& body) { on(body, t); }, e.body);
  }

  json finish(const TraceHeader& header) {
    json out = json::array();
    out.push_back(metadata_event("process_name", kChromeStepTid, {{"name", "glassbox engine"}}));
    out.push_back(metadata_event("thread_name", kChromeStepTid, {{"name", "engine steps"}}));
    out.push_back(metadata_event("thread_sort_index", kChromeStepTid, {{"sort_index", 0}}));
    for (json& e : engine_events_) out.push_back(std::move(e));
    for (auto& [id, track] : requests_) {
      track.change_phase("", last_us_);  // an unfinished request's phase lasts to the end
      out.push_back(metadata_event("thread_name", track.tid, {{"name", "request " + std::to_string(id)}}));
      out.push_back(metadata_event("thread_sort_index", track.tid, {{"sort_index", id + 1}}));
      for (const Span& s : track.phases)
        out.push_back(complete(s.name, "request", track.tid, s.start_us, s.end_us - s.start_us, s.args));
      for (const Span& c : track.chunks) {
        Span clamped = c;
        for (const Span& p : track.phases)  // nest into the phase that contains the start
          if (c.start_us >= p.start_us && c.start_us <= p.end_us) {
            clamped.end_us = std::min(c.end_us, p.end_us);
            break;
          }
        out.push_back(complete(clamped.name, "prefill", track.tid, clamped.start_us,
                               clamped.end_us - clamped.start_us, clamped.args));
      }
      for (json& i : track.instants) out.push_back(std::move(i));
    }
    json metadata = {{"format", kTraceFormatName},
                     {"schema_version", header.schema_version},
                     {"engine_version", header.engine_version},
                     {"created", header.created},
                     {"model", header.model.name},
                     {"model_path", header.model.path},
                     {"model_sha256", header.model.sha256},
                     {"seed", header.seed}};
    return {{"traceEvents", std::move(out)}, {"displayTimeUnit", "ms"}, {"metadata", std::move(metadata)}};
  }

 private:
  RequestTrack& track(RequestId id) {
    RequestTrack& t = requests_[id.value];
    t.tid = kChromeRequestTidBase + id.value;
    return t;
  }

  void on(const RequestSubmittedEvent& e, double t) {
    RequestTrack& tr = track(e.request);
    tr.change_phase("queue", t);
  }
  void on(const RequestAdmittedEvent& e, double t) {
    RequestTrack& tr = track(e.request);
    tr.change_phase(tr.has_tokens ? "recompute" : "prefill", t);
  }
  void on(const PrefillChunkEvent& e, double t) {
    const auto it = steps_.find(e.step);
    // Without its StepEvent the chunk is drawn as a zero-length span at its event time.
    const double start = it == steps_.end() ? t : it->second.start_us + it->second.schedule_us;
    const double dur = it == steps_.end() ? 0.0 : it->second.forward_us;
    track(e.request).chunks.push_back({"prefill chunk", start, start + dur,
                                       {{"step", e.step}, {"start_position", e.start_position},
                                        {"num_tokens", e.num_tokens}}});
  }
  void on(const TokenSampledEvent& e, double t) {
    RequestTrack& tr = track(e.request);
    if (tr.phase != "decode") tr.change_phase("decode", t);
    tr.has_tokens = true;
    tr.instants.push_back(instant(token_label(e), "token", tr.tid, t, "t",
                                  {{"token", e.token}, {"index", e.index}, {"position", e.position},
                                   {"step", e.step}, {"origin", token_origin_name(e.origin)},
                                   {"prob", trace_json::real(e.record.chosen_prob)},
                                   {"entropy_before", trace_json::real(e.record.entropy_before)},
                                   {"entropy_after", trace_json::real(e.record.entropy_after)}}));
  }
  void on(const RequestPreemptedEvent& e, double t) {
    RequestTrack& tr = track(e.request);
    tr.change_phase("queue (preempted)", t);
    tr.instants.push_back(instant("preempted", "scheduler", tr.tid, t, "t", {{"step", e.step}}));
  }
  void on(const RequestFinishedEvent& e, double t) {
    RequestTrack& tr = track(e.request);
    tr.change_phase("", t);
    tr.instants.push_back(instant("finished: " + e.reason, "request", tr.tid, t, "t",
                                  {{"num_generated", e.num_generated}, {"ttft_ms", trace_json::real(e.ttft_ms)},
                                   {"tpot_ms", trace_json::real(e.tpot_ms)}, {"e2e_ms", trace_json::real(e.e2e_ms)}}));
  }
  void on(const StepEvent& e, double) {
    const StepTimes& s = steps_[e.step];
    const double total = s.schedule_us + s.forward_us + s.sample_us;
    engine_events_.push_back(complete("step " + std::to_string(e.step), "step", kChromeStepTid, s.start_us, total,
                                      {{"num_seqs", e.num_seqs},
                                       {"num_prefill_tokens", e.num_prefill_tokens},
                                       {"num_decode_tokens", e.num_decode_tokens},
                                       {"num_preemptions", e.num_preemptions},
                                       {"num_prefix_hit_tokens", e.num_prefix_hit_tokens}}));
    engine_events_.push_back(complete("schedule", "step", kChromeStepTid, s.start_us, s.schedule_us, json::object()));
    engine_events_.push_back(
        complete("forward", "step", kChromeStepTid, s.start_us + s.schedule_us, s.forward_us, json::object()));
    engine_events_.push_back(complete("sample", "step", kChromeStepTid, s.start_us + s.schedule_us + s.forward_us,
                                      s.sample_us, json::object()));
    const double end = s.start_us + total;
    engine_events_.push_back(counter("KV blocks", end,
                                     {{"used", e.num_blocks_owned},
                                      {"cached", e.num_blocks_cached},
                                      {"free", e.num_blocks_free}}));
    engine_events_.push_back(counter("requests", end, {{"running", e.num_running}, {"waiting", e.num_waiting}}));
    engine_events_.push_back(
        counter("step tokens", end, {{"prefill", e.num_prefill_tokens}, {"decode", e.num_decode_tokens}}));
  }
  void on(const KvTraceEvent&, double) {}
  void on(const KvEvictionEvent&, double) {}
  void on(const KvShadowEvent&, double) {}
  void on(const SpeculativeEvent& e, double t) {
    RequestTrack& tr = track(e.request);
    tr.instants.push_back(instant("speculative " + std::to_string(e.num_accepted) + "/" +
                                      std::to_string(e.drafted.size()),
                                  "speculative", tr.tid, t, "t",
                                  {{"drafter", e.drafter}, {"drafted", e.drafted}, {"num_accepted", e.num_accepted},
                                   {"bonus", e.bonus}, {"draft_ms", trace_json::real(e.draft_ms)},
                                   {"verify_ms", trace_json::real(e.verify_ms)}}));
  }
  void on(const ErrorEvent& e, double t) {
    json args = {{"message", trace_json::is_valid_utf8(e.message) ? e.message : "(not UTF-8)"}};
    if (e.request) args["request"] = e.request->value;
    engine_events_.push_back(instant("error", "error", kChromeStepTid, t, "g", std::move(args)));
  }

  std::map<int64_t, StepTimes> steps_;
  std::map<uint64_t, RequestTrack> requests_;  // ordered by id: stable output
  std::vector<json> engine_events_;
  double last_us_ = 0;  // latest event time seen
};

}  // namespace

json chrome_trace_json(const TraceHeader& header, const std::vector<TraceEvent>& events) {
  ChromeTraceBuilder builder(events);
  for (const TraceEvent& e : events) builder.add(e);
  return builder.finish(header);
}

Status write_chrome_trace(const std::string& path, const TraceHeader& header, const std::vector<TraceEvent>& events,
                          const AtomicWriteFailHook& hook) {
  const json trace = chrome_trace_json(header, events);
  auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  std::string out = "{\"traceEvents\":[\n";
  const json& list = trace["traceEvents"];
  for (size_t i = 0; i < list.size(); ++i) {
    out += dump(list[i]);
    out += i + 1 < list.size() ? ",\n" : "\n";
  }
  out += "],\n\"displayTimeUnit\":\"ms\",\n\"metadata\":" + dump(trace["metadata"]) + "}\n";
  return write_file_atomically(path, out, hook);
}

}  // namespace gb
