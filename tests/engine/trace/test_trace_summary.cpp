// summarize() on the hand-timed scenario of trace_test_events.h. Every expected
// number below is worked out by hand from the table in that header.
#include <cmath>

#include "gb_test.h"
#include "trace/trace_summary.h"
#include "trace_test_events.h"

namespace {

void expect_near(const std::optional<double>& got, double want, const char* what) {
  QVERIFY2(got.has_value(), what);
  QVERIFY2(std::fabs(*got - want) <= 1e-9 * std::max(1.0, std::fabs(want)),
           (std::string(what) + ": got " + std::to_string(*got) + ", want " + std::to_string(want)).c_str());
}

const gb::StageRemoval* stage(const std::vector<gb::StageRemoval>& v, const std::string& name) {
  for (const auto& s : v)
    if (s.stage == name) return &s;
  return nullptr;
}

}  // namespace

GB_TEST(overall_numbers_match_the_hand_worked_values) {
  const gb::TraceSummary s = gb::summarize(gbtest::two_request_scenario());
  QCOMPARE(s.num_requests, 2);
  QCOMPARE(s.num_finished, 1);
  QCOMPARE(s.num_tokens, int64_t{3});
  QCOMPARE(s.num_steps, int64_t{2});
  QCOMPARE(s.num_errors, 0);
  QCOMPARE(s.duration_ms, 4.7);                      // 0 -> 4700 us
  expect_near(s.tokens_per_s, 3 / 0.0047, "tokens/s");  // 638.30
  expect_near(s.mean_ttft_ms, (2.6 + 4.3) / 2, "mean ttft");
  expect_near(s.max_ttft_ms, 4.3, "max ttft");
  expect_near(s.mean_tpot_ms, 1.7, "mean tpot");  // only r1 has two tokens
  expect_near(s.mean_step_ms, (2.625 + 1.5) / 2, "mean step");
  expect_near(s.mean_entropy_before, (2.0 + 1.0 + 3.0) / 3, "entropy before");
  expect_near(s.mean_entropy_after, (0.5 + 0.25 + 1.5) / 3, "entropy after");
  QCOMPARE(s.num_preemptions, 1);
  QCOMPARE(s.num_prefix_hit_tokens, int64_t{16});
  QCOMPARE(s.num_drafted, int64_t{6});
  QCOMPARE(s.num_accepted, int64_t{3});
  expect_near(s.acceptance_rate, 0.5, "acceptance");
}

GB_TEST(stage_removals_are_differences_of_candidate_counts) {
  const gb::TraceSummary s = gb::summarize(gbtest::two_request_scenario());
  QCOMPARE(s.stage_removals.size(), size_t{3});
  QCOMPARE(s.stage_removals[0].stage, std::string("top_k"));  // run order kept
  const auto* top_k = stage(s.stage_removals, "top_k");
  const auto* top_p = stage(s.stage_removals, "top_p");
  const auto* temp = stage(s.stage_removals, "temperature");
  QVERIFY(top_k && top_p && temp);
  QCOMPARE(top_k->num_removed, int64_t{60 + 60 + 60});
  QCOMPARE(top_p->num_removed, int64_t{35 + 28 + 0});
  QCOMPARE(temp->num_removed, int64_t{0 + 0 + 39});
  QCOMPARE(top_p->num_tokens, int64_t{3});
  QCOMPARE(top_p->num_active, int64_t{2});  // switched off for r2's token
  const auto* r2_temp = stage(s.requests[1].stage_removals, "temperature");
  QVERIFY(r2_temp != nullptr);
  QCOMPARE(r2_temp->num_removed, int64_t{39});
}

GB_TEST(per_request_numbers_match_the_hand_worked_values) {
  const gb::TraceSummary s = gb::summarize(gbtest::two_request_scenario());
  QCOMPARE(s.requests.size(), size_t{2});
  const gb::RequestSummary& r1 = s.requests[0];
  QCOMPARE(r1.request, gb::RequestId{1});
  QCOMPARE(r1.finish_reason, std::string("max_tokens"));
  QCOMPARE(r1.num_prompt_tokens, 4);
  QCOMPARE(r1.num_generated, 2);
  expect_near(r1.queue_ms, 0.3, "r1 queue");
  expect_near(r1.ttft_ms, 2.6, "r1 ttft");
  expect_near(r1.tpot_ms, 1.7, "r1 tpot");        // (4300 - 2600) / (2 - 1) us
  expect_near(r1.e2e_ms, 4.7, "r1 e2e");
  expect_near(r1.tokens_per_s, 2 / 0.0047, "r1 tokens/s");
  expect_near(r1.mean_entropy_before, 1.5, "r1 entropy before");
  expect_near(r1.mean_entropy_after, 0.375, "r1 entropy after");
  expect_near(r1.acceptance_rate, 0.5, "r1 acceptance");
  QCOMPARE(r1.num_preemptions, 0);

  const gb::RequestSummary& r2 = s.requests[1];
  QVERIFY(r2.finish_reason.empty());
  QCOMPARE(r2.num_prompt_tokens, 20);
  expect_near(r2.queue_ms, 2.95, "r2 queue");     // 100 -> 3050 us
  expect_near(r2.ttft_ms, 4.3, "r2 ttft");        // 100 -> 4400 us
  QVERIFY(!r2.tpot_ms.has_value());               // one token: no inter-token time
  expect_near(r2.e2e_ms, 4.3, "r2 e2e");          // unfinished: up to its last token
  expect_near(r2.tokens_per_s, 1 / 0.0043, "r2 tokens/s");
  QCOMPARE(r2.num_preemptions, 1);
  QCOMPARE(r2.num_prefix_hit_tokens, int64_t{16});
  QVERIFY(!r2.acceptance_rate.has_value());
}

GB_TEST(empty_trace_has_no_made_up_numbers) {
  const gb::TraceSummary s = gb::summarize({});
  QCOMPARE(s.num_requests, 0);
  QVERIFY(!s.mean_ttft_ms && !s.tokens_per_s && !s.mean_entropy_before && !s.acceptance_rate);
  const nlohmann::json j = gb::trace_summary_to_json(s);
  QVERIFY(j["mean_ttft_ms"].is_null());
  QVERIFY(gb::format_trace_summary(s).find("TTFT            mean -") != std::string::npos);
}
