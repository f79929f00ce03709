// Structured output over loopback HTTP (issue #40): answers under a JSON schema
// at temperature 1 parse and validate (checked field by field here, not by our
// compiler), json_object answers parse, a schema or grammar the server cannot
// honour is a 400 naming the field, forced tool calls come back as tool_calls
// (whole and streamed) whose arguments follow the function's parameters, and
// tool messages reach the model's chat template. stories260K is no chat model:
// what the grammar allows is all it can write, which is the point.
#include <set>

#include "runtime/chat_request.h"
#include "server_test_support.h"
#include "template/chat_template.h"

using nlohmann::json;
using gbtest::ServerHarness;

namespace {

// A person: every field bounded, so every answer ends within 400 tokens
// however much white space the model writes (12 gaps of at most 20 bytes, a
// name of at most 8 escaped characters, the keys and punctuation). Its
// properties are not in name order: the answer keeps the schema's order.
const char* kPersonSchema = R"({"type": "object", "properties": {
    "pet": {"enum": ["cat", "dog", "none"]},
    "name": {"type": "string", "minLength": 1, "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    "required": ["pet", "name", "age"], "additionalProperties": false})";

const json& person_schema() {
  static const json schema = json::parse(kPersonSchema);
  return schema;
}

// Validates against person_schema by hand (independent of the schema compiler).
std::string person_problem(const std::string& text) {
  const json v = json::parse(text, nullptr, false);
  if (v.is_discarded()) return "not JSON: " + text;
  if (!v.is_object()) return "not an object";
  for (const auto& [k, _] : v.items())
    if (k != "name" && k != "age" && k != "pet") return "unexpected key " + k;
  if (!v.contains("name") || !v["name"].is_string()) return "name";
  if (!v.contains("age") || !v["age"].is_number_integer() || v["age"].get<int64_t>() < 0 || v["age"].get<int64_t>() > 120)
    return "age";
  if (!v.contains("pet") || !v["pet"].is_string()) return "pet";
  if (const std::set<std::string> pets{"cat", "dog", "none"}; !pets.count(v["pet"].get<std::string>())) return "pet value";
  // The schema's key order, not the name order nlohmann::json would give.
  if (!(text.find("\"pet\"") < text.find("\"name\"") && text.find("\"name\"") < text.find("\"age\"")))
    return "keys out of the schema's order";
  return "";
}

const json& weather_tools() {
  static const json tools = json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["c", "f"]}},
          "required": ["city", "unit"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
          "properties": {"a": {"type": "integer", "minimum": -99, "maximum": 99}, "b": {"type": "integer", "minimum": -99, "maximum": 99}},
          "required": ["a", "b"], "additionalProperties": false}}}])");
  return tools;
}

// The call's arguments follow its function's parameters (by hand).
std::string call_problem(const json& call) {
  if (call["type"] != "function" || !call["id"].is_string() || call["id"].get<std::string>().rfind("call_", 0) != 0)
    return "id/type";
  const std::string name = call["function"]["name"];
  const json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  if (!args.is_object()) return "arguments are not a JSON object";
  if (name == "get_weather") {
    if (args.size() != 2 || !args["city"].is_string() || args["city"].get<std::string>().size() > 40) return "city";
    if (args["unit"] != "c" && args["unit"] != "f") return "unit";
    return "";
  }
  if (name == "add") {
    if (args.size() != 2) return "add has " + std::to_string(args.size()) + " arguments";
    for (const char* k : {"a", "b"})
      if (!args[k].is_number_integer() || std::abs(args[k].get<int64_t>()) > 99) return std::string("add.") + k;
    return "";
  }
  return "unknown function " + name;
}

// 480 tokens: room for a forced call to end whatever white space the model
// writes (16 gaps of at most 20 bytes, short bounded arguments).
json chat_body(const json& extra) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Once upon a time"}}})}, {"max_tokens", 480},
               {"temperature", 1}};
  body.update(extra);
  return body;
}

std::vector<json> stream_chunks(const ServerHarness& h, const std::string& path, const json& body) {
  auto c = h.client();
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  std::vector<json> chunks;
  if (!r || r->status != 200) return chunks;
  for (const std::string& d : gbtest::sse_data(r->body))
    if (d != "[DONE]") chunks.push_back(json::parse(d, nullptr, false));
  return chunks;
}

}  // namespace

