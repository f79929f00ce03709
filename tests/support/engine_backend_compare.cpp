// Running a scenario on one backend and comparing two runs
// (engine_backend_compare.h states the comparison rules).
#include "engine_backend_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gb_test.h"
#include "kv/kv_cache_manager.h"
#include "kv/scheduler.h"

namespace gbtest {

namespace engine_compare_detail {
namespace {

void count_kv(const gb::KvEvent& kv, EngineCounts& c) {
  switch (kv.kind) {
    case gb::KvEventKind::Shared: ++c.shared_blocks; break;
    case gb::KvEventKind::Copied: ++c.copied_blocks; break;
    case gb::KvEventKind::WindowReleased: c.window_released += kv.block.value >= 0; break;
    default: break;
  }
}

void count_step(const gb::StepEvent& s, EngineCounts& c) {
  ++c.steps;
  c.max_seqs_in_step = std::max(c.max_seqs_in_step, s.num_seqs);
  c.mixed_steps += s.num_prefill_tokens > 0 && s.num_decode_tokens > 0;
}

void add_token(const gb::TokenSampledEvent& t, EngineRun& run) {
  RequestOutput& o = run.requests[t.request.value];
  o.tokens.push_back(t.token);
  o.records.push_back(t.record);
  o.origins.push_back(t.origin);
  ++run.counts.tokens;
  run.counts.records += !t.record.top.empty();
}

void add_submitted(const gb::RequestSubmittedEvent& s, EngineRun& run) {
  RequestOutput& o = run.requests[s.request.value];
  o.prompt = s.prompt_ids;
  if (s.parent) {
    o.parent = s.parent->value;
    ++run.counts.forks;
  }
}

void add_error(const gb::ErrorEvent& e, EngineRun& run) {
  if (!run.error.empty()) run.error += "; ";
  run.error += (e.request ? "request " + std::to_string(e.request->value) + ": " : std::string()) + e.message;
}

// The reference's top-1/top-2 logit gap (infinite when fewer than two were recorded).
float top_gap(const gb::TokenRecord& r) {
  if (r.top.size() < 2) return std::numeric_limits<float>::infinity();
  return r.top[0].logit - r.top[1].logit;
}

const gb::CandidateRecord* find_candidate(const gb::TokenRecord& r, gb::TokenId id) {
  for (const gb::CandidateRecord& c : r.top)
    if (c.id == id) return &c;
  return nullptr;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "a vs b (difference d)": the reference's value, the candidate's.
std::string versus(double want, double got) { return num(want) + " vs " + num(got) + " (difference " + num(got - want) + ")"; }

// "" when every id of `mine` that `other` lacks sits at most `tol` above
// other's last logit (a swap across the top-N boundary); `side` names mine.
std::string check_boundary(const gb::TokenRecord& mine, const gb::TokenRecord& other, double tol, const std::string& side) {
  const double other_last = other.top.back().logit;
  for (const gb::CandidateRecord& c : mine.top) {
    if (find_candidate(other, c.id) != nullptr || c.logit <= other_last + tol) continue;
    return "candidate " + std::to_string(c.id) + " (logit " + num(c.logit) + ") is in the top " +
           std::to_string(mine.top.size()) + " on " + side + " only, " + num(c.logit - other_last) +
           " above the other's last";
  }
  return {};
}

// The candidates present in both top-N lists: logits within tol, raw
// probabilities within expm1(2 tol) (log p moves by at most 2 tol).
std::string check_common_candidates(const gb::TokenRecord& want, const gb::TokenRecord& got, double tol,
                                    CompareReport& rep) {
  for (const gb::CandidateRecord& w : want.top) {
    const gb::CandidateRecord* g = find_candidate(got, w.id);
    if (g == nullptr) continue;
    const double d = std::abs(static_cast<double>(g->logit) - w.logit);
    rep.max_logit_diff = std::max(rep.max_logit_diff, d);
    if (!(d <= tol)) return "candidate " + std::to_string(w.id) + ": logit " + versus(w.logit, g->logit);
    const double dp = std::abs(static_cast<double>(g->prob_before) - w.prob_before);
    if (!(dp <= std::expm1(2 * tol)))
      return "candidate " + std::to_string(w.id) + ": probability " + versus(w.prob_before, g->prob_before);
  }
  return {};
}

// The chosen token's logit and log-probability, and the entropy.
std::string check_chosen(const gb::TokenRecord& want, const gb::TokenRecord& got, double tol, CompareReport& rep) {
  const double dz = std::abs(static_cast<double>(got.chosen_logit) - want.chosen_logit);
  rep.max_logit_diff = std::max(rep.max_logit_diff, dz);
  if (!(dz <= tol)) return "chosen logit " + versus(want.chosen_logit, got.chosen_logit);
  if (want.chosen_prob_before > 0.0f && got.chosen_prob_before > 0.0f) {
    const double want_lp = std::log(static_cast<double>(want.chosen_prob_before));
    const double got_lp = std::log(static_cast<double>(got.chosen_prob_before));
    rep.max_logprob_diff = std::max(rep.max_logprob_diff, std::abs(got_lp - want_lp));
    if (!(std::abs(got_lp - want_lp) <= 2 * tol)) return "chosen log-probability " + versus(want_lp, got_lp);
  } else if (want.chosen_prob_before != got.chosen_prob_before) {
    return "chosen probability " + versus(want.chosen_prob_before, got.chosen_prob_before);
  }
  const double dh = std::abs(static_cast<double>(got.entropy_before) - want.entropy_before);
  rep.max_entropy_diff = std::max(rep.max_entropy_diff, dh);
  const double entropy_tol = tol * std::max(1.0, std::log(static_cast<double>(std::max(1, want.num_candidates_before))));
  if (!(dh <= entropy_tol)) return "entropy " + versus(want.entropy_before, got.entropy_before);
  return {};
}

// "" when the two records of one token agree (engine_backend_compare.h).
std::string compare_record(const gb::TokenRecord& want, const gb::TokenRecord& got, double tol, CompareReport& rep) {
  if (want.top.size() != got.top.size())
    return "records hold " + std::to_string(want.top.size()) + " vs " + std::to_string(got.top.size()) + " candidates";
  if (want.num_candidates_before != got.num_candidates_before)
    return "finite logits " + std::to_string(want.num_candidates_before) + " vs " + std::to_string(got.num_candidates_before);
  if (want.top.empty()) return {};  // nothing recorded on either side (a forced token)
  ++rep.num_records_compared;
  for (const std::string& why : {check_common_candidates(want, got, tol, rep), check_boundary(want, got, tol, "the reference"),
                          check_boundary(got, want, tol, "the candidate"), check_chosen(want, got, tol, rep)})
    if (!why.empty()) return why;
  return {};
}

struct RequestCompare {
  const EngineRun& ref;
  const EngineRun& cand;
  double tol;
  CompareReport& rep;
  bool diverged = false;  // a near-tie was accepted: requests built on its tokens may differ

  void fail(const std::string& what) { rep.failures.push_back(what); }

  // Tokens one by one until a divergence; true when every common token matched.
  bool compare_tokens(const std::string& what, const RequestOutput& want, const RequestOutput& got) {
    const size_t n = std::min(want.tokens.size(), got.tokens.size());
    for (size_t i = 0; i < n; ++i) {
      const std::string at = what + ", token " + std::to_string(i);
      if (want.tokens[i] != got.tokens[i]) {
        const float gap = top_gap(want.records[i]);
        const std::string pair = ref.backend + " chose " + std::to_string(want.tokens[i]) + ", " + cand.backend +
                                 " chose " + std::to_string(got.tokens[i]) + "; the reference's top-1/top-2 gap is " +
                                 num(gap) + " (tolerance " + num(tol) + ")";
        // Each of the two logits may move by the tolerance: a gap up to twice
        // it can swap them.
        if (gap <= 2 * tol) {
          rep.near_ties.push_back(at + ": " + pair + "; the rest of the request is not compared");
          diverged = true;
        } else {
          fail(at + ": " + pair);
        }
        return false;
      }
      if (const std::string why = compare_record(want.records[i], got.records[i], tol, rep); !why.empty()) {
        fail(at + ": " + why);
        return false;
      }
      ++rep.num_tokens_compared;
    }
    return true;
  }

  void compare(uint64_t id, const RequestOutput& want, const RequestOutput& got) {
    const std::string what = "request " + std::to_string(id);
    if (want.prompt != got.prompt || want.parent != got.parent) {
      if (diverged)
        rep.near_ties.push_back(what + ": not compared, its prompt follows an earlier near-tie");
      else
        fail(what + ": prompts (or parents) differ, " + std::to_string(want.prompt.size()) + " vs " +
             std::to_string(got.prompt.size()) + " tokens");
      return;
    }
    if (!compare_tokens(what, want, got)) return;
    if (want.tokens.size() != got.tokens.size())
      fail(what + ": " + std::to_string(want.tokens.size()) + " tokens on " + ref.backend + ", " +
           std::to_string(got.tokens.size()) + " on " + cand.backend);
    else if (want.finish_reason != got.finish_reason)
      fail(what + ": finished with '" + want.finish_reason + "' vs '" + got.finish_reason + "'");
  }
};

}  // namespace
}  // namespace engine_compare_detail

using namespace engine_compare_detail;

void collect_events(const std::vector<gb::TraceEvent>& events, EngineRun& run) {
  EngineCounts& c = run.counts;
  std::map<uint64_t, int32_t> chunks;
  for (const gb::TraceEvent& e : events) {
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      add_token(*t, run);
    } else if (const auto* s = std::get_if<gb::RequestSubmittedEvent>(&e.body)) {
      add_submitted(*s, run);
    } else if (const auto* a = std::get_if<gb::RequestAdmittedEvent>(&e.body)) {
      c.prefix_hit_tokens += a->num_cached_tokens;
    } else if (const auto* p = std::get_if<gb::PrefillChunkEvent>(&e.body)) {
      c.max_chunks_per_request = std::max(c.max_chunks_per_request, ++chunks[p->request.value]);
    } else if (std::holds_alternative<gb::RequestPreemptedEvent>(e.body)) {
      ++c.preemptions;
    } else if (const auto* f = std::get_if<gb::RequestFinishedEvent>(&e.body)) {
      run.requests[f->request.value].finish_reason = f->reason;
    } else if (const auto* kv = std::get_if<gb::KvTraceEvent>(&e.body)) {
      count_kv(kv->kv, c);
    } else if (const auto* st = std::get_if<gb::StepEvent>(&e.body)) {
      count_step(*st, c);
    } else if (const auto* sp = std::get_if<gb::SpeculativeEvent>(&e.body)) {
      ++c.verifications;
      c.drafted += static_cast<int64_t>(sp->drafted.size());
      c.accepted += sp->num_accepted;
      ++run.requests[sp->request.value].num_verifications;
      run.requests[sp->request.value].num_accepted += sp->num_accepted;
    } else if (const auto* err = std::get_if<gb::ErrorEvent>(&e.body)) {
      add_error(*err, run);
    }
  }
}

EngineRun run_scenario(const Scenario& scenario, const NamedBackend& backend) {
  EngineRun run;
  run.backend = backend.name;
  auto made = backend.make(scenario.model);
  if (!made) {
    run.error = "no backend: " + made.error().message;
    return run;
  }
  run.supports_window_group = (*made)->supports_window_group();
  gb::EngineConfig config = scenario.config;
  config.check_invariants = true;
  gb::Engine engine(scenario.model, scenario.tokenizer, std::move(*made), config);
  if (gb::Status st = engine.start(); !st) {
    run.error = "start: " + st.error().message;
    return run;
  }
  run.window_group = engine.scheduler().window_kv_cache() != nullptr;
  const gb::Status driven = scenario.drive(engine);
  if (const gb::KvCacheManager* window = engine.scheduler().window_kv_cache())
    run.counts.window_group_released = window->pool().num_window_released_total();
  collect_events(engine.drain_events(), run);
  if (!driven) run.error = "driver: " + driven.error().message + (run.error.empty() ? "" : "; " + run.error);
  return run;
}

std::string CompareReport::summary() const {
  return std::to_string(num_tokens_compared) + " tokens and " + std::to_string(num_records_compared) +
         " records compared, " + std::to_string(near_ties.size()) + " near-ties, largest differences: logit " +
         num(max_logit_diff) + ", log-probability " + num(max_logprob_diff) + ", entropy " + num(max_entropy_diff);
}

CompareReport compare_runs(const EngineRun& reference, const EngineRun& candidate, float logit_tolerance) {
  CompareReport rep;
  for (const EngineRun* run : {&reference, &candidate})
    if (!run->error.empty()) rep.failures.push_back(run->backend + ": " + run->error);
  if (reference.requests.size() != candidate.requests.size())
    rep.failures.push_back(std::to_string(reference.requests.size()) + " requests on " + reference.backend + ", " +
                           std::to_string(candidate.requests.size()) + " on " + candidate.backend);
  RequestCompare cmp{reference, candidate, static_cast<double>(logit_tolerance), rep};
  for (const auto& [id, want] : reference.requests) {
    const auto it = candidate.requests.find(id);
    if (it == candidate.requests.end()) {
      cmp.fail("request " + std::to_string(id) + ": missing on " + candidate.backend);
      continue;
    }
    cmp.compare(id, want, it->second);
  }
  return rep;
}

std::string describe_counts(const EngineCounts& c) {
  return std::to_string(c.steps) + " steps (batch up to " + std::to_string(c.max_seqs_in_step) + ", " +
         std::to_string(c.mixed_steps) + " mixed), " + std::to_string(c.tokens) + " tokens (" +
         std::to_string(c.records) + " recorded), prefill chunks per request up to " +
         std::to_string(c.max_chunks_per_request) + ", prefix-hit tokens " + std::to_string(c.prefix_hit_tokens) +
         ", preemptions " + std::to_string(c.preemptions) + ", forks " + std::to_string(c.forks) + " (shared blocks " +
         std::to_string(c.shared_blocks) + ", copied " + std::to_string(c.copied_blocks) + "), window releases " +
         std::to_string(c.window_released) + " (window group " + std::to_string(c.window_group_released) +
         "), verifications " + std::to_string(c.verifications) + " (accepted " + std::to_string(c.accepted) + " of " +
         std::to_string(c.drafted) + ")";
}

void check_scenario(const Scenario& scenario, const BackendPair& pair) {
  const EngineRun reference = run_scenario(scenario, pair.reference);
  const EngineRun candidate = run_scenario(scenario, pair.candidate);
  for (const EngineRun* run : {&reference, &candidate}) {
    const std::string where = scenario.name + " on " + run->backend;
    std::printf("%s: %s\n", where.c_str(), describe_counts(run->counts).c_str());
    QVERIFY2(run->error.empty(), (where + ": " + run->error).c_str());
    const std::string missing = scenario.exercised(*run);
    QVERIFY2(missing.empty(), (where + " did not exercise what it is about: " + missing).c_str());
  }
  const CompareReport rep = compare_runs(reference, candidate, pair.logit_tolerance);
  for (const std::string& note : rep.near_ties) std::printf("NOTE: %s: near-tie: %s\n", scenario.name.c_str(), note.c_str());
  std::printf("%s, %s vs %s: %s\n", scenario.name.c_str(), pair.reference.name.c_str(), pair.candidate.name.c_str(),
              rep.summary().c_str());
  std::fflush(stdout);
  std::string failure;
  if (!rep.failures.empty())
    failure = scenario.name + ": " + rep.failures.front() +
              (rep.failures.size() > 1 ? " (and " + std::to_string(rep.failures.size() - 1) + " more)" : "");
  QVERIFY2(rep.failures.empty(), failure.c_str());
  QVERIFY2(rep.num_tokens_compared > 0, (scenario.name + ": no token was compared").c_str());
}

gb::GenerationRequest greedy_request(std::vector<gb::TokenId> prompt, int32_t max_tokens, int32_t top_n) {
  gb::GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.top_n_record = top_n;
  r.ignore_eos = true;  // fixed lengths: both engines run the same schedule
  return r;
}

}  // namespace gbtest
