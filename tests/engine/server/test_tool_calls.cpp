// Tool calls read back from a model's text (server/tool_calls.h) and sent as
// OpenAI sends them (server/openai_response.h): the table of wrappers, bare
// JSON, malformed and unknown calls left as content, the streamer holding back
// exactly the call, and the chunk and body shapes. No model and no HTTP.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gb_test.h"
#include "server/openai_response.h"
#include "server/tool_calls.h"

using gb::server::ChoiceEvent;
using gb::server::ParsedToolCalls;
using gb::server::parse_tool_calls;
using gb::server::ToolCallStreamer;

namespace {

struct ExpectedCall {
  std::string name;
  std::string arguments;
};

struct ToolCallCase {
  std::string text;
  std::string content;              // expected content
  std::vector<ExpectedCall> calls;  // expected calls (empty: all content)
};

const std::vector<std::string> kToolNames = {"get_weather", "add"};

std::string calls_text(const ParsedToolCalls& p) {
  std::string out;
  for (const auto& c : p.calls) out += c.name + "(" + c.arguments + ") ";
  return out;
}

std::string expected_text(const std::vector<ExpectedCall>& calls) {
  std::string out;
  for (const auto& c : calls) out += c.name + "(" + c.arguments + ") ";
  return out;
}

const std::vector<ToolCallCase>& tool_call_cases() {
  static const std::vector<ToolCallCase> cases = {
      // Plain answers.
      {"It is sunny.", "It is sunny.", {}},
      {"", "", {}},
      // Qwen / Hermes, with text before, twice, unclosed at the end.
      {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
       "", {{"get_weather", R"({"city":"Paris","unit":"c"})"}}},
      {"Let me check.\n<tool_call>{\"name\": \"add\", \"arguments\": {\"b\": 2, \"a\": 1}}</tool_call>",
       "Let me check.\n", {{"add", R"({"b":2,"a":1})"}}},
      {"<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}}</tool_call>\n<tool_call>{\"name\": \"get_weather\", "
       "\"arguments\": {}}</tool_call>",
       "", {{"add", R"({"a":1})"}, {"get_weather", "{}"}}},
      {"<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}}", "", {{"add", R"({"a":1})"}}},
      // Mistral: an array, and the v11 name[ARGS] form, twice.
      {"[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": \"get_weather\", \"arguments\": "
       "{\"city\": \"Oslo\"}}]",
       "", {{"add", R"({"a":1})"}, {"get_weather", R"({"city":"Oslo"})"}}},
      {"[TOOL_CALLS]add[ARGS]{\"a\": 1}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}", "",
       {{"add", R"({"a":1})"}, {"get_weather", R"({"city":"Rome"})"}}},
      // Llama 3.1: python_tag and "parameters".
      {"<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lima\"}}", "",
       {{"get_weather", R"({"city":"Lima"})"}}},
      // Phi-4-mini, FireFunction, a fenced block.
      {"<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 2}}]<|/tool_call|>", "", {{"add", R"({"a":2})"}}},
      {"functools[{\"name\": \"add\", \"arguments\": {\"a\": 3}}]", "", {{"add", R"({"a":3})"}}},
      {"Sure:\n```json\n{\"name\": \"add\", \"arguments\": {\"a\": 4}}\n```\n", "Sure:\n\n", {{"add", R"({"a":4})"}}},
      // Bare JSON: the form a forced answer has; an array; OpenAI's own shape;
      // arguments as a string; text after the call.
      {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Bern\"}}", "", {{"get_weather", R"({"city":"Bern"})"}}},
      {"  [{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": \"add\", \"arguments\": {\"a\": 2}}]", "  ",
       {{"add", R"({"a":1})"}, {"add", R"({"a":2})"}}},
      {"{\"type\": \"function\", \"function\": {\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 5}\"}}", "",
       {{"add", R"({"a": 5})"}}},
      {"{\"name\": \"add\", \"arguments\": {\"a\": \"}{\"}} done", " done", {{"add", R"({"a":"}{"})"}}},
      {"{\"name\": \"add\"}", "", {{"add", "{}"}}},
      // Not calls: malformed JSON, an unknown function, a JSON answer that is
      // no call, arguments of the wrong type, an empty wrapper, a marker in prose.
      {"<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}</tool_call>",
       "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}</tool_call>", {}},
      {"<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
       "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>", {}},
      {"{\"city\": \"Paris\"}", "{\"city\": \"Paris\"}", {}},
      {"{\"name\": \"add\", \"arguments\": [1]}", "{\"name\": \"add\", \"arguments\": [1]}", {}},
      {"<tool_call></tool_call>", "<tool_call></tool_call>", {}},
      {"[TOOL_CALLS]", "[TOOL_CALLS]", {}},
      {"I like functools a lot.", "I like functools a lot.", {}},
      {"{\"name\": \"add\", \"arguments\": {\"a\": 1}", "{\"name\": \"add\", \"arguments\": {\"a\": 1}", {}},
      {"[]", "[]", {}},
  };
  return cases;
}

}  // namespace

