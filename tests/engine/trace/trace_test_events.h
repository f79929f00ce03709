// Hand-built trace events for the trace tests: one of every event type with
// awkward values on purpose (float bit patterns that print badly, -0, NaN,
// infinities, denormals, text that is not UTF-8, optional ids absent and set,
// the largest ids), so a round trip that loses anything shows up.
#pragma once

#include <bit>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "trace/trace_event.h"

namespace gbtest {

// Equal JSON values, where two numbers are equal when they are the same double
// or when one is a float (exactly) and the other narrows to it: a float field
// written widened ("0.10000000149011612") or in its shortest form ("0.1").
inline bool same_json_value(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    if (x == y) return true;
    // Narrowed only within float's range (narrowing beyond it is undefined).
    const auto in_range = [](double v) { return std::fabs(v) < (2.0 - 0x1p-24) * 0x1p127; };
    if (!in_range(x) || !in_range(y)) return false;
    const auto is_float = [](double v) { return static_cast<double>(static_cast<float>(v)) == v; };
    return static_cast<float>(x) == static_cast<float>(y) && (is_float(x) || is_float(y));
  }
  if (a.type() != b.type() || a.size() != b.size()) return false;
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !same_json_value(it.value(), b[it.key()])) return false;
    return true;
  }
  if (a.is_array()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_json_value(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

// Two JSON lines that are the same bytes except in how numbers are spelt, with
// the same values (same_json_value). Strings are the same in both lines, so
// digits inside them are replaced alike.
inline bool same_json_line(const std::string& a, const std::string& b) {
  static const std::regex number(R"(-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)");
  if (std::regex_replace(a, number, "0") != std::regex_replace(b, number, "0")) return false;
  return same_json_value(nlohmann::json::parse(a), nlohmann::json::parse(b));
}

inline gb::TokenRecord awkward_record() {
  gb::TokenRecord r;
  r.stages = {gb::SamplerStage::Penalties, gb::SamplerStage::TopK, gb::SamplerStage::TopP, gb::SamplerStage::Temperature};
  r.stage_active = {0, 1, 1, 1};
  r.num_candidates_before = 32000;
  r.num_candidates_after_stage = {32000, 40, 7, 7};
  gb::CandidateRecord a;
  a.id = 29871;
  a.logit = 0.1f;  // not 0.1: written "0.1", which must narrow back to these bits
  a.prob_before = std::bit_cast<float>(0x3f7ffffeu);  // just below 1
  a.prob_after_stage = {1.0f / 3.0f, 2.0f / 3.0f, -0.0f, std::numeric_limits<float>::denorm_min()};
  a.removed_by_stage = -1;
  gb::CandidateRecord b;
  b.id = 0;
  b.logit = -std::numeric_limits<float>::infinity();
  b.prob_before = std::numeric_limits<float>::min();
  b.prob_after_stage = {std::numeric_limits<float>::quiet_NaN(), 0.0f, 0.0f, 0.0f};
  b.removed_by_stage = 2;
  r.top = {a, b};
  r.entropy_before = 3.14159274f;
  r.entropy_after = std::numeric_limits<float>::max();
  r.chosen = 29871;
  r.chosen_logit = 16777217.0f;  // rounds to 2^24 in float; stored value must survive as is
  r.chosen_prob_before = 1e-30f;
  r.chosen_prob = 0.999999940f;
  r.chosen_rank = 0;
  r.rng_counter = ~uint64_t{0} - 5;
  r.draw = 0.1 + 0.2;  // 0.30000000000000004
  r.xtc_draw = std::nextafter(1.0, 0.0);
  r.xtc_fired = true;
  r.forward_ms = 1e-300;
  r.sample_ms = std::numeric_limits<double>::infinity();
  return r;
}

// One event of every type, seq 0..9, t_us increasing.
inline std::vector<gb::TraceEvent> every_event_type() {
  using namespace gb;
  std::vector<TraceEvent> events;
  auto add = [&](int64_t t_us, TraceEventBody body) {
    events.push_back({static_cast<uint64_t>(events.size()), t_us, std::move(body)});
  };
  add(0, RequestSubmittedEvent{RequestId{1}, {1, 450, 29871, 32000}, 64, "interactive",
                               R"({"temperature":0.8,"top_k":40})", std::nullopt, 0});
  add(15, RequestSubmittedEvent{RequestId{~uint64_t{0} - 1}, {}, 0, "batch", "", RequestId{1}, 3});
  add(20, RequestAdmittedEvent{RequestId{1}, 16, 0.02});
  add(35, PrefillChunkEvent{RequestId{1}, 0, 0, 4});
  TokenSampledEvent tok{RequestId{1}, 0, 4, 0, 29871, "caf\xc3\xa9 \xe2\x96", TokenOrigin::Resampled, awkward_record()};
  add(40, tok);
  add(41, RequestPreemptedEvent{RequestId{1}, 7});
  add(50, RequestFinishedEvent{RequestId{1}, "max_tokens", 4, 1, 16, 0.04, 0.0, 0.05, "\xff\xfe ok"});
  add(60, StepEvent{9, 0.125, 0.01, 1.5, 0.3, 2, 4, 1, 1, 1, 3, 61, 0, 64, 16, 1});
  add(61, KvTraceEvent{9, KvEvent{KvEventKind::Copied, BlockId{5}, RequestId{1}, BlockId{3}, 1, 0x0123456789abcdefULL}});
  add(62, KvTraceEvent{9, KvEvent{KvEventKind::Evicted, BlockId{0}, kNoRequest, BlockId{-1}, 0, ~uint64_t{0}}});
  add(70, SpeculativeEvent{RequestId{1}, 9, "ngram", {5, 6, 7}, {0.5f, 0.25f, 1e-8f}, {0.7f, 0.0f, 1.0f}, 1, 6, 8,
                           false, 0.2, 1.7});
  add(71, SpeculativeEvent{RequestId{1}, 10, "draft", {}, {}, {}, 0, std::nullopt, 2, true, 0.0, 0.0});
  add(80, ErrorEvent{std::nullopt, "engine: backend lost"});
  add(81, ErrorEvent{RequestId{1}, "request 1: \xc3"});
  // Added after every_event_v1.jsonl was written (last, so the earlier events keep their seq).
  add(90, KvEvictionEvent{RequestId{2}, 11, "h2o B=8 S=0 R=4", "lowest attention mass", {3, 5}, {0.125f, 0.5f}, 8,
                          {0, 1, 2, 4, 6, 7, 8, 9}, {2.5f, 1.0f, 0.75f, 0.625f, 1.5f, 1.25f, 1.0f, 0.0f}});
  add(91, KvEvictionEvent{RequestId{3}, 12, "sink B=6 S=2 R=4", "outside the recent window", {2}, {}, 6, {}, {}});
  add(92, KvShadowEvent{RequestId{2}, RequestId{4}, 12, 40, 3, 0.25, false, -1.5, -0.125});
  return events;
}

// A small run with hand-chosen times (all exact in binary), used by the Chrome
// trace and summary tests, which work out their expected numbers by hand:
//   t_us  seq  event
//      0    0  submitted r1 (prompt 4 tokens)
//    100    1  submitted r2 (prompt 20 tokens)
//    300    2  admitted r1 (0 cached)
//    310    3  prefill chunk r1, step 0, positions 0..3
//   2600    4  token r1 #0 (entropy 2.0 -> 0.5; candidates 100 -> top_k 40 -> top_p 5 -> temp 5)
//   2875    5  step 0: start 0.25 ms, schedule 0.125, forward 2.0, sample 0.5
//   3050    6  admitted r2 (16 cached)
//   3060    7  prefill chunk r2, step 1, positions 16..19
//   4300    8  token r1 #1 (entropy 1.0 -> 0.25; 100 -> 40 -> 12 -> 12)
//   4350    9  speculative r1: 4 drafted, 3 accepted
//   4360   10  speculative r1: 2 drafted, 0 accepted
//   4400   11  token r2 #0 (entropy 3.0 -> 1.5; 100 -> 40 -> 40 (top_p off) -> 1)
//   4500   12  step 1: start 3.0 ms, schedule 0.125, forward 1.0, sample 0.375
//   4600   13  preempted r2
//   4700   14  finished r1 (max_tokens)
inline std::vector<gb::TraceEvent> two_request_scenario() {
  using namespace gb;
  std::vector<TraceEvent> events;
  auto add = [&](int64_t t_us, TraceEventBody body) {
    events.push_back({static_cast<uint64_t>(events.size()), t_us, std::move(body)});
  };
  auto token = [](uint64_t request, int64_t step, int32_t index, float h_before, float h_after,
                  std::vector<int32_t> after, std::vector<uint8_t> active) {
    TokenSampledEvent t;
    t.request = RequestId{request};
    t.step = step;
    t.index = index;
    t.token = 100 + index;
    t.text = "x";
    t.record.stages = {SamplerStage::TopK, SamplerStage::TopP, SamplerStage::Temperature};
    t.record.stage_active = std::move(active);
    t.record.num_candidates_before = 100;
    t.record.num_candidates_after_stage = std::move(after);
    t.record.entropy_before = h_before;
    t.record.entropy_after = h_after;
    t.record.chosen = t.token;
    t.record.chosen_prob = 0.5f;
    return t;
  };
  auto step = [](int64_t index, double start, double schedule, double forward, double sample) {
    StepEvent s;
    s.step = index;
    s.start_ms = start;
    s.schedule_ms = schedule;
    s.forward_ms = forward;
    s.sample_ms = sample;
    s.num_seqs = 2;
    s.num_running = 1 + static_cast<int32_t>(index);
    s.num_waiting = 1 - static_cast<int32_t>(index);
    s.num_blocks_owned = 3 + static_cast<int32_t>(index);
    s.num_blocks_cached = 1;
    s.num_blocks_free = 60 - static_cast<int32_t>(index);
    s.num_blocks_total = 64;
    return s;
  };
  auto spec = [](int32_t num_drafted, int32_t num_accepted) {
    SpeculativeEvent s;
    s.request = RequestId{1};
    s.step = 1;
    s.drafter = "ngram";
    s.drafted.assign(static_cast<size_t>(num_drafted), 7);
    s.q.assign(static_cast<size_t>(num_drafted), 0.5f);
    s.p.assign(static_cast<size_t>(num_drafted), 0.5f);
    s.num_accepted = num_accepted;
    return s;
  };
  add(0, RequestSubmittedEvent{RequestId{1}, {1, 2, 3, 4}, 2, "interactive", "{}", std::nullopt, 0});
  add(100, RequestSubmittedEvent{RequestId{2}, std::vector<TokenId>(20, 5), 8, "batch", "{}", std::nullopt, 0});
  add(300, RequestAdmittedEvent{RequestId{1}, 0, 0.3});
  add(310, PrefillChunkEvent{RequestId{1}, 0, 0, 4});
  add(2600, token(1, 0, 0, 2.0f, 0.5f, {40, 5, 5}, {1, 1, 1}));
  add(2875, step(0, 0.25, 0.125, 2.0, 0.5));
  add(3050, RequestAdmittedEvent{RequestId{2}, 16, 2.95});
  add(3060, PrefillChunkEvent{RequestId{2}, 1, 16, 4});
  add(4300, token(1, 1, 1, 1.0f, 0.25f, {40, 12, 12}, {1, 1, 1}));
  add(4350, spec(4, 3));
  add(4360, spec(2, 0));
  add(4400, token(2, 1, 0, 3.0f, 1.5f, {40, 40, 1}, {1, 0, 1}));
  add(4500, step(1, 3.0, 0.125, 1.0, 0.375));
  add(4600, RequestPreemptedEvent{RequestId{2}, 2});
  add(4700, RequestFinishedEvent{RequestId{1}, "max_tokens", 4, 2, 0, 2.6, 1.7, 4.7, "xx"});
  return events;
}

}  // namespace gbtest
