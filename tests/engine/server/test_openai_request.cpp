// Parsing of OpenAI request bodies: OpenAI's defaults, every field reaching the
// SamplerSettings it names, Glassbox's extra sampler fields, and 400s that name
// the parameter. No model and no HTTP.
#include <cmath>

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
           std::string("response_format"));
  {
    auto ok = completions(R"({"prompt": "x", "echo": true, "max_tokens": 0, "logprobs": 5})");
    QVERIFY(std::holds_alternative<gb::server::ApiRequest>(ok));
    QVERIFY(std::get<gb::server::ApiRequest>(ok).echo);
    // Template keywords and tools become one object of template variables.
    auto vars = chat(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": false},
                         "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto"})");
    QVERIFY(std::holds_alternative<gb::server::ApiRequest>(vars));
    QCOMPARE(std::get<gb::server::ApiRequest>(vars).template_vars_json,
             std::string(R"({"enable_thinking":false,"tools":[{"function":{"name":"f"},"type":"function"}]})"));
  }
  // Not JSON, or not an object: 400 without a parameter.
  for (const char* body : {"{", "[1, 2]", "", "null"}) {
    auto r = completions(body);
    QVERIFY(std::holds_alternative<ApiError>(r));
    QCOMPARE(std::get<ApiError>(r).status, 400);
    QCOMPARE(std::get<ApiError>(r).param, std::string());
  }
}