GB_TEST(tool_call_table_reads_every_wrapper) {
  for (const ToolCallCase& c : tool_call_cases()) {
    const ParsedToolCalls p = parse_tool_calls(c.text, kToolNames);
    QVERIFY2(p.content == c.content, (c.text + " -> content '" + p.content + "'").c_str());
    QVERIFY2(calls_text(p) == expected_text(c.calls), (c.text + " -> " + calls_text(p)).c_str());
    for (const auto& call : p.calls) {
      QCOMPARE(call.id.size(), size_t{29});
      QVERIFY(call.id.rfind("call_", 0) == 0);
    }
  }
  // Without names any function is read; ids differ.
  const ParsedToolCalls any = parse_tool_calls(R"({"name": "rm_rf", "arguments": {}})", {});
  QCOMPARE(any.calls.size(), size_t{1});
  QVERIFY(gb::server::make_tool_call_id() != gb::server::make_tool_call_id());
  QCOMPARE(gb::server::find_tool_call_start("ab <tool_call>"), size_t{3});
  QCOMPARE(gb::server::find_tool_call_start("  {"), size_t{2});
  QCOMPARE(gb::server::find_tool_call_start("a {"), std::string::npos);
}

// Fed in pieces of every size, the streamer releases content only (never a
// byte of a call) and, with what finish() returns, exactly the parse's content.
GB_TEST(tool_call_streamer_holds_back_exactly_the_call) {
  for (const ToolCallCase& c : tool_call_cases()) {
    for (size_t piece = 1; piece <= 7; piece += 3) {
      ToolCallStreamer streamer(kToolNames, false);
      std::string released;
      for (size_t i = 0; i < c.text.size(); i += piece) released += streamer.feed(c.text.substr(i, piece));
      const ParsedToolCalls end = streamer.finish();
      QVERIFY2(released + end.content == c.content, (c.text + " released '" + released + "' + '" + end.content + "'").c_str());
      QVERIFY2(calls_text(end) == expected_text(c.calls), (c.text + " -> " + calls_text(end)).c_str());
      if (!c.calls.empty()) QVERIFY2(released.size() <= c.content.size(), c.text.c_str());
    }
  }
  // A marker's prefix at the end is held until it is known not to be one.
  ToolCallStreamer s(kToolNames, false);
  QCOMPARE(s.feed("Hello <tool"), std::string("Hello "));
  QCOMPARE(s.feed("kit> is here"), std::string("<toolkit> is here"));
  QCOMPARE(s.finish().content, std::string());
  // Forced: nothing is released before the end.
  ToolCallStreamer forced(kToolNames, true);
  QCOMPARE(forced.feed("hi "), std::string());
  QCOMPARE(forced.finish().content, std::string("hi "));
}

namespace {

using nlohmann::json;

ChoiceEvent token_event(const std::string& text) {
  ChoiceEvent e;
  e.text = text;
  return e;
}

ChoiceEvent finished_event(const std::string& reason) {
  ChoiceEvent e;
  e.kind = ChoiceEvent::Kind::Finished;
  e.finish_reason = reason;
  e.num_prompt_tokens = 5;
  e.num_generated = 3;
  return e;
}

gb::server::ResponseMeta chat_meta(bool tools, bool forced) {
  gb::server::ResponseMeta meta;
  meta.endpoint = gb::server::ApiEndpoint::ChatCompletions;
  meta.id = "chatcmpl-x";
  meta.model = "m";
  if (tools) {
    meta.tools.names = kToolNames;
    meta.tools.choice = forced ? gb::server::ToolChoice::Required : gb::server::ToolChoice::Auto;
  }
  return meta;
}

std::vector<json> sse_chunks(const std::string& text) {
  std::vector<json> out;
  size_t pos = 0;
  while ((pos = text.find("data: ", pos)) != std::string::npos) {
    const size_t end = text.find("\n\n", pos);
    const std::string payload = text.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") out.push_back(json::parse(payload));
    pos = end;
  }
  return out;
}

}  // namespace

