// Structured output in request bodies (server/output_format.h): response_format,
// llama.cpp's grammar and json_schema, vLLM's guided_* fields, tools and
// tool_choice into SamplerSettings::format, schemas in their key order, one
// format at most, and 400s naming the field and the compiler's complaint; the
// schema of a forced tool call accepts exactly the calls it should (checked
// with the grammar matcher). No model and no HTTP.
#include <nlohmann/json.hpp>
#include <string>

#include "gb_test.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "server/openai_request.h"
#include "server/output_format.h"

using gb::FormatKind;
using gb::server::ApiEndpoint;
using gb::server::ApiError;
using gb::server::ApiRequest;
using gb::server::ToolChoice;

namespace {

std::variant<ApiRequest, ApiError> fmt_parse(ApiEndpoint endpoint, const std::string& body) {
  gb::server::ParseLimits l;
  l.vocab_size = 512;
  return gb::server::parse_api_request(endpoint, body, l);
}

std::variant<ApiRequest, ApiError> fmt_chat(const std::string& extra) {
  return fmt_parse(ApiEndpoint::ChatCompletions, R"({"messages": [{"role": "user", "content": "x"}])" + extra + "}");
}

std::variant<ApiRequest, ApiError> fmt_completion(const std::string& extra) {
  return fmt_parse(ApiEndpoint::Completions, R"({"prompt": "x")" + extra + "}");
}

std::string fmt_param(const std::variant<ApiRequest, ApiError>& r) {
  const auto* e = std::get_if<ApiError>(&r);
  return e ? e->param : "<accepted>";
}

std::string fmt_message(const std::variant<ApiRequest, ApiError>& r) {
  const auto* e = std::get_if<ApiError>(&r);
  return e ? e->message : "";
}

// Whether the format's grammar accepts `text` whole.
bool format_accepts(const gb::FormatSettings& format, const std::string& text) {
  auto gbnf = format.kind == FormatKind::JsonSchema ? gb::json_schema_text_to_gbnf(format.text) : gb::Result<std::string>(format.text);
  if (!gbnf) return false;
  auto grammar = gb::compile_gbnf(*gbnf);
  if (!grammar) return false;
  gb::GrammarMatcher m(*grammar);
  return m.accept_bytes(text) && m.is_accepting();
}

const char* kWeatherTool = R"({"type": "function", "function": {"name": "get_weather", "description": "d",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
    "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}}})";
const char* kAddTool = R"({"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}})";

}  // namespace

GB_TEST(response_format_sets_the_format_on_both_endpoints) {
  for (auto parse : {fmt_chat, fmt_completion}) {
    auto text = parse(R"(, "response_format": {"type": "text"})");
    QVERIFY(std::holds_alternative<ApiRequest>(text));
    QVERIFY(std::get<ApiRequest>(text).sampling.format.kind == FormatKind::None);
    QVERIFY(std::get<ApiRequest>(text).format_param.empty());
    auto object = parse(R"(, "response_format": {"type": "json_object"})");
    QVERIFY(std::holds_alternative<ApiRequest>(object));
    QVERIFY(std::get<ApiRequest>(object).sampling.format.kind == FormatKind::Json);
    QCOMPARE(std::get<ApiRequest>(object).format_param, std::string("response_format"));
    // The schema's key order is kept: zeta before alpha.
    auto schema = parse(R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
        "schema": {"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "boolean"}},
        "required": ["zeta", "alpha"], "additionalProperties": false}}})");
    QVERIFY(std::holds_alternative<ApiRequest>(schema));
    const gb::FormatSettings& f = std::get<ApiRequest>(schema).sampling.format;
    QVERIFY(f.kind == FormatKind::JsonSchema);
    QVERIFY(f.text.find("zeta") < f.text.find("alpha"));
    QVERIFY(format_accepts(f, R"({"zeta":1,"alpha":true})"));
    QVERIFY(!format_accepts(f, R"({"alpha":true,"zeta":1})"));
  }
  // llama.cpp's json_object with a schema beside it.
  auto beside = fmt_chat(R"(, "response_format": {"type": "json_object", "schema": {"type": "integer"}})");
  QVERIFY(std::get<ApiRequest>(beside).sampling.format.kind == FormatKind::JsonSchema);
  // A json_schema without a schema is any JSON object.
  auto bare = fmt_chat(R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x"}})");
  QVERIFY(std::get<ApiRequest>(bare).sampling.format.kind == FormatKind::Json);
}

