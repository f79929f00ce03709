// summarize(): one pass over the events into per-request accumulators, then the
// derived numbers. Formatting for the CLI lives here too so `trace summary` and
// any other front end print the same thing.
#include "trace/trace_summary.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "sampling/sampler_stage.h"

namespace gb {
namespace {

using nlohmann::json;

struct RequestAccumulator {
  RequestSummary out;
  std::optional<int64_t> submitted_us, admitted_us, first_token_us, last_token_us, finished_us;
  double sum_entropy_before = 0, sum_entropy_after = 0;
};

// Adds one token's per-stage removals into `into`, keeping stage order.
void add_removals(const TokenRecord& r, std::vector<StageRemoval>& into) {
  int32_t before = r.num_candidates_before;
  for (size_t s = 0; s < r.stages.size() && s < r.num_candidates_after_stage.size(); ++s) {
    const std::string name(sampler_stage_name(r.stages[s]));
    auto it = std::find_if(into.begin(), into.end(), [&](const StageRemoval& x) { return x.stage == name; });
    if (it == into.end()) it = into.insert(into.end(), StageRemoval{name, 0, 0, 0});
    const int32_t after = r.num_candidates_after_stage[s];
    it->num_removed += before - after;
    it->num_tokens += 1;
    it->num_active += (s < r.stage_active.size() && r.stage_active[s] != 0) ? 1 : 0;
    before = after;
  }
}

void merge_removals(const std::vector<StageRemoval>& from, std::vector<StageRemoval>& into) {
  for (const StageRemoval& x : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const StageRemoval& y) { return y.stage == x.stage; });
    if (it == into.end()) it = into.insert(into.end(), StageRemoval{x.stage, 0, 0, 0});
    it->num_removed += x.num_removed;
    it->num_tokens += x.num_tokens;
    it->num_active += x.num_active;
  }
}

double ms_between(int64_t from_us, int64_t to_us) { return static_cast<double>(to_us - from_us) / 1000.0; }

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json removals_json(const std::vector<StageRemoval>& removals) {
  json a = json::array();
  for (const StageRemoval& r : removals)
    a.push_back({{"stage", r.stage}, {"num_removed", r.num_removed}, {"num_tokens", r.num_tokens},
                 {"num_active", r.num_active}});
  return a;
}

std::string fmt(const std::optional<double>& v, const char* unit, int decimals = 2) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, *v, unit);
  return buf;
}

}  // namespace

namespace {

// Sums over the whole trace, besides the per-request accumulators.
struct TraceTotals {
  std::map<uint64_t, RequestAccumulator> requests;  // by request id
  double sum_step_ms = 0, sum_entropy_before = 0, sum_entropy_after = 0;

  RequestAccumulator& request(RequestId id) {
    RequestAccumulator& a = requests[id.value];
    a.out.request = id;
    return a;
  }
};

// One event into the accumulators (the pass over the trace).
void accumulate(const TraceEvent& e, TraceTotals& totals, TraceSummary& s) {
  const int64_t t = e.t_us;
  if (const auto* sub = std::get_if<RequestSubmittedEvent>(&e.body)) {
    RequestAccumulator& a = totals.request(sub->request);
    a.submitted_us = t;
    a.out.num_prompt_tokens = static_cast<int32_t>(sub->prompt_ids.size());
  } else if (const auto* adm = std::get_if<RequestAdmittedEvent>(&e.body)) {
    RequestAccumulator& a = totals.request(adm->request);
    if (!a.admitted_us) a.admitted_us = t;
    a.out.num_prefix_hit_tokens += adm->num_cached_tokens;
  } else if (const auto* tok = std::get_if<TokenSampledEvent>(&e.body)) {
    RequestAccumulator& a = totals.request(tok->request);
    if (!a.first_token_us) a.first_token_us = t;
    a.last_token_us = t;
    a.out.num_generated += 1;
    a.sum_entropy_before += static_cast<double>(tok->record.entropy_before);
    a.sum_entropy_after += static_cast<double>(tok->record.entropy_after);
    totals.sum_entropy_before += static_cast<double>(tok->record.entropy_before);
    totals.sum_entropy_after += static_cast<double>(tok->record.entropy_after);
    add_removals(tok->record, a.out.stage_removals);
  } else if (const auto* pre = std::get_if<RequestPreemptedEvent>(&e.body)) {
    totals.request(pre->request).out.num_preemptions += 1;
  } else if (const auto* fin = std::get_if<RequestFinishedEvent>(&e.body)) {
    RequestAccumulator& a = totals.request(fin->request);
    a.finished_us = t;
    a.out.finish_reason = fin->reason;
  } else if (const auto* st = std::get_if<StepEvent>(&e.body)) {
    s.num_steps += 1;
    totals.sum_step_ms += st->schedule_ms + st->forward_ms + st->sample_ms;
  } else if (const auto* spec = std::get_if<SpeculativeEvent>(&e.body)) {
    RequestAccumulator& a = totals.request(spec->request);
    a.out.num_drafted += static_cast<int64_t>(spec->drafted.size());
    a.out.num_accepted += spec->num_accepted;
  } else if (std::holds_alternative<ErrorEvent>(e.body)) {
    s.num_errors += 1;
  }
}

// A request's derived numbers (latencies, rates, means) from its accumulator.
RequestSummary finish_request(const RequestAccumulator& a) {
  RequestSummary r = a.out;
  if (a.submitted_us && a.admitted_us) r.queue_ms = ms_between(*a.submitted_us, *a.admitted_us);
  if (a.submitted_us && a.first_token_us) r.ttft_ms = ms_between(*a.submitted_us, *a.first_token_us);
  if (r.num_generated >= 2) r.tpot_ms = ms_between(*a.first_token_us, *a.last_token_us) / (r.num_generated - 1);
  const std::optional<int64_t> end_us = a.finished_us ? a.finished_us : a.last_token_us;
  if (a.submitted_us && end_us) r.e2e_ms = ms_between(*a.submitted_us, *end_us);
  if (r.e2e_ms && *r.e2e_ms > 0) r.tokens_per_s = r.num_generated / (*r.e2e_ms / 1000.0);
  if (r.num_generated > 0) {
    r.mean_entropy_before = a.sum_entropy_before / r.num_generated;
    r.mean_entropy_after = a.sum_entropy_after / r.num_generated;
  }
  if (r.num_drafted > 0) r.acceptance_rate = static_cast<double>(r.num_accepted) / static_cast<double>(r.num_drafted);
  return r;
}

}  // namespace