GB_TEST(tool_calls_stream_as_openai_streams_them) {
  gb::server::ResponseBuilder b(chat_meta(true, false));
  std::string sse = b.stream({token_event("Checking. <tool"), token_event("_call>{\"name\": \"get_weather\", "),
                              token_event("\"arguments\": {\"city\": \"Oslo\"}}</tool_call>")});
  sse += b.stream({finished_event("stop")});
  sse += b.stream_end();
  const std::vector<json> chunks = sse_chunks(sse);
  std::string content;
  std::vector<json> calls;
  std::string finish;
  for (const json& c : chunks) {
    const json& choice = c["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) calls.push_back(delta["tool_calls"][0]);
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  QCOMPARE(content, std::string("Checking. "));
  QCOMPARE(calls.size(), size_t{1});
  QCOMPARE(calls[0]["index"].get<int>(), 0);
  QVERIFY(calls[0]["id"].get<std::string>().rfind("call_", 0) == 0);
  QCOMPARE(calls[0]["type"].get<std::string>(), std::string("function"));
  QCOMPARE(calls[0]["function"]["name"].get<std::string>(), std::string("get_weather"));
  QCOMPARE(calls[0]["function"]["arguments"].get<std::string>(), std::string(R"({"city":"Oslo"})"));
  QCOMPARE(finish, std::string("tool_calls"));
  QVERIFY(chunks.back()["choices"][0]["finish_reason"] == "tool_calls");  // the finish chunk comes last
}

GB_TEST(tool_calls_in_the_whole_answer) {
  gb::server::ResponseBuilder b(chat_meta(true, true));
  b.add({token_event(R"([{"name": "add", "arguments": {"a": 1}}, {"name": "add", "arguments": {"a": 2}}])"),
         finished_event("stop")});
  const json body = json::parse(b.body());
  const json& choice = body["choices"][0];
  QCOMPARE(choice["finish_reason"].get<std::string>(), std::string("tool_calls"));
  QVERIFY(choice["message"]["content"].is_null());
  QCOMPARE(choice["message"]["tool_calls"].size(), size_t{2});
  QVERIFY(!choice["message"]["tool_calls"][0].contains("index"));
  QCOMPARE(choice["message"]["tool_calls"][1]["function"]["arguments"].get<std::string>(), std::string(R"({"a":2})"));
  // An answer that is no call stays content, finish_reason as the engine's.
  gb::server::ResponseBuilder plain(chat_meta(true, false));
  plain.add({token_event("{\"name\": \"add\""), finished_event("max_tokens")});
  const json cut = json::parse(plain.body());
  QCOMPARE(cut["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
  QCOMPARE(cut["choices"][0]["message"]["content"].get<std::string>(), std::string("{\"name\": \"add\""));
  QVERIFY(!cut["choices"][0]["message"].contains("tool_calls"));
  // Without tools a call-shaped answer is just content.
  gb::server::ResponseBuilder none(chat_meta(false, false));
  none.add({token_event(R"({"name": "add", "arguments": {}})"), finished_event("stop")});
  QVERIFY(!json::parse(none.body())["choices"][0]["message"].contains("tool_calls"));
}

// grammar_dead_end: "stop" for OpenAI's clients, the engine's reason beside it.
GB_TEST(grammar_dead_end_finishes_stop_with_the_reason_beside_it) {
  QCOMPARE(gb::server::openai_finish_reason("grammar_dead_end"), std::string("stop"));
  QCOMPARE(gb::server::hidden_finish_reason("grammar_dead_end"), std::string("grammar_dead_end"));
  QCOMPARE(gb::server::hidden_finish_reason("stop"), std::string());
  gb::server::ResponseBuilder whole(chat_meta(false, false));
  whole.add({token_event("{\"a\": "), finished_event("grammar_dead_end")});
  const json body = json::parse(whole.body());
  QCOMPARE(body["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
  QCOMPARE(body["choices"][0]["glassbox_finish_reason"].get<std::string>(), std::string("grammar_dead_end"));
  gb::server::ResponseBuilder streamed(chat_meta(false, false));
  const std::vector<json> chunks = sse_chunks(streamed.stream({token_event("{"), finished_event("grammar_dead_end")}));
  QCOMPARE(chunks.back()["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
  QCOMPARE(chunks.back()["choices"][0]["glassbox_finish_reason"].get<std::string>(), std::string("grammar_dead_end"));
  QVERIFY(!chunks[1]["choices"][0].contains("glassbox_finish_reason"));
  gb::server::ResponseBuilder normal(chat_meta(false, false));
  normal.add({token_event("x"), finished_event("stop")});
  QVERIFY(!json::parse(normal.body())["choices"][0].contains("glassbox_finish_reason"));
}
