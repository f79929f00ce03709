// Parsing of OpenAI request bodies: OpenAI's defaults, every field reaching the
// SamplerSettings it names, Glassbox's extra sampler fields, and 400s that name
// the parameter. No model and no HTTP.
#include <cmath>
#include <map>
#include <string>

#include "gb_test.h"
#include "server/openai_request.h"

using gb::server::ApiEndpoint;
using gb::server::ApiError;
using gb::server::ApiRequest;

namespace {

gb::server::ParseLimits limits() {
  gb::server::ParseLimits l;
  l.vocab_size = 512;
  return l;
}

std::variant<ApiRequest, ApiError> completions(const std::string& body) {
  return gb::server::parse_api_request(ApiEndpoint::Completions, body, limits());
}

std::string param_of(const std::variant<ApiRequest, ApiError>& r) {
  const auto* e = std::get_if<ApiError>(&r);
  return e ? e->param : "<accepted>";
}

}  // namespace

GB_TEST(defaults_are_openai_s) {
  auto r = completions(R"({"prompt": "hi"})");
  QVERIFY(std::holds_alternative<ApiRequest>(r));
  const ApiRequest& a = std::get<ApiRequest>(r);
  QCOMPARE(a.sampling.temperature, 1.0f);
  QCOMPARE(a.sampling.top_p, 1.0f);
  QCOMPARE(a.sampling.top_k, 0);
  QCOMPARE(a.sampling.min_p, 0.0f);
  QCOMPARE(a.n, 1);
  QVERIFY(!a.stream && !a.logprobs && !a.max_tokens && !a.seed);
  QCOMPARE(a.prompts.size(), size_t{1});
  QCOMPARE(a.prompts[0].text, std::string("hi"));
}

GB_TEST(fields_reach_the_sampler_settings) {
  auto r = completions(R"({"prompt": [1, 2, 3], "temperature": 0.5, "top_p": 0.9, "presence_penalty": 0.5,
      "frequency_penalty": -0.5, "logit_bias": {"7": 2.5, "9": -100}, "stop": ["a", "bc"], "seed": 7, "n": 2,
      "max_tokens": 9, "logprobs": 3, "top_k": 5, "min_p": 0.1, "typical_p": 0.8, "repetition_penalty": 1.2,
      "dry_multiplier": 0.8, "xtc_probability": 0.5, "xtc_threshold": 0.2, "ignore_eos": true, "stop_token_ids": [4],
      "stream": true, "stream_options": {"include_usage": true}, "user": "ignored"})");
  QVERIFY(std::holds_alternative<ApiRequest>(r));
  const ApiRequest& a = std::get<ApiRequest>(r);
  const gb::SamplerSettings& s = a.sampling;
  QCOMPARE(s.temperature, 0.5f);
  QCOMPARE(s.top_p, 0.9f);
  QCOMPARE(s.presence_penalty, 0.5f);
  QCOMPARE(s.frequency_penalty, -0.5f);
  QCOMPARE(s.logit_bias.size(), size_t{2});
  QCOMPARE(s.logit_bias[0].first, 7);
  QCOMPARE(s.logit_bias[0].second, 2.5f);
  QVERIFY(std::isinf(s.logit_bias[1].second) && s.logit_bias[1].second < 0);  // -100 bans
  QCOMPARE(s.stop_strings, (std::vector<std::string>{"a", "bc"}));
  QCOMPARE(*a.seed, uint64_t{7});
  QCOMPARE(a.n, 2);
  QCOMPARE(*a.max_tokens, 9);
  QVERIFY(a.logprobs);
  QCOMPARE(a.top_logprobs, 3);
  QCOMPARE(s.top_k, 5);
  QCOMPARE(s.min_p, 0.1f);
  QCOMPARE(s.typical_p, 0.8f);
  QCOMPARE(s.repeat_penalty, 1.2f);
  QCOMPARE(s.dry.multiplier, 0.8f);
  QCOMPARE(s.xtc.probability, 0.5f);
  QCOMPARE(s.xtc.threshold, 0.2f);
  QVERIFY(a.ignore_eos && a.stream && a.include_usage);
  QCOMPARE(s.stop_token_ids, (std::vector<gb::TokenId>{4}));
  QVERIFY(a.prompts[0].is_ids);
  QCOMPARE(a.prompts[0].ids, (std::vector<gb::TokenId>{1, 2, 3}));
}

