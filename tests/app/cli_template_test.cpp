// glassbox-cli template render / show, run as a subprocess. Expected renderings
// are the fixture's (transformers 5.24.0 / Jinja2 3.1.6, see
// ../shared/testdata/chat-templates/README.md): every case is rendered through the
// CLI and compared byte for byte with stdout (no newline added).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "gb_test.h"

namespace {

using json = nlohmann::ordered_json;

std::string context_of(const json& c) {
  json ctx = json::object();
  ctx["messages"] = c.contains("template_messages") ? c["template_messages"] : c["messages"];
  ctx["tools"] = c["tools"];
  ctx["documents"] = c["documents"];
  ctx["add_generation_prompt"] = c["add_generation_prompt"];
  if (!c["bos_token"].is_null()) ctx["bos_token"] = c["bos_token"];
  if (!c["eos_token"].is_null()) ctx["eos_token"] = c["eos_token"];
  for (const auto& [k, v] : c["kwargs"].items()) ctx[k] = v;
  return ctx.dump();
}

}  // namespace

GB_TEST(render_prints_every_fixture_case_exactly) {
  GB_REQUIRE_SHARED(cases_path, "testdata/chat-templates/cases.jsonl");
  const std::string dir = cases_path.substr(0, cases_path.rfind('/'));
  std::ifstream in(cases_path);
  std::string line, report;
  int num_cases = 0, num_passed = 0;
  while (std::getline(in, line)) {
    const json c = json::parse(line);
    ++num_cases;
    const std::string ctx = gbtest::write_temp_file("ctx.json", context_of(c));
    const auto r = gbtest::run_cli_split("template render '" + dir + "/" + c["template_file"].get<std::string>() +
                                         "' --context '" + ctx + "' --now " + c["now"].get<std::string>());
    bool ok;
    if (c.contains("expected")) {
      ok = r.exit_code == 0 && r.out == c["expected"].get<std::string>() && r.err.empty();
    } else {
      ok = r.exit_code != 0 && r.out.empty();
      // A raise_exception message comes out verbatim (one line on stderr).
      if (c["error_kind"] == "raise_exception") ok = ok && r.err == c["expected_error"].get<std::string>() + "\n";
    }
    if (ok) ++num_passed;
    else report += "\n  " + c["id"].get<std::string>() + ": exit " + std::to_string(r.exit_code) + ", stderr " + r.err;
  }
  std::printf("cli template render: %d/%d cases\n", num_passed, num_cases);
  QCOMPARE(num_cases, 93);
  QVERIFY2(num_passed == num_cases, report.c_str());
}

GB_TEST(render_accepts_a_fixture_case_line_as_context) {
  // template_messages replaces messages, kwargs merge in, null bos/eos = not passed.
  const std::string tpl =
      gbtest::write_temp_file("t.jinja", "{{ messages[0].content }}|{{ flag }}|{{ bos_token is defined }}");
  const std::string ctx = gbtest::write_temp_file(
      "c.json",
      R"({"messages": [{"content": "a"}], "template_messages": [{"content": "b"}], "kwargs": {"flag": 7}, "bos_token": null})");
  const auto r = gbtest::run_cli_split("template render '" + tpl + "' --context '" + ctx + "'");
  QCOMPARE(r.exit_code, 0);
  QCOMPARE(r.out, std::string("b|7|False"));
}

GB_TEST(render_uses_the_fixed_clock) {
  const std::string tpl = gbtest::write_temp_file("t.jinja", "{{ strftime_now('%d %B %Y, %H:%M') }}");
  const std::string ctx = gbtest::write_temp_file("c.json", "{}");
  const auto r =
      gbtest::run_cli_split("template render '" + tpl + "' --context '" + ctx + "' --now 2024-07-26T08:05:00");
  QCOMPARE(r.exit_code, 0);
  QCOMPARE(r.out, std::string("26 July 2024, 08:05"));
  QVERIFY(gbtest::run_cli_split("template render '" + tpl + "' --context '" + ctx + "' --now yesterday").exit_code !=
          0);
}

GB_TEST(render_errors_name_line_and_column) {
  const std::string tpl =
      gbtest::write_temp_file("t.jinja", "ok\n{% for m in messages %}{{ m.content + 1 }}{% endfor %}");
  const std::string ctx = gbtest::write_temp_file("c.json", R"({"messages": [{"role": "user", "content": "hi"}]})");
  const auto r = gbtest::run_cli_split("template render '" + tpl + "' --context '" + ctx + "'");
  QVERIFY(r.exit_code != 0);
  QVERIFY(r.out.empty());
  QVERIFY2(r.err.find("line 2, column 37") != std::string::npos, r.err.c_str());
  QVERIFY2(r.err.find("can only concatenate str") != std::string::npos, r.err.c_str());
  const std::string bad_json = gbtest::write_temp_file("bad.json", "{not json");
  QVERIFY(gbtest::run_cli_split("template render '" + tpl + "' --context '" + bad_json + "'").exit_code != 0);
  QVERIFY(gbtest::run_cli_split("template render /nonexistent.jinja --context '" + ctx + "'").exit_code != 0);
}

GB_TEST(show_prints_the_models_own_template) {
  GB_REQUIRE_SHARED(model, "models/tiny-qwen2/tiny-qwen2-F16.gguf");
  const auto r = gbtest::run_cli_split("template show --model '" + model + "'");
  QCOMPARE(r.exit_code, 0);
  // The GGUF string value is stored verbatim (little-endian u64 length, bytes):
  // the printed text must be exactly that value, found in the file right after its length.
  const std::string file = gbtest::read_text(model);
  const size_t at = file.find(r.out);
  QVERIFY(r.out.size() > 100 && at != std::string::npos && at >= 8);
  uint64_t stored_len = 0;
  for (int i = 7; i >= 0; --i) stored_len = (stored_len << 8) | static_cast<unsigned char>(file[at - 8 + static_cast<size_t>(i)]);
  QCOMPARE(stored_len, static_cast<uint64_t>(r.out.size()));
  QVERIFY(r.out.find("<|im_start|>") != std::string::npos);
}

GB_TEST(show_fails_for_a_file_without_a_template) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const auto r = gbtest::run_cli_split("template show --model '" + model + "'");
  QVERIFY(r.exit_code != 0);
  QVERIFY(r.out.empty());
  QVERIFY(r.err.find("no chat template") != std::string::npos);
}
