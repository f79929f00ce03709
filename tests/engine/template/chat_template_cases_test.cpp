// Every case of ../shared/testdata/chat-templates (README.md there): real chat
// templates (Llama 3.1, Qwen 2.5/3, DeepSeek-R1 distill, Mistral Nemo, Gemma 2,
// Phi 3.5, ChatML, Hermes 3, Granite 3.3, gpt-oss) and the exact output of
// transformers' apply_chat_template, made with transformers 5.24.0 / Jinja2 3.1.6,
// an implementation independent of ours. A case passes when the rendering equals
// `expected` byte for byte, or, for an error case, when rendering fails (with the
// exact message for raise_exception cases).
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gb_test.h"
#include "template/chat_template.h"

namespace {

using json = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The render context the fixture README prescribes.
std::string context_json(const json& c) {
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

// First differing byte, with some context either side.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "at byte " + std::to_string(i) + "\n    got:  " + json(got.substr(from, 120)).dump() +
         "\n    want: " + json(want.substr(from, 120)).dump();
}

// Returns "" when the case passes, else why not.
std::string run_case(const std::string& dir, const json& c, std::map<std::string, gb::ChatTemplate>& compiled) {
  const std::string file = c["template_file"].get<std::string>();
  auto it = compiled.find(file);
  if (it == compiled.end()) it = compiled.emplace(file, gb::ChatTemplate::compile(read_file(dir + "/" + file))).first;
  const gb::ChatTemplate& tpl = it->second;
  if (!tpl.ok()) return "does not compile: " + tpl.failure()->describe();
  auto ctx = gb::json_to_value(context_json(c));
  auto now = gb::parse_iso_time(c["now"].get<std::string>());
  if (!ctx.ok() || !now.ok()) return "bad case data";
  gb::TemplateRenderOptions options;
  options.now = now.value();
  const gb::TemplateOutcome out = tpl.render(ctx.value(), options);
  if (c.contains("expected")) {
    if (!out.ok()) return "failed: " + out.failure->describe();
    const std::string want = c["expected"].get<std::string>();
    return out.text == want ? "" : "differs " + first_difference(out.text, want);
  }
  if (out.ok()) return "rendered, but should fail with: " + c["expected_error"].get<std::string>();
  if (c["error_kind"] == "raise_exception") {
    if (out.failure->kind != gb::jinja::ErrorKind::Raised) return "wrong error kind: " + out.failure->describe();
    if (out.failure->message != c["expected_error"].get<std::string>())
      return "wrong message: " + out.failure->message;
  }
  return "";
}

}  // namespace

GB_TEST(every_fixture_case_renders_like_transformers) {
  GB_REQUIRE_SHARED(cases_path, "testdata/chat-templates/cases.jsonl");
  const std::string dir = cases_path.substr(0, cases_path.rfind('/'));
  std::ifstream in(cases_path);
  std::map<std::string, gb::ChatTemplate> compiled;
  std::string line, report;
  int num_cases = 0, num_passed = 0, num_errors = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json c = json::parse(line);
    ++num_cases;
    num_errors += c.contains("expected_error") ? 1 : 0;
    const std::string why = run_case(dir, c, compiled);
    if (why.empty()) ++num_passed;
    else report += "\n  " + c["id"].get<std::string>() + ": " + why;
  }
  std::printf("chat-template cases: %d/%d pass (%d error cases)%s\n", num_passed, num_cases, num_errors,
              report.c_str());
  QCOMPARE(num_cases, 93);
  QCOMPARE(num_errors, 9);
  QVERIFY2(num_passed == num_cases, report.c_str());
}