TraceSummary summarize(const std::vector<TraceEvent>& events) {
  TraceSummary s;
  TraceTotals totals;
  for (const TraceEvent& e : events) accumulate(e, totals, s);
  if (!events.empty()) s.duration_ms = ms_between(events.front().t_us, events.back().t_us);
  if (s.num_steps > 0) s.mean_step_ms = totals.sum_step_ms / static_cast<double>(s.num_steps);

  double sum_ttft = 0, sum_tpot = 0;
  int num_ttft = 0, num_tpot = 0;
  for (const auto& [id, a] : totals.requests) {
    const RequestSummary r = finish_request(a);
    s.num_requests += 1;
    s.num_finished += r.finish_reason.empty() ? 0 : 1;
    s.num_tokens += r.num_generated;
    s.num_preemptions += r.num_preemptions;
    s.num_prefix_hit_tokens += r.num_prefix_hit_tokens;
    s.num_drafted += r.num_drafted;
    s.num_accepted += r.num_accepted;
    if (r.ttft_ms) {
      sum_ttft += *r.ttft_ms;
      ++num_ttft;
      s.max_ttft_ms = std::max(s.max_ttft_ms.value_or(*r.ttft_ms), *r.ttft_ms);
    }
    if (r.tpot_ms) {
      sum_tpot += *r.tpot_ms;
      ++num_tpot;
    }
    merge_removals(r.stage_removals, s.stage_removals);
    s.requests.push_back(r);
  }
  if (num_ttft > 0) s.mean_ttft_ms = sum_ttft / num_ttft;
  if (num_tpot > 0) s.mean_tpot_ms = sum_tpot / num_tpot;
  if (s.duration_ms > 0) s.tokens_per_s = static_cast<double>(s.num_tokens) / (s.duration_ms / 1000.0);
  if (s.num_tokens > 0) {
    s.mean_entropy_before = totals.sum_entropy_before / static_cast<double>(s.num_tokens);
    s.mean_entropy_after = totals.sum_entropy_after / static_cast<double>(s.num_tokens);
  }
  if (s.num_drafted > 0) s.acceptance_rate = static_cast<double>(s.num_accepted) / static_cast<double>(s.num_drafted);
  return s;
}