GB_TEST(schema_answers_parse_and_validate_at_temperature_1) {
  ServerHarness h;
  QVERIFY(h.ok());
  for (int seed = 1; seed <= 4; ++seed) {
    // Raw text: the schema's key order as written.
    const std::string body = R"({"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 400,
        "temperature": 1, "seed": )" + std::to_string(seed) +
                             R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "person",
        "strict": true, "schema": )" + kPersonSchema + "}}}";
    auto res = h.client().Post("/v1/chat/completions", body, "application/json");
    QVERIFY(res && res->status == 200);
    const json r = json::parse(res->body);
    const json& choice = r["choices"][0];
    QVERIFY2(choice["finish_reason"] == "stop", r.dump().c_str());
    const std::string content = choice["message"]["content"];
    const std::string problem = person_problem(content);
    QVERIFY2(problem.empty(), (content + ": " + problem).c_str());
  }
  // Completions, streamed, with llama.cpp's json_schema field: the chunks join to a valid answer.
  // (nlohmann::json sends the schema's keys in name order: age, name, pet.)
  const std::vector<json> chunks = stream_chunks(
      h, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"seed", 9}, {"stream", true},
                             {"json_schema", person_schema()}});
  QVERIFY(!chunks.empty());
  std::string text;
  for (const json& c : chunks) text += c["choices"][0]["text"].get<std::string>();
  const json streamed = json::parse(text, nullptr, false);
  QVERIFY2(streamed.is_object() && streamed.size() == 3 && streamed["age"].is_number_integer() && streamed["name"].is_string(),
           text.c_str());
  QVERIFY2(text.find("\"age\"") < text.find("\"name\"") && text.find("\"name\"") < text.find("\"pet\""), text.c_str());
  // Any JSON object: it parses (n = 3 choices, each its own seed).
  auto [status, r] = h.post("/v1/chat/completions", chat_body({{"response_format", {{"type", "json_object"}}}, {"n", 3},
                                                                {"seed", 3}, {"max_tokens", 400}}));
  QCOMPARE(status, 200);
  for (const json& choice : r["choices"]) {
    QVERIFY(choice["message"]["content"].get<std::string>().rfind('{', 0) == 0);
    if (choice["finish_reason"] != "stop") continue;  // an unbounded object may run to max_tokens
    const json v = json::parse(choice["message"]["content"].get<std::string>(), nullptr, false);
    QVERIFY2(v.is_object(), choice["message"]["content"].get<std::string>().c_str());
  }
  // The constrained requests left nothing behind (the gauge follows within a
  // step or two: a bounded poll).
  double used = -1;
  for (int i = 0; i < 400 && used != 0.0; ++i) {
    used = h.metrics().at("glassbox_kv_blocks_used");
    if (used != 0.0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  QCOMPARE(used, 0.0);
}

GB_TEST(formats_the_server_cannot_honour_are_400s) {
  ServerHarness h;
  QVERIFY(h.ok());
  const struct {
    json extra;
    std::string param;
    std::string says;
  } cases[] = {
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"format", "date"}}}}}}}},
       "response_format", "format"},
      {{{"grammar", "root ::= \"a\" missing"}}, "grammar", "missing"},
      {{{"grammar", "root ::= \"a\""}, {"json_schema", {{"type", "integer"}}}}, "json_schema", "grammar"},
      {{{"tools", weather_tools()}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}, "tool_choice", "nope"},
  };
  for (const auto& c : cases) {
    auto [status, r] = h.post("/v1/chat/completions", chat_body(c.extra));
    QVERIFY2(status == 400, r.dump().c_str());
    QVERIFY2(r["error"]["param"] == c.param, r.dump().c_str());
    QVERIFY2(r["error"]["message"].get<std::string>().find(c.says) != std::string::npos, r.dump().c_str());
  }
  auto [status, r] = h.post("/v1/completions", {{"prompt", "x"}, {"guided_regex", "(unclosed"}});
  QCOMPARE(status, 400);
  QCOMPARE(r["error"]["param"].get<std::string>(), std::string("guided_regex"));
}