GB_TEST(llama_cpp_and_vllm_format_fields) {
  struct Case {
    std::string extra;
    FormatKind kind;
    std::string param;
    std::string accepted;  // a text the format accepts
  };
  const Case cases[] = {
      {R"(, "grammar": "root ::= \"yes\" | \"no\"")", FormatKind::Gbnf, "grammar", "no"},
      {R"(, "json_schema": {"type": "integer", "maximum": 5})", FormatKind::JsonSchema, "json_schema", "5"},
      {R"(, "guided_json": {"enum": ["a", "b"]})", FormatKind::JsonSchema, "guided_json", "\"b\""},
      {R"(, "guided_json": "{\"type\": \"boolean\"}")", FormatKind::JsonSchema, "guided_json", "false"},
      {R"(, "guided_regex": "[0-9]{3}")", FormatKind::Regex, "guided_regex", ""},
      {R"(, "guided_grammar": "root ::= [a-c]+")", FormatKind::Gbnf, "guided_grammar", "abca"},
      {R"(, "guided_choice": ["red", "green \"x\""])", FormatKind::Gbnf, "guided_choice", "green \"x\""},
      {R"(, "grammar": "")", FormatKind::None, "", ""},
  };
  for (const Case& c : cases) {
    for (auto parse : {fmt_chat, fmt_completion}) {
      auto r = parse(c.extra);
      QVERIFY2(std::holds_alternative<ApiRequest>(r), (c.extra + ": " + fmt_message(r)).c_str());
      const ApiRequest& a = std::get<ApiRequest>(r);
      QVERIFY2(a.sampling.format.kind == c.kind, c.extra.c_str());
      QCOMPARE(a.format_param, c.param);
      if (!c.accepted.empty()) QVERIFY2(format_accepts(a.sampling.format, c.accepted), c.extra.c_str());
    }
  }
}

// Every refusal names the field; a compile error carries the compiler's words
// (the keyword and where it is, the GBNF position).
GB_TEST(bad_formats_and_conflicts_are_400s_naming_the_field) {
  const struct {
    std::string extra;
    std::string param;
    std::string says;  // part of the message
  } cases[] = {
      {R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "format": "email"}}})",
       "response_format", "format"},
      {R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": true}}})",
       "response_format", "uniqueItems"},
      {R"(, "response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "http://x/y"}}})", "response_format", "$ref"},
      {R"(, "response_format": {"type": "json_schema", "json_schema": {"schema": 5}})", "response_format", "schema"},
      {R"(, "response_format": {"type": "json_schema"})", "response_format", "json_schema"},
      {R"(, "response_format": {"type": "json_schema", "json_schema": {"name": 1, "schema": {}}})", "response_format", "name"},
      {R"(, "response_format": {"type": "json_schema", "json_schema": {"strict": "yes", "schema": {}}})", "response_format", "strict"},
      {R"(, "response_format": {"type": "yaml"})", "response_format", "yaml"},
      {R"(, "grammar": "root ::= foo")", "grammar", "foo"},
      {R"(, "grammar": "root ::= \"a")", "grammar", ""},
      {R"(, "grammar": 5)", "grammar", "string"},
      {R"(, "json_schema": "{}")", "json_schema", "object"},
      {R"(, "json_schema": {"not": {}})", "json_schema", "not"},
      {R"(, "guided_regex": "(a")", "guided_regex", ""},
      {R"(, "guided_choice": [])", "guided_choice", ""},
      {R"(, "guided_choice": ["a", 1])", "guided_choice", ""},
      {R"(, "guided_json": "{not json")", "guided_json", ""},
      // Two formats: the second is named.
      {R"(, "response_format": {"type": "json_object"}, "grammar": "root ::= \"a\"")", "grammar", "response_format"},
      {R"(, "json_schema": {}, "guided_regex": "a")", "guided_regex", "json_schema"},
  };
  for (const auto& c : cases) {
    for (auto parse : {fmt_chat, fmt_completion}) {
      auto r = parse(c.extra);
      QVERIFY2(fmt_param(r) == c.param, (c.extra + " -> " + fmt_param(r)).c_str());
      QVERIFY2(fmt_message(r).find(c.says) != std::string::npos, (c.extra + " -> " + fmt_message(r)).c_str());
      QCOMPARE(std::get<ApiError>(r).status, 400);
    }
  }
}