GB_TEST(kv_policy_is_a_name_or_an_object_and_bad_ones_name_the_field) {
  auto named = completions(R"({"prompt": "hi", "kv_policy": "full"})");
  QVERIFY(std::holds_alternative<ApiRequest>(named));
  QVERIFY(!std::get<ApiRequest>(named).kv_policy.active());
  auto obj = completions(R"({"prompt": "hi", "kv_policy": {"policy": "h2o", "budget": 256, "sinks": 4}})");
  QVERIFY(std::holds_alternative<ApiRequest>(obj));
  const gb::KvPolicy& p = std::get<ApiRequest>(obj).kv_policy;
  QVERIFY(p.kind == gb::KvPolicyKind::H2O);
  QCOMPARE(p.budget, 256);
  QCOMPARE(p.sinks, 4);
  QCOMPARE(p.recent, 128);  // resolved
  for (const char* bad : {R"({"prompt": "hi", "kv_policy": "lru"})", R"({"prompt": "hi", "kv_policy": 3})",
                          R"({"prompt": "hi", "kv_policy": "sink"})",  // no budget
                          R"({"prompt": "hi", "kv_policy": {"budget": 64}})",
                          R"({"prompt": "hi", "kv_policy": {"policy": "sink", "budget": "64"}})",
                          R"({"prompt": "hi", "kv_policy": {"policy": "snapkv", "budget": 64, "pool": 4}})"}) {
    auto r = completions(bad);
    QVERIFY2(std::holds_alternative<gb::server::ApiError>(r), bad);
    QVERIFY2(std::get<gb::server::ApiError>(r).param.rfind("kv_policy", 0) == 0, bad);
  }
}

GB_TEST(chat_messages_and_content_parts) {
  auto r = gb::server::parse_api_request(
      ApiEndpoint::ChatCompletions,
      R"({"messages": [{"role": "developer", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]}],
          "logprobs": true, "top_logprobs": 2, "max_completion_tokens": 5})",
      limits());
  QVERIFY(std::holds_alternative<ApiRequest>(r));
  const ApiRequest& a = std::get<ApiRequest>(r);
  QCOMPARE(a.messages.size(), size_t{2});
  QCOMPARE(a.messages[0].role, std::string("system"));
  QCOMPARE(a.messages[1].content, std::string("Hello there"));
  QCOMPARE(a.top_logprobs, 2);
  QCOMPARE(*a.max_tokens, 5);
}

GB_TEST(bad_values_name_their_parameter) {
  const struct { const char* body; const char* param; } cases[] = {
      {R"({"prompt": "x", "temperature": -1})", "temperature"},
      {R"({"prompt": "x", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "x", "n": 17})", "n"},
      {R"({"prompt": "x", "max_tokens": -3})", "max_tokens"},
      {R"({"prompt": "x", "logit_bias": {"512": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias"},
      {R"({"prompt": "x", "stop": ["a", 3]})", "stop"},
      {R"({"prompt": "x", "stream": "yes"})", "stream"},
      {R"({"prompt": "x", "best_of": 3})", "best_of"},
      {R"({"prompt": "x", "suffix": "y"})", "suffix"},
      {R"({"prompt": "x", "dry_base": 0.5})", "dry_base"},
      {R"({"prompt": [[1], [600]]})", "prompt"},
      {R"({"prompt": "x", "stop_token_ids": [-1]})", "stop_token_ids"},
      {R"({"prompt": "x", "model": 5})", "model"},
  };
  for (const auto& c : cases) QCOMPARE(param_of(completions(c.body)), std::string(c.param));
  const auto chat = [](const char* body) { return gb::server::parse_api_request(ApiEndpoint::ChatCompletions, body, limits()); };
  QCOMPARE(param_of(chat(R"({"messages": []})")), std::string("messages"));
  QCOMPARE(param_of(chat(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})")),
           std::string("messages[0].content"));
  QCOMPARE(param_of(chat(R"({"messages": [{"role": "user", "content": "x"}], "tools": 5})")), std::string("tools"));
  QCOMPARE(param_of(chat(R"({"messages": [{"role": "user", "content": "x"}], "tools": [1]})")), std::string("tools"));
  QCOMPARE(param_of(chat(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})")),
           std::string("tool_choice"));
  QCOMPARE(param_of(chat(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]})")),
           std::string("chat_template_kwargs"));
  // echo only for scoring: with max_tokens 0, not streamed, n = 1; max_tokens 0 only with echo.
  QCOMPARE(param_of(completions(R"({"prompt": "x", "echo": true, "max_tokens": 3})")), std::string("echo"));
  QCOMPARE(param_of(completions(R"({"prompt": "x", "max_tokens": 0})")), std::string("max_tokens"));
  QCOMPARE(param_of(completions(R"({"prompt": "x", "echo": true, "max_tokens": 0, "stream": true})")), std::string("stream"));
  QCOMPARE(param_of(completions(R"({"prompt": "x", "echo": true, "max_tokens": 0, "n": 2})")), std::string("n"));
  QCOMPARE(param_of(chat(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})")),
           std::string("<accepted>"));  // structured output: test_output_format
  {
    auto ok = completions(R"({"prompt": "x", "echo": true, "max_tokens": 0, "logprobs": 5})");
    QVERIFY(std::holds_alternative<gb::server::ApiRequest>(ok));
    QVERIFY(std::get<gb::server::ApiRequest>(ok).echo);
    // Template keywords and tools become one object of template variables.
    auto vars = chat(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": false},
                         "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto"})");
    QVERIFY(std::holds_alternative<gb::server::ApiRequest>(vars));
    QCOMPARE(std::get<gb::server::ApiRequest>(vars).template_vars_json,
             std::string(R"({"enable_thinking":false,"tools":[{"type":"function","function":{"name":"f"}}]})"));
  }
  // Not JSON, or not an object: 400 without a parameter.
  for (const char* body : {"{", "[1, 2]", "", "null"}) {
    auto r = completions(body);
    QVERIFY(std::holds_alternative<ApiError>(r));
    QCOMPARE(std::get<ApiError>(r).status, 400);
    QCOMPARE(std::get<ApiError>(r).param, std::string());
  }
}