GB_TEST(forced_tool_calls_come_back_as_tool_calls) {
  ServerHarness h;
  QVERIFY(h.ok());
  for (int seed = 1; seed <= 3; ++seed) {
    auto [status, r] = h.post("/v1/chat/completions",
                              chat_body({{"tools", weather_tools()}, {"tool_choice", "required"}, {"seed", seed}}));
    QCOMPARE(status, 200);
    const json& choice = r["choices"][0];
    QVERIFY2(choice["finish_reason"] == "tool_calls", r.dump().c_str());
    QVERIFY(choice["message"]["content"].is_null());
    QCOMPARE(choice["message"]["tool_calls"].size(), size_t{1});
    const std::string problem = call_problem(choice["message"]["tool_calls"][0]);
    QVERIFY2(problem.empty(), (choice.dump() + ": " + problem).c_str());
  }
  // A named function, streamed: content never carries the call; one chunk per
  // call with index, id, type, name and the whole arguments; then the finish.
  const json named = {{"type", "function"}, {"function", {{"name", "add"}}}};
  for (int seed = 1; seed <= 2; ++seed) {
    const std::vector<json> chunks = stream_chunks(
        h, "/v1/chat/completions",
        chat_body({{"tools", weather_tools()}, {"tool_choice", named}, {"seed", seed}, {"stream", true},
                   {"parallel_tool_calls", false}}));
    QVERIFY(chunks.size() >= 3);
    std::vector<json> calls;
    for (const json& c : chunks) {
      const json& delta = c["choices"][0]["delta"];
      if (delta.contains("content")) QCOMPARE(delta["content"].get<std::string>(), std::string());
      if (delta.contains("tool_calls"))
        for (const json& call : delta["tool_calls"]) calls.push_back(call);
    }
    QCOMPARE(calls.size(), size_t{1});
    QCOMPARE(calls[0]["index"].get<int>(), 0);
    QCOMPARE(calls[0]["function"]["name"].get<std::string>(), std::string("add"));
    const std::string problem = call_problem(calls[0]);
    QVERIFY2(problem.empty(), (calls[0].dump() + ": " + problem).c_str());
    QCOMPARE(chunks.back()["choices"][0]["finish_reason"].get<std::string>(), std::string("tool_calls"));
  }
  // parallel_tool_calls: a list of calls is allowed; each one is valid.
  auto [status, r] = h.post("/v1/chat/completions", chat_body({{"tools", weather_tools()}, {"tool_choice", "required"},
                                                                {"parallel_tool_calls", true}, {"seed", 5}}));
  QCOMPARE(status, 200);
  if (r["choices"][0]["finish_reason"] == "tool_calls")
    for (const json& call : r["choices"][0]["message"]["tool_calls"]) QVERIFY2(call_problem(call).empty(), call.dump().c_str());
}

// An assistant turn with tool_calls and the tool's answer reach tiny-qwen2's
// template (it renders <tool_call> and <tool_response>): the server's prompt
// equals the engine's own rendering of the same fields.
GB_TEST(tool_messages_reach_the_chat_template) {
  gbtest::StoriesFixture qwen = gbtest::load_fixture("models/tiny-qwen2/tiny-qwen2-F16.gguf", 512);
  QVERIFY2(qwen.ok(), "models/tiny-qwen2/tiny-qwen2-F16.gguf is missing or does not load");
  ServerHarness h({}, {}, {}, qwen);
  QVERIFY(h.ok());
  const json messages = json::parse(R"([
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}])");
  auto [status, r] = h.post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}, {"tools", weather_tools()}});
  QVERIFY2(status == 200, r.dump().c_str());
  const gb::ChatFormatter formatter = gb::chat_formatter_for(*qwen.model, *qwen.tokenizer);
  QVERIFY(formatter.uses_model_template());
  gb::ChatRenderOptions options;
  options.extra = gb::json_to_value(json{{"tools", weather_tools()}}.dump()).value();
  gb::ChatMessage call{"assistant", "", {}, {}};
  call.fields = gb::json_to_value(R"({"tool_calls": [{"type": "function", "function": {"name": "get_weather",
      "arguments": {"city": "Oslo"}}, "id": "call_1"}]})").value();
  gb::ChatMessage answer{"tool", "sunny, 21 C", {}, {}};
  answer.fields = gb::json_to_value(R"({"tool_call_id": "call_1"})").value();
  const auto local = gb::make_chat_request(formatter, *qwen.tokenizer, {{"user", "Weather in Oslo?", {}, {}}, call, answer}, {}, options);
  QVERIFY2(local.prompt.text.find("\"city\": \"Oslo\"") != std::string::npos ||
               local.prompt.text.find("\"city\":\"Oslo\"") != std::string::npos,
           local.prompt.text.c_str());
  QVERIFY(local.prompt.text.find("sunny, 21 C") != std::string::npos);
  QCOMPARE(r["usage"]["prompt_tokens"].get<int>(), static_cast<int>(local.request.prompt_ids.size()));
}