GB_TEST(tools_and_tool_choice_are_read) {
  const std::string tools = std::string(R"(, "tools": [)") + kWeatherTool + ", " + kAddTool + "]";
  auto defaults = fmt_chat(tools);
  QVERIFY(std::holds_alternative<ApiRequest>(defaults));
  const ApiRequest& d = std::get<ApiRequest>(defaults);
  QCOMPARE(d.tools.names, (std::vector<std::string>{"get_weather", "add"}));
  QVERIFY(d.tools.choice == ToolChoice::Auto && d.tools.parse_calls() && !d.tools.forced());
  QVERIFY(d.sampling.format.kind == FormatKind::None);
  // The tools reach the template in their own key order.
  QVERIFY(d.template_vars_json.find(R"("tools":[{"type":"function","function":{"name":"get_weather","description")") !=
          std::string::npos);
  auto none = fmt_chat(tools + R"(, "tool_choice": "none")");
  QVERIFY(!std::get<ApiRequest>(none).tools.parse_calls());
  QVERIFY(!std::get<ApiRequest>(fmt_chat("")).tools.parse_calls());
  QVERIFY(std::get<ApiRequest>(fmt_chat(R"(, "tool_choice": "auto")")).tools.choice == ToolChoice::None);

  // required: either function, one call (a list of them with parallel_tool_calls).
  auto required = fmt_chat(tools + R"(, "tool_choice": "required")");
  QVERIFY2(std::holds_alternative<ApiRequest>(required), fmt_message(required).c_str());
  const ApiRequest& q = std::get<ApiRequest>(required);
  QVERIFY(q.tools.forced() && q.sampling.format.kind == FormatKind::JsonSchema);
  QCOMPARE(q.format_param, std::string("tool_choice"));
  QVERIFY(format_accepts(q.sampling.format, R"({"name":"get_weather","arguments":{"city":"Oslo","unit":"c"}})"));
  QVERIFY(format_accepts(q.sampling.format, R"({"name": "add", "arguments": {"a": 1, "b": -2}})"));
  QVERIFY(!format_accepts(q.sampling.format, R"({"name":"add","arguments":{"a":1}})"));
  QVERIFY(!format_accepts(q.sampling.format, R"({"name":"get_weather","arguments":{"a":1,"b":2}})"));
  QVERIFY(!format_accepts(q.sampling.format, R"({"name":"rm","arguments":{}})"));
  QVERIFY(!format_accepts(q.sampling.format, R"([{"name":"add","arguments":{"a":1,"b":2}}])"));
  auto parallel = fmt_chat(tools + R"(, "tool_choice": "required", "parallel_tool_calls": true)");
  const ApiRequest& p = std::get<ApiRequest>(parallel);
  QVERIFY(p.tools.parallel);
  QVERIFY(format_accepts(p.sampling.format, R"([{"name":"add","arguments":{"a":1,"b":2}},{"name":"add","arguments":{"a":3,"b":4}}])"));
  QVERIFY(format_accepts(p.sampling.format, R"({"name":"add","arguments":{"a":1,"b":2}})"));
  QVERIFY(!format_accepts(p.sampling.format, "[]"));

  // A named function: only that one.
  auto named = fmt_chat(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "add"}})");
  const ApiRequest& n = std::get<ApiRequest>(named);
  QVERIFY(n.tools.choice == ToolChoice::Named && n.tools.forced_name == "add");
  QVERIFY(format_accepts(n.sampling.format, R"({"name":"add","arguments":{"a":1,"b":2}})"));
  QVERIFY(!format_accepts(n.sampling.format, R"({"name":"get_weather","arguments":{"city":"Oslo","unit":"c"}})"));

  // A function without parameters takes an empty object.
  auto no_params = fmt_chat(R"(, "tools": [{"type": "function", "function": {"name": "now"}}], "tool_choice": "required")");
  QVERIFY(format_accepts(std::get<ApiRequest>(no_params).sampling.format, R"({"name":"now","arguments":{}})"));
  QVERIFY(!format_accepts(std::get<ApiRequest>(no_params).sampling.format, R"({"name":"now","arguments":{"a":1}})"));
}

// pydantic's schemas: $defs with "#/$defs/..." references, titles everywhere.
GB_TEST(tool_parameters_with_defs_keep_their_references) {
  const std::string tool = R"({"type": "function", "function": {"name": "book", "strict": true, "parameters": {
      "$defs": {"Person": {"title": "Person", "type": "object", "properties": {"name": {"title": "Name", "type": "string"}},
                           "required": ["name"], "additionalProperties": false}},
      "title": "Booking", "type": "object", "properties": {"guest": {"$ref": "#/$defs/Person"},
      "nights": {"title": "Nights", "type": "integer", "minimum": 1, "maximum": 30}},
      "required": ["guest", "nights"], "additionalProperties": false}}})";
  auto r = fmt_chat(", \"tools\": [" + std::string(kAddTool) + ", " + tool + R"(], "tool_choice": {"type": "function", "function": {"name": "book"}})");
  QVERIFY2(std::holds_alternative<ApiRequest>(r), fmt_message(r).c_str());
  const gb::FormatSettings& f = std::get<ApiRequest>(r).sampling.format;
  QVERIFY(format_accepts(f, R"({"name":"book","arguments":{"guest":{"name":"Ann"},"nights":3}})"));
  QVERIFY(!format_accepts(f, R"({"name":"book","arguments":{"guest":{"name":1},"nights":3}})"));
  QVERIFY(!format_accepts(f, R"({"name":"book","arguments":{"guest":{"name":"Ann"},"nights":31}})"));
}

