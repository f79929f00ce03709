// `glassbox-cli trace summary|export-chrome|validate` on a hand-built trace
// (trace_test_events.h) whose summary numbers are worked out by hand there, and
// on broken files (the message must carry FILE:LINE).
#include "cli_runner.h"
#include "gb_test.h"
#include "trace/trace_jsonl.h"
#include "trace/trace_schema.h"
#include "trace_test_events.h"

namespace {

std::string scenario_file() {
  gb::TraceHeader header;
  header.engine_version = "0.1.0";
  header.model.name = "hand-built";
  const std::string path = gbtest::temp_dir() + "/scenario.jsonl";
  if (!gb::write_trace_jsonl(path, header, gbtest::two_request_scenario()).ok()) return {};
  return path;
}

}  // namespace

GB_TEST(summary_json_has_the_hand_worked_numbers) {
  const std::string path = scenario_file();
  QVERIFY(!path.empty());
  const auto r = gbtest::run_cli("trace summary --json '" + path + "'", false);
  QCOMPARE(r.exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  QVERIFY2(j.is_object(), r.output.c_str());
  QCOMPARE(j["num_tokens"].get<int>(), 3);
  QCOMPARE(j["mean_ttft_ms"].get<double>(), (2.6 + 4.3) / 2);
  QCOMPARE(j["num_preemptions"].get<int>(), 1);
  QCOMPARE(j["acceptance_rate"].get<double>(), 0.5);
  QCOMPARE(j["requests"][1]["queue_ms"].get<double>(), 2.95);
}

GB_TEST(summary_text_lists_requests_and_stages) {
  const auto r = gbtest::run_cli("trace summary '" + scenario_file() + "'");
  QCOMPARE(r.exit_code, 0);
  QVERIFY2(r.output.find("requests        2 (1 finished), 3 tokens, 2 steps") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("TTFT            mean 3.45 ms, max 4.30 ms") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("  top_k               180   3/3") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("  top_p                63   2/3") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("(running)") != std::string::npos, r.output.c_str());
}

GB_TEST(export_chrome_writes_a_trace_viewers_open) {
  const std::string out = gbtest::temp_dir() + "/scenario.chrome.json";
  const auto r = gbtest::run_cli("trace export-chrome '" + scenario_file() + "' '" + out + "'");
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  const nlohmann::json j = nlohmann::json::parse(gbtest::read_text(out), nullptr, false);
  QVERIFY(j.is_object() && j["traceEvents"].is_array() && !j["traceEvents"].empty());
  QCOMPARE(j["displayTimeUnit"].get<std::string>(), std::string("ms"));
}

GB_TEST(validate_accepts_ours_and_names_the_bad_line) {
  const std::string path = scenario_file();
  const auto ok = gbtest::run_cli("trace validate '" + path + "'");
  QVERIFY2(ok.exit_code == 0, ok.output.c_str());
  QVERIFY2(ok.output.find("16 lines valid") != std::string::npos, ok.output.c_str());

  std::string text = gbtest::read_text(path);
  text.replace(text.find("\"num_seqs\":2"), 12, "\"num_seqs\":2,\"gpu\":1");
  const std::string bad = gbtest::temp_dir() + "/bad.jsonl";
  std::ofstream(bad, std::ios::binary) << text;
  const auto r = gbtest::run_cli("trace validate '" + bad + "'");
  QVERIFY(r.exit_code != 0);
  QVERIFY2(r.output.find("bad.jsonl:7: step: gpu: field not in the documented schema") != std::string::npos,
           r.output.c_str());
}

GB_TEST(summary_of_a_broken_file_fails_with_file_and_line) {
  const std::string bad = gbtest::temp_dir() + "/broken.jsonl";
  std::ofstream(bad, std::ios::binary) << gbtest::read_text(scenario_file()) << "{\"type\":\"step\"\n";
  const auto r = gbtest::run_cli("trace summary '" + bad + "'");
  QVERIFY(r.exit_code != 0);
  QVERIFY2(r.output.find("glassbox-cli: error: " + bad + ":17: not valid JSON") != std::string::npos, r.output.c_str());
  const auto missing = gbtest::run_cli("trace export-chrome /nonexistent/x.jsonl /tmp/never.json");
  QVERIFY(missing.exit_code != 0);
  QVERIFY2(missing.output.find("/nonexistent/x.jsonl: cannot open") != std::string::npos, missing.output.c_str());
}