namespace {

// The parse of `body`, or "threw: ..." when it threw (which it never may).
std::string outcome_of(ApiEndpoint endpoint, const std::string& body) {
  try {
    const auto r = gb::server::parse_api_request(endpoint, body, limits());
    const auto* e = std::get_if<ApiError>(&r);
    if (e == nullptr) return "<accepted>";
    if (e->status != 400 || e->message.empty()) return "<status " + std::to_string(e->status) + ": " + e->message + ">";
    return e->param;
  } catch (const std::exception& ex) {
    return std::string("threw: ") + ex.what();
  }
}

std::string nested(int depth, const std::string& leaf) {
  return std::string(static_cast<size_t>(depth), '[') + leaf + std::string(static_cast<size_t>(depth), ']');
}

}  // namespace

// Every field the parser reads, given a value of a type it does not take, is a
// 400 naming that field and never an exception (nlohmann's value() and get<>()
// throw on a mistyped value; issue 42). Values by kind: string, integer, real,
// bool, array, object.
GB_TEST(mistyped_fields_are_400s_naming_the_field) {
  const std::map<char, std::string> kind = {{'s', R"("x")"}, {'i', "3"},       {'f', "1.5"},
                                            {'b', "true"},   {'a', "[[1]]"}, {'o', R"({"a": 1})"}};
  struct Field {
    const char* name;
    const char* bad_kinds;  // the kinds it refuses
    int endpoints;          // 1 completions, 2 chat, 3 both
  };
  const Field fields[] = {
      {"model", "ifbao", 3},          {"n", "sfbao", 3},          {"max_tokens", "sfbao", 3},
      {"max_completion_tokens", "sfbao", 3}, {"seed", "sfbao", 3}, {"stream", "sifao", 3},
      {"stream_options", "sifba", 3}, {"ignore_eos", "sifao", 3},  {"temperature", "sbao", 3},
      {"top_p", "sbao", 3},           {"presence_penalty", "sbao", 3}, {"frequency_penalty", "sbao", 3},
      {"top_k", "sfbao", 3},          {"min_p", "sbao", 3},        {"typical_p", "sbao", 3},
      {"repetition_penalty", "sbao", 3}, {"repeat_penalty", "sbao", 3}, {"penalty_last_n", "sfbao", 3},
      {"dry_multiplier", "sbao", 3},  {"dry_base", "sbao", 3},     {"dry_allowed_length", "sfbao", 3},
      {"dry_penalty_last_n", "sfbao", 3}, {"xtc_threshold", "sbao", 3}, {"xtc_probability", "sbao", 3},
      {"stop", "ifbao", 3},           {"logit_bias", "sifba", 3},  {"stop_token_ids", "sifbao", 3},
      {"prompt", "ifbo", 1},          {"logprobs", "sfbao", 1},    {"best_of", "sfbao", 1},
      {"echo", "sifao", 1},           {"suffix", "sifbao", 1},     {"messages", "sifbo", 2},
      {"logprobs", "sifao", 2},       {"top_logprobs", "sfbao", 2}, {"chat_template_kwargs", "sifba", 2},
      {"tools", "sifbao", 2},         {"tool_choice", "sifbao", 2}, {"response_format", "sifbao", 3},
      {"functions", "sifbao", 2},     {"parallel_tool_calls", "sifao", 2}, {"grammar", "ifbao", 3},
      {"json_schema", "sifa", 3},     {"guided_json", "ifa", 3},   {"guided_regex", "ifbao", 3},
      {"guided_grammar", "ifbao", 3}, {"guided_choice", "sifbao", 3},
  };
  int num_cases = 0;
  for (const Field& f : fields) {
    for (const int endpoint : {1, 2}) {
      if ((f.endpoints & endpoint) == 0) continue;
      const ApiEndpoint ep = endpoint == 1 ? ApiEndpoint::Completions : ApiEndpoint::ChatCompletions;
      const std::string base = endpoint == 1 ? R"("prompt": "x")" : R"("messages": [{"role": "user", "content": "x"}])";
      for (const char* k = f.bad_kinds; *k != '\0'; ++k) {
        const std::string name = f.name;
        // The field goes last: of a duplicate key (prompt, messages) the last one counts.
        std::string body = "{" + base + ", \"" + name + "\": " + kind.at(*k) + "}";
        if (name == "top_logprobs") body.insert(1, "\"logprobs\": true, ");
        const std::string got = outcome_of(ep, body);
        QVERIFY2(got == name, (body + " -> " + got).c_str());
        ++num_cases;
      }
    }
  }
  QVERIFY(num_cases > 150);
}

