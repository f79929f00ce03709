// Chrome Trace Event export on the hand-timed two-request scenario
// (trace_test_events.h): the file parses as JSON with traceEvents /
// displayTimeUnit / metadata; steps are split into schedule / forward / sample
// at the times worked out by hand; each request has its own track with back to
// back phase spans; tokens are instants; KV and request counters exist; and
// every track's complete events nest properly (what viewers require).
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "gb_test.h"
#include "trace/chrome_trace.h"
#include "trace_test_events.h"

namespace {

using nlohmann::json;

json written_trace() {
  const std::string path = gbtest::temp_dir() + "/chrome.json";
  gb::TraceHeader header;
  header.model.name = "stories260K";
  header.created = "2025-01-02T03:04:05Z";
  const gb::Status s = gb::write_chrome_trace(path, header, gbtest::two_request_scenario());
  if (!s.ok()) return json();
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str(), nullptr, false);
}

// The complete event on `tid` called `name` starting at `ts` (null if none).
const json* find_x(const json& events, uint64_t tid, const std::string& name, double ts) {
  for (const json& e : events)
    if (e["ph"] == "X" && e["tid"] == tid && e["name"] == name && e["ts"].get<double>() == ts) return &e;
  return nullptr;
}

void expect_span(const json& events, uint64_t tid, const std::string& name, double ts, double dur) {
  const json* e = find_x(events, tid, name, ts);
  QVERIFY2(e != nullptr, (name + " at " + std::to_string(ts) + " on tid " + std::to_string(tid)).c_str());
  QCOMPARE((*e)["dur"].get<double>(), dur);
}

}  // namespace

GB_TEST(chrome_trace_is_json_with_the_expected_top_level) {
  const json t = written_trace();
  QVERIFY(t.is_object());
  QVERIFY(t["traceEvents"].is_array());
  QCOMPARE(t["displayTimeUnit"].get<std::string>(), std::string("ms"));
  QCOMPARE(t["metadata"]["model"].get<std::string>(), std::string("stories260K"));
  std::map<std::string, int> phases;
  for (const json& e : t["traceEvents"]) {
    QVERIFY(e.contains("ph") && e.contains("pid") && e.contains("name"));
    if (e["ph"] != "M") QVERIFY(e["ts"].is_number());
    ++phases[e["ph"].get<std::string>()];
  }
  // 2 steps x 4 spans + 2 requests x (phases + chunk) = 8 + (3 + 1) + (4 + 1) X events.
  QCOMPARE(phases["X"], 8 + 4 + 5);
  QCOMPARE(phases["C"], 2 * 3);  // KV blocks, requests, step tokens per step
  // 3 tokens + 2 speculative + 1 preemption + 1 finish.
  QCOMPARE(phases["i"], 7);
  QVERIFY(phases["M"] >= 3 + 2 * 2);
}

GB_TEST(steps_split_into_schedule_forward_sample) {
  const json events = written_trace()["traceEvents"];
  expect_span(events, gb::kChromeStepTid, "step 0", 250, 2625);
  expect_span(events, gb::kChromeStepTid, "schedule", 250, 125);
  expect_span(events, gb::kChromeStepTid, "forward", 375, 2000);
  expect_span(events, gb::kChromeStepTid, "sample", 2375, 500);
  expect_span(events, gb::kChromeStepTid, "step 1", 3000, 1500);
  expect_span(events, gb::kChromeStepTid, "forward", 3125, 1000);
  bool saw_kv = false;
  for (const json& e : events)
    if (e["ph"] == "C" && e["name"] == "KV blocks" && e["ts"] == 4500.0) {
      QCOMPARE(e["args"]["used"].get<int>(), 4);
      QCOMPARE(e["args"]["free"].get<int>(), 59);
      QCOMPARE(e["args"]["cached"].get<int>(), 1);
      saw_kv = true;
    }
  QVERIFY(saw_kv);
}

GB_TEST(each_request_has_its_own_track_of_phases) {
  const json events = written_trace()["traceEvents"];
  const uint64_t r1 = gb::kChromeRequestTidBase + 1, r2 = gb::kChromeRequestTidBase + 2;
  expect_span(events, r1, "queue", 0, 300);
  expect_span(events, r1, "prefill", 300, 2300);
  expect_span(events, r1, "decode", 2600, 2100);
  expect_span(events, r1, "prefill chunk", 375, 2000);  // step 0's forward
  expect_span(events, r2, "queue", 100, 2950);
  expect_span(events, r2, "prefill", 3050, 1350);
  expect_span(events, r2, "decode", 4400, 200);
  expect_span(events, r2, "queue (preempted)", 4600, 100);  // open until the last event
  expect_span(events, r2, "prefill chunk", 3125, 1000);
  int tokens_r1 = 0;
  for (const json& e : events)
    if (e["ph"] == "i" && e["cat"] == "token" && e["tid"] == r1) {
      QCOMPARE(e["s"].get<std::string>(), std::string("t"));
      ++tokens_r1;
    }
  QCOMPARE(tokens_r1, 2);
  bool named = false;
  for (const json& e : events)
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == r2) named = e["args"]["name"] == "request 2";
  QVERIFY(named);
}

GB_TEST(complete_events_nest_on_every_track) {
  const json events = written_trace()["traceEvents"];
  std::map<uint64_t, std::vector<std::pair<double, double>>> by_tid;  // tid -> (start, end)
  for (const json& e : events)
    if (e["ph"] == "X") {
      const double ts = e["ts"].get<double>();
      QVERIFY(e["dur"].get<double>() >= 0);
      by_tid[e["tid"].get<uint64_t>()].push_back({ts, ts + e["dur"].get<double>()});
    }
  QCOMPARE(by_tid.size(), size_t{3});
  for (auto& [tid, spans] : by_tid) {
    // Sort parents before children (earlier start, then longer), then check with a stack.
    std::sort(spans.begin(), spans.end(),
              [](auto a, auto b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> open_ends;
    for (auto [start, end] : spans) {
      while (!open_ends.empty() && open_ends.back() <= start) open_ends.pop_back();
      QVERIFY2(open_ends.empty() || end <= open_ends.back(), ("overlap on tid " + std::to_string(tid)).c_str());
      open_ends.push_back(end);
    }
  }
}