GB_TEST(tool_errors_name_the_field) {
  const std::string weather = std::string(R"(, "tools": [)") + kWeatherTool + "]";
  const struct {
    std::string extra;
    std::string param;
    std::string says;
  } cases[] = {
      {weather + R"(, "tool_choice": {"type": "function", "function": {"name": "add"}})", "tool_choice", "'add'"},
      {weather + R"(, "tool_choice": "sometimes")", "tool_choice", "sometimes"},
      {weather + R"(, "tool_choice": {"type": "function", "name": "get_weather"})", "tool_choice", ""},
      {R"(, "tool_choice": {"type": "function", "function": {"name": "add"}})", "tool_choice", "tools"},
      {weather + R"(, "tool_choice": "required", "response_format": {"type": "json_object"})", "tool_choice", "response_format"},
      {weather + R"(, "tool_choice": "required", "grammar": "root ::= \"a\"")", "tool_choice", "grammar"},
      {weather + R"(, "parallel_tool_calls": "yes")", "parallel_tool_calls", ""},
      {R"(, "tools": [{"type": "custom", "custom": {"name": "x"}}])", "tools[0].type", "function"},
      {R"(, "tools": [{"type": "function"}])", "tools[0].function", ""},
      {R"(, "tools": [{"type": "function", "function": {"name": ""}}])", "tools[0].function.name", ""},
      {R"(, "tools": [{"type": "function", "function": {"name": 3}}])", "tools[0].function.name", ""},
      {R"(, "tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}])",
       "tools[1].function.name", "twice"},
      {R"(, "tools": [{"type": "function", "function": {"name": "a", "parameters": "x"}}])", "tools[0].function.parameters", ""},
      {R"(, "tools": [{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "patternProperties": {}}}}],
          "tool_choice": "required")",
       "tools[0].function.parameters", "patternProperties"},
  };
  for (const auto& c : cases) {
    auto r = fmt_chat(c.extra);
    QVERIFY2(fmt_param(r) == c.param, (c.extra + " -> " + fmt_param(r)).c_str());
    QVERIFY2(fmt_message(r).find(c.says) != std::string::npos, (c.extra + " -> " + fmt_message(r)).c_str());
  }
  // An unsupported keyword is fine while nothing constrains (auto): the template just shows it.
  auto lax = fmt_chat(R"(, "tools": [{"type": "function", "function": {"name": "a", "parameters": {"not": {}}}}])");
  QVERIFY(std::holds_alternative<ApiRequest>(lax));
}

GB_TEST(tool_messages_reach_the_template_fields) {
  auto r = fmt_parse(ApiEndpoint::ChatCompletions, R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"a\": 1}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"},
      {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "not json"}}]}]})");
  QVERIFY2(std::holds_alternative<ApiRequest>(r), fmt_message(r).c_str());
  const ApiRequest& a = std::get<ApiRequest>(r);
  QCOMPARE(a.messages.size(), size_t{4});
  QVERIFY(a.messages[0].tool_fields_json.empty());
  QCOMPARE(a.messages[1].content, std::string());
  // Arguments that are JSON object text become an object (key order kept).
  QCOMPARE(a.messages[1].tool_fields_json,
           std::string(R"({"tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":{"city":"Oslo","a":1}},"id":"call_1"}]})"));
  QCOMPARE(a.messages[2].tool_fields_json, std::string(R"({"tool_call_id":"call_1","name":"get_weather"})"));
  QVERIFY(a.messages[3].tool_fields_json.find(R"("arguments":"not json")") != std::string::npos);
  const std::string user = R"({"role": "user", "content": "x"}, )";
  const struct {
    std::string message;
    std::string param;
  } bad[] = {
      {R"({"role": "assistant", "tool_calls": 1})", "messages[1].tool_calls"},
      {R"({"role": "assistant", "tool_calls": [1]})", "messages[1].tool_calls"},
      {R"({"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]})", "messages[1].tool_calls"},
      {R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]})", "messages[1].tool_calls"},
      {R"({"role": "tool", "tool_call_id": 5, "content": "x"})", "messages[1].tool_call_id"},
      {R"({"role": "tool", "name": ["x"], "content": "x"})", "messages[1].name"},
  };
  for (const auto& c : bad) {
    auto e = fmt_parse(ApiEndpoint::ChatCompletions, "{\"messages\": [" + user + c.message + "]}");
    QVERIFY2(fmt_param(e) == c.param, (c.message + " -> " + fmt_param(e)).c_str());
  }
}