json trace_summary_to_json(const TraceSummary& s) {
  json requests = json::array();
  for (const RequestSummary& r : s.requests)
    requests.push_back({{"request", r.request.value}, {"finish_reason", r.finish_reason},
                        {"num_prompt_tokens", r.num_prompt_tokens}, {"num_generated", r.num_generated},
                        {"queue_ms", opt(r.queue_ms)}, {"ttft_ms", opt(r.ttft_ms)}, {"tpot_ms", opt(r.tpot_ms)},
                        {"e2e_ms", opt(r.e2e_ms)}, {"tokens_per_s", opt(r.tokens_per_s)},
                        {"mean_entropy_before", opt(r.mean_entropy_before)},
                        {"mean_entropy_after", opt(r.mean_entropy_after)}, {"num_preemptions", r.num_preemptions},
                        {"num_prefix_hit_tokens", r.num_prefix_hit_tokens}, {"num_drafted", r.num_drafted},
                        {"num_accepted", r.num_accepted}, {"acceptance_rate", opt(r.acceptance_rate)},
                        {"stage_removals", removals_json(r.stage_removals)}});
  return {{"num_requests", s.num_requests}, {"num_finished", s.num_finished}, {"num_tokens", s.num_tokens},
          {"num_steps", s.num_steps}, {"num_errors", s.num_errors}, {"duration_ms", s.duration_ms},
          {"mean_ttft_ms", opt(s.mean_ttft_ms)}, {"max_ttft_ms", opt(s.max_ttft_ms)},
          {"mean_tpot_ms", opt(s.mean_tpot_ms)}, {"tokens_per_s", opt(s.tokens_per_s)},
          {"mean_step_ms", opt(s.mean_step_ms)}, {"mean_entropy_before", opt(s.mean_entropy_before)},
          {"mean_entropy_after", opt(s.mean_entropy_after)}, {"num_preemptions", s.num_preemptions},
          {"num_prefix_hit_tokens", s.num_prefix_hit_tokens}, {"num_drafted", s.num_drafted},
          {"num_accepted", s.num_accepted}, {"acceptance_rate", opt(s.acceptance_rate)},
          {"stage_removals", removals_json(s.stage_removals)}, {"requests", requests}};
}

std::string format_trace_summary(const TraceSummary& s) {
  std::string out;
  char line[256];
  auto add = [&](const char* f, auto... args) {
    std::snprintf(line, sizeof line, f, args...);
    out += line;
  };
  add("requests        %d (%d finished), %lld tokens, %lld steps, %d errors\n", s.num_requests, s.num_finished,
      static_cast<long long>(s.num_tokens), static_cast<long long>(s.num_steps), s.num_errors);
  add("duration        %.2f ms, %s\n", s.duration_ms, fmt(s.tokens_per_s, " tokens/s").c_str());
  add("TTFT            mean %s, max %s\n", fmt(s.mean_ttft_ms, " ms").c_str(), fmt(s.max_ttft_ms, " ms").c_str());
  add("TPOT            mean %s\n", fmt(s.mean_tpot_ms, " ms").c_str());
  add("step            mean %s\n", fmt(s.mean_step_ms, " ms").c_str());
  add("entropy         %s before sampling, %s after (nats)\n", fmt(s.mean_entropy_before, "", 3).c_str(),
      fmt(s.mean_entropy_after, "", 3).c_str());
  add("preemptions     %d\n", s.num_preemptions);
  add("prefix hits     %lld tokens\n", static_cast<long long>(s.num_prefix_hit_tokens));
  if (s.num_drafted > 0)
    add("speculative     %lld / %lld drafted tokens accepted (%s)\n", static_cast<long long>(s.num_accepted),
        static_cast<long long>(s.num_drafted), fmt(s.acceptance_rate ? std::optional(*s.acceptance_rate * 100) : std::nullopt, "%", 1).c_str());
  if (!s.stage_removals.empty()) {
    out += "removed by stage (candidates, summed over tokens; active/ran)\n";
    for (const StageRemoval& r : s.stage_removals)
      add("  %-12s %10lld   %lld/%lld\n", r.stage.c_str(), static_cast<long long>(r.num_removed),
          static_cast<long long>(r.num_active), static_cast<long long>(r.num_tokens));
  }
  out += "request  reason      prompt  tokens   queue ms    TTFT ms    TPOT ms     e2e ms   tok/s  preempt  prefix\n";
  for (const RequestSummary& r : s.requests)
    add("%7llu  %-10s %7d %7d %10s %10s %10s %10s %7s %8d %7lld\n", static_cast<unsigned long long>(r.request.value),
        r.finish_reason.empty() ? "(running)" : r.finish_reason.c_str(), r.num_prompt_tokens, r.num_generated,
        fmt(r.queue_ms, "").c_str(), fmt(r.ttft_ms, "").c_str(), fmt(r.tpot_ms, "").c_str(),
        fmt(r.e2e_ms, "").c_str(), fmt(r.tokens_per_s, "", 1).c_str(), r.num_preemptions,
        static_cast<long long>(r.num_prefix_hit_tokens));
  return out;
}

}  // namespace gb