// Nested values of the wrong shape: content parts, response_format, messages
// and the arrays of prompts, stops and ids.
GB_TEST(malformed_nested_values_name_their_field) {
  const std::string user = R"({"role": "user", "content": "x"})";
  const auto chat_with = [&](const std::string& extra) { return "{\"messages\": [" + user + "]" + extra + "}"; };
  const auto message = [](const std::string& m) { return "{\"messages\": [" + m + "]}"; };
  const struct {
    ApiEndpoint endpoint;
    std::string body;
    std::string param;
  } cases[] = {
      // Content parts whose "type" or "text" is not a string (value("type", "") threw here).
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": [{"type": 1, "text": "x"}]})"), "messages[0].content"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": [{"type": null, "text": "x"}]})"), "messages[0].content"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": [{"type": ["text"], "text": "x"}]})"), "messages[0].content"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": [{"type": {"a": 1}, "text": "x"}]})"), "messages[0].content"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": [{"type": "text", "text": 1}]})"), "messages[0].content"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": [{"type": "text"}]})"), "messages[0].content"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": ["x"]})"), "messages[0].content"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": [[{"type": "text", "text": "x"}]]})"), "messages[0].content"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": 5})"), "messages[0].content"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": "user", "content": {"type": "text", "text": "x"}})"), "messages[0].content"},
      // response_format whose "type" is not the string "text" (rf->value("type", "") threw here).
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "response_format": {"type": 1})"), "response_format"},
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "response_format": {"type": null})"), "response_format"},
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "response_format": {"type": ["text"]})"), "response_format"},
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "response_format": {"type": {"type": "text"}})"), "response_format"},
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "response_format": {})"), "response_format"},
      // Messages that are not objects, roles that are not strings.
      {ApiEndpoint::ChatCompletions, message("1"), "messages[0]"},
      {ApiEndpoint::ChatCompletions, message("null"), "messages[0]"},
      {ApiEndpoint::ChatCompletions, message(R"(["user", "x"])"), "messages[0]"},
      {ApiEndpoint::ChatCompletions, "{\"messages\": [" + user + ", \"x\"]}", "messages[1]"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": 1, "content": "x"})"), "messages[0].role"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": null, "content": "x"})"), "messages[0].role"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": ["user"], "content": "x"})"), "messages[0].role"},
      {ApiEndpoint::ChatCompletions, message(R"({"role": {"user": 1}, "content": "x"})"), "messages[0].role"},
      {ApiEndpoint::ChatCompletions, message(R"({"content": "x"})"), "messages[0].role"},
      {ApiEndpoint::ChatCompletions, R"({"messages": []})", "messages"},
      {ApiEndpoint::ChatCompletions, R"({"messages": null})", "messages"},
      {ApiEndpoint::ChatCompletions, "{}", "messages"},
      // Arrays holding the wrong types.
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "tools": [[]])"), "tools"},
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "tools": ["f"])"), "tools"},
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "tool_choice": {"type": "function"})"), "tool_choice"},
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "stream": true, "stream_options": {"include_usage": "yes"})"),
       "stream_options.include_usage"},
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "stream_options": {"include_usage": true})"), "stream_options"},
      {ApiEndpoint::Completions, R"({"prompt": [true]})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": [1, "a"]})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": ["a", 1]})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": [[]]})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": [[1, 2], ["a"]]})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": [[1.5]]})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": [null]})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": [{"text": "a"}]})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": null})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "stop": [["a"]]})", "stop"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "stop": [null]})", "stop"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "stop_token_ids": ["a"]})", "stop_token_ids"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "stop_token_ids": [1.5]})", "stop_token_ids"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "stop_token_ids": [[1]]})", "stop_token_ids"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "logit_bias": {"5": "1"}})", "logit_bias"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "logit_bias": {"5": [1]}})", "logit_bias"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "logit_bias": {"5": null}})", "logit_bias"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "logit_bias": {"": 1}})", "logit_bias"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "logit_bias": {"5x": 1}})", "logit_bias"},
      // Huge numbers: beyond int, beyond int64 (readable only as unsigned),
      // beyond uint64 (a double), beyond float.
      {ApiEndpoint::Completions, R"({"prompt": "x", "n": 4294967297})", "n"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "n": 18446744073709551615})", "n"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "n": 18446744073709551616})", "n"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "max_tokens": 9223372036854775808})", "max_tokens"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "max_tokens": -9223372036854775808})", "max_tokens"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "logprobs": 18446744073709551615})", "logprobs"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "top_k": 18446744073709551615})", "top_k"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "top_k": 1e300})", "top_k"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "temperature": 1e308})", "temperature"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "temperature": -1e308})", "temperature"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "dry_allowed_length": 18446744073709551615})", "dry_allowed_length"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "seed": 1e30})", "seed"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "logit_bias": {"5": 1e308}})", "logit_bias"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "logit_bias": {"99999999999999999999": 1}})", "logit_bias"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "stop_token_ids": [18446744073709551615]})", "stop_token_ids"},
      {ApiEndpoint::Completions, R"({"prompt": [18446744073709551615]})", "prompt"},
      {ApiEndpoint::Completions, R"({"prompt": [-9223372036854775808]})", "prompt"},
      {ApiEndpoint::ChatCompletions, chat_with(R"(, "logprobs": true, "top_logprobs": 18446744073709551615)"), "top_logprobs"},
      // NaN-like values: strings where numbers belong are mistyped; JSON has
      // no NaN or Infinity, and a number beyond double's range is no number.
      {ApiEndpoint::Completions, R"({"prompt": "x", "temperature": "NaN"})", "temperature"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "top_p": "Infinity"})", "top_p"},
      {ApiEndpoint::Completions, R"({"prompt": "x", "temperature": NaN})", ""},
      {ApiEndpoint::Completions, R"({"prompt": "x", "temperature": Infinity})", ""},
      {ApiEndpoint::Completions, R"({"prompt": "x", "temperature": -Infinity})", ""},
      {ApiEndpoint::Completions, R"({"prompt": "x", "temperature": 1e999})", ""},
      {ApiEndpoint::Completions, R"({"prompt": "x", "logit_bias": {"5": -1e999}})", ""},
      // Deep nesting: refused by depth, naming the top-level field it is in.
      {ApiEndpoint::ChatCompletions, chat_with(", \"chat_template_kwargs\": {\"a\": " + nested(100, "1") + "}"),
       "chat_template_kwargs"},
      {ApiEndpoint::ChatCompletions, chat_with(", \"tools\": " + nested(100000, "")), "tools"},
      {ApiEndpoint::ChatCompletions, "{\"messages\": " + nested(5000, "") + "}", "messages"},
      {ApiEndpoint::Completions, "{\"prompt\": \"x\", \"user\": " + nested(200000, "{}") + "}", "user"},
      {ApiEndpoint::Completions, nested(200000, ""), ""},
      {ApiEndpoint::Completions, std::string(200000, '['), ""},
  };
  for (const auto& c : cases) {
    const std::string got = outcome_of(c.endpoint, c.body);
    QVERIFY2(got == c.param, (c.body.substr(0, 200) + " -> " + got).c_str());
  }
  // Depth that a real request has (a tool's JSON schema) is fine.
  const std::string schema = R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string"}}}}}}}})";
  QCOMPARE(outcome_of(ApiEndpoint::ChatCompletions, chat_with(", \"tools\": [" + schema + "]")), std::string("<accepted>"));
  QCOMPARE(outcome_of(ApiEndpoint::ChatCompletions, chat_with(", \"chat_template_kwargs\": {\"a\": " + nested(60, "1") + "}")),
           std::string("<accepted>"));
}
