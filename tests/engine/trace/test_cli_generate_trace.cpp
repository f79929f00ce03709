// End to end: `glassbox-cli generate --trace --chrome-trace` on stories260K.
// Every line the CLI writes must pass the strict schema validator, the header's
// SHA-256 must equal our hash of the model file (itself pinned to the FIPS
// vectors), re-exporting the imported trace must give the same bytes, and the
// summary must count the tokens that were asked for. Skips (with the reason)
// when this build's generate has no --trace option.
#include <sstream>
#include <vector>

#include "cli_runner.h"
#include "gb_test.h"
#include "core/sha256.h"
#include "trace/trace_jsonl.h"
#include "trace/trace_schema.h"
#include "trace/trace_summary.h"

GB_TEST(generate_trace_lines_follow_the_schema) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  GB_REQUIRE_SHARED(tokenizer, "models/stories260K/tok512.bin");
  const auto help = gbtest::run_cli("generate --help");
  if (help.output.find("--trace") == std::string::npos) QSKIP("glassbox-cli generate has no --trace option yet");

  const std::string trace = gbtest::temp_dir() + "/gen.jsonl", chrome = gbtest::temp_dir() + "/gen.chrome.json";
  const auto r = gbtest::run_cli("generate -m '" + model + "' -z '" + tokenizer +
                                 "' -p 'Once upon a time' -n 12 --temperature 0.8 --seed 7 --trace '" + trace +
                                 "' --chrome-trace '" + chrome + "'");
  QVERIFY2(r.exit_code == 0, r.output.c_str());

  const std::string text = gbtest::read_text(trace);
  std::istringstream in(text);
  size_t num_lines = 0, num_tokens = 0;
  for (std::string line; std::getline(in, line); ++num_lines) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    QVERIFY2(!j.is_discarded(), line.c_str());
    const gb::Status s = gb::validate_trace_json_line(j);
    QVERIFY2(s.ok(), s.ok() ? "" : (s.error().message + " in line " + std::to_string(num_lines + 1)).c_str());
    num_tokens += j["type"] == "token_sampled";
  }
  QVERIFY(num_lines > 12);
  QCOMPARE(num_tokens, size_t{12});

  auto file = gb::read_trace_jsonl(trace);
  QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
  auto digest = gb::sha256_file_hex(model);
  QVERIFY(digest.ok());
  QCOMPARE(file.value().header.model.sha256, digest.value());
  QCOMPARE(file.value().header.seed, uint64_t{7});
  QVERIFY(gb::format_trace_jsonl(file.value().header, file.value().events) == text);

  const gb::TraceSummary s = gb::summarize(file.value().events);
  QCOMPARE(s.num_requests, 1);
  QCOMPARE(s.num_tokens, int64_t{12});
  QCOMPARE(s.requests[0].finish_reason, std::string("max_tokens"));
  QVERIFY(s.requests[0].ttft_ms.has_value() && *s.requests[0].ttft_ms > 0);

  const nlohmann::json c = nlohmann::json::parse(gbtest::read_text(chrome), nullptr, false);
  QVERIFY(c.is_object() && c["traceEvents"].is_array());

  // The same run with --json: its token records carry the trace's numbers (the
  // same spelling of each float, so equal as doubles, not only as floats).
  const auto j = gbtest::run_cli("generate -m '" + model + "' -z '" + tokenizer +
                                 "' -p 'Once upon a time' -n 12 --temperature 0.8 --seed 7 --json");
  QVERIFY2(j.exit_code == 0, j.output.c_str());
  std::vector<nlohmann::json> trace_tokens, json_tokens;
  std::istringstream trace_lines(text), json_lines(j.output);
  for (std::string line; std::getline(trace_lines, line);) {
    const nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (e["type"] == "token_sampled") trace_tokens.push_back(e["record"]);
  }
  for (std::string line; std::getline(json_lines, line);) {
    const nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_discarded() && e.contains("top") && e.contains("entropy_before")) json_tokens.push_back(e);
  }
  QCOMPARE(json_tokens.size(), trace_tokens.size());
  // Exactly (QCOMPARE on doubles is a fuzzy compare).
  const auto same = [](const nlohmann::json& a, const nlohmann::json& b) { return a.get<double>() == b.get<double>(); };
  for (size_t i = 0; i < json_tokens.size(); ++i) {
    QVERIFY(same(json_tokens[i]["prob"], trace_tokens[i]["chosen_prob"]));
    QVERIFY(same(json_tokens[i]["entropy_before"], trace_tokens[i]["entropy_before"]));
    QCOMPARE(json_tokens[i]["top"].size(), trace_tokens[i]["top"].size());
    for (size_t k = 0; k < json_tokens[i]["top"].size(); ++k) {
      QVERIFY(same(json_tokens[i]["top"][k]["prob"], trace_tokens[i]["top"][k]["prob_before"]));
      QVERIFY(same(json_tokens[i]["top"][k]["logit"], trace_tokens[i]["top"][k]["logit"]));
    }
  }
}
