// The remote client's parsers of a server's answers (client/remote_response.h)
// on good answers, on answers with null and missing optional fields, and on
// malformed ones: every field of the wrong type is an error naming it, never
// an exception (issue 42). No server and no model.
#include <cmath>
#include <string>

#include "client/remote_response.h"
#include "gb_test.h"

namespace {

// "ok", or the error message, or "threw: ..." (which never may happen).
template <class F>
std::string outcome_of_parse(F&& parse) {
  try {
    auto r = parse();
    return r.ok() ? std::string("ok") : r.error().message;
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
}

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

GB_TEST(stream_chunks_read_tokens_usage_and_finish) {
  // Completions, logprobs that spell the text: one token each.
  auto c = gb::server::parse_stream_chunk(
      R"({"choices": [{"index": 0, "text": " a b", "finish_reason": null, "logprobs": {"tokens": [" a", " b"],
          "token_logprobs": [-0.5, null], "top_logprobs": [{" c": -2.0, " a": -0.5}, null]}}]})",
      false);
  QVERIFY2(c.ok(), c.ok() ? "" : c.error().message.c_str());
  QCOMPARE(c->tokens.size(), size_t{2});
  QCOMPARE(c->tokens[0].text, std::string(" a"));
  QCOMPARE(c->tokens[1].text, std::string(" b"));
  QCOMPARE(c->tokens[0].logprob, -0.5f);
  QVERIFY(std::isnan(c->tokens[1].logprob));  // null: not reported
  QCOMPARE(c->tokens[0].top.size(), size_t{2});
  QCOMPARE(c->tokens[0].top[0].first, std::string(" a"));  // most likely first
  QVERIFY(c->finish_reason.empty() && !c->usage);
  // Chat, logprobs that do not spell the text: the text goes with the last token.
  auto chat = gb::server::parse_stream_chunk(
      R"({"choices": [{"delta": {"content": "xy"}, "logprobs": {"content": [{"token": "x", "logprob": -1,
          "top_logprobs": [{"token": "x", "logprob": -1}]}, {"token": "z", "logprob": null, "top_logprobs": null}]},
          "finish_reason": "stop"}]})",
      true);
  QVERIFY2(chat.ok(), chat.ok() ? "" : chat.error().message.c_str());
  QCOMPARE(chat->tokens.size(), size_t{2});
  QCOMPARE(chat->tokens[0].text, std::string());
  QCOMPARE(chat->tokens[1].text, std::string("xy"));
  QCOMPARE(chat->finish_reason, std::string("stop"));
  // No logprobs: the chunk's text is one token; an empty text none.
  auto plain = gb::server::parse_stream_chunk(R"({"choices": [{"delta": {"content": "hi"}, "logprobs": null}]})", true);
  QVERIFY(plain.ok() && plain->tokens.size() == 1 && plain->tokens[0].text == "hi" && std::isnan(plain->tokens[0].logprob));
  auto role_only = gb::server::parse_stream_chunk(R"({"choices": [{"delta": {"role": "assistant", "content": null}}]})", true);
  QVERIFY(role_only.ok() && role_only->tokens.empty());
  auto no_delta = gb::server::parse_stream_chunk(R"({"choices": [{"delta": null, "finish_reason": "length"}]})", true);
  QVERIFY(no_delta.ok() && no_delta->tokens.empty() && no_delta->finish_reason == "length");
  // The usage chunk (counts written as whole floats are fine too); usage null is "not this chunk".
  auto usage = gb::server::parse_stream_chunk(
      R"({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2.0,
          "prompt_tokens_details": {"cached_tokens": 4}}})",
      false);
  QVERIFY(usage.ok() && usage->usage.has_value());
  QCOMPARE(usage->usage->num_prompt_tokens, 5);
  QCOMPARE(usage->usage->num_generated, 2);
  QCOMPARE(usage->usage->num_cached_tokens, 4);
  auto no_usage = gb::server::parse_stream_chunk(R"({"choices": [{"text": "a"}], "usage": null})", false);
  QVERIFY(no_usage.ok() && !no_usage->usage && no_usage->tokens.size() == 1);
  auto details_null = gb::server::parse_stream_chunk(R"({"usage": {"prompt_tokens": 1, "prompt_tokens_details": null}})", false);
  QVERIFY(details_null.ok() && details_null->usage->num_cached_tokens == 0);
}

// Each malformed chunk is an error whose message names the field.
GB_TEST(malformed_stream_chunks_are_errors_naming_the_field) {
  const struct {
    bool chat;
    const char* data;
    const char* names;  // part of the message
  } cases[] = {
      // Not JSON, not an object.
      {true, "hello", "not valid JSON"},
      {true, "{\"choices\": [", "not valid JSON"},
      {true, "", "not valid JSON"},
      {true, "{\"a\": NaN}", "not valid JSON"},
      {true, "{\"a\": 1e999}", "not valid JSON"},
      {true, "[1, 2]", "not a JSON object"},
      {true, "null", "not a JSON object"},
      {true, "\"text\"", "not a JSON object"},
      // The server's own error, object or string.
      {true, R"({"error": {"message": "the queue is full", "code": 503}})", "the queue is full"},
      {false, R"({"error": "out of memory"})", "out of memory"},
      {false, R"({"error": {"code": 5}})", "code"},
      // Wrong types at every level.
      {true, R"({"choices": {"0": {}}})", "choices is not an array"},
      {true, R"({"choices": "x"})", "choices is not an array"},
      {true, R"({"choices": [1]})", "choices[0] is not an object"},
      {true, R"({"choices": [[{"delta": {"content": "x"}}]]})", "choices[0] is not an object"},
      {true, R"({"choices": [{"finish_reason": 1}]})", "choices[0].finish_reason is not a string"},
      {true, R"({"choices": [{"finish_reason": ["stop"]}]})", "choices[0].finish_reason is not a string"},
      {true, R"({"choices": [{"delta": "x"}]})", "choices[0].delta is not an object"},
      {true, R"({"choices": [{"delta": {"content": 5}}]})", "choices[0].delta.content is not a string"},
      {true, R"({"choices": [{"delta": {"content": ["a"]}}]})", "choices[0].delta.content is not a string"},
      {false, R"({"choices": [{"text": {"a": 1}}]})", "choices[0].text is not a string"},
      {false, R"({"choices": [{"text": true}]})", "choices[0].text is not a string"},
      {true, R"({"choices": [{"logprobs": "x"}]})", "choices[0].logprobs is not an object"},
      {true, R"({"choices": [{"logprobs": [1]}]})", "choices[0].logprobs is not an object"},
      {true, R"({"choices": [{"logprobs": {"content": 1}}]})", "choices[0].logprobs.content is not an array"},
      {true, R"({"choices": [{"logprobs": {"content": [1]}}]})", "choices[0].logprobs.content[0] is not an object"},
      {true, R"({"choices": [{"logprobs": {"content": [{"token": 5}]}}]})", "choices[0].logprobs.content[0].token is not a string"},
      {true, R"({"choices": [{"logprobs": {"content": [{"token": "a", "logprob": "-1"}]}}]})",
       "choices[0].logprobs.content[0].logprob is not a number"},
      {true, R"({"choices": [{"logprobs": {"content": [{"token": "a", "top_logprobs": {"a": -1}}]}}]})",
       "choices[0].logprobs.content[0].top_logprobs is not an array"},
      {true, R"({"choices": [{"logprobs": {"content": [{"token": "a", "top_logprobs": ["a"]}]}}]})",
       "choices[0].logprobs.content[0].top_logprobs[0] is not an object"},
      {true, R"({"choices": [{"logprobs": {"content": [{"token": "a", "top_logprobs": [{"token": 1, "logprob": -1}]}]}}]})",
       "choices[0].logprobs.content[0].top_logprobs[0].token is not a string"},
      {true, R"({"choices": [{"logprobs": {"content": [{"token": "a", "top_logprobs": [{"token": "b", "logprob": true}]}]}}]})",
       "choices[0].logprobs.content[0].top_logprobs[0].logprob is not a number"},
      {false, R"({"choices": [{"logprobs": {"tokens": "a"}}]})", "choices[0].logprobs.tokens is not an array"},
      {false, R"({"choices": [{"logprobs": {"tokens": [1]}}]})", "choices[0].logprobs.tokens[0] is not a string"},
      {false, R"({"choices": [{"logprobs": {"tokens": ["a"], "token_logprobs": -1}}]})",
       "choices[0].logprobs.token_logprobs is not an array"},
      {false, R"({"choices": [{"logprobs": {"tokens": ["a"], "token_logprobs": ["-1"]}}]})",
       "choices[0].logprobs.token_logprobs[0] is not a number"},
      {false, R"({"choices": [{"logprobs": {"tokens": ["a"], "top_logprobs": {"a": -1}}}]})",
       "choices[0].logprobs.top_logprobs is not an array"},
      {false, R"({"choices": [{"logprobs": {"tokens": ["a"], "top_logprobs": [["a", -1]]}}]})",
       "choices[0].logprobs.top_logprobs[0] is not an object"},
      {false, R"({"choices": [{"logprobs": {"tokens": ["a"], "top_logprobs": [{"a": "-1"}]}}]})",
       "choices[0].logprobs.top_logprobs[0][\"a\"] is not a number"},
      // Usage counts: not an object, not a whole number, negative, beyond int.
      {false, R"({"usage": 5})", "usage is not an object"},
      {false, R"({"usage": {"prompt_tokens": "5"}})", "usage.prompt_tokens is not a whole number"},
      {false, R"({"usage": {"completion_tokens": 1.5}})", "usage.completion_tokens is not a whole number"},
      {false, R"({"usage": {"completion_tokens": -1}})", "usage.completion_tokens is not a whole number"},
      {false, R"({"usage": {"prompt_tokens": 1e300}})", "usage.prompt_tokens is not a whole number"},
      {false, R"({"usage": {"prompt_tokens": 18446744073709551615}})", "usage.prompt_tokens is not a whole number"},
      {false, R"({"usage": {"prompt_tokens": 2147483648}})", "usage.prompt_tokens is not a whole number"},
      {false, R"({"usage": {"prompt_tokens_details": [1]}})", "usage.prompt_tokens_details is not an object"},
      {false, R"({"usage": {"prompt_tokens_details": {"cached_tokens": {}}}})",
       "usage.prompt_tokens_details.cached_tokens is not a whole number"},
  };
  for (const auto& c : cases) {
    const std::string got = outcome_of_parse([&] { return gb::server::parse_stream_chunk(c.data, c.chat); });
    QVERIFY2(got != "ok" && mentions(got, c.names) && !mentions(got, "threw"),
             (std::string(c.data) + " -> " + got).c_str());
  }
  // Nesting far deeper than any answer: an answer of the wrong shape, no stack overflow.
  const std::string deep = "{\"choices\": [" + std::string(200000, '[') + std::string(200000, ']') + "]}";
  QVERIFY(mentions(outcome_of_parse([&] { return gb::server::parse_stream_chunk(deep, true); }), "choices[0] is not an object"));
  const std::string deep_logprobs = R"({"choices": [{"logprobs": {"content": )" + std::string(200000, '[') +
                                    std::string(200000, ']') + "}}]}";
  QVERIFY(mentions(outcome_of_parse([&] { return gb::server::parse_stream_chunk(deep_logprobs, true); }),
                   "choices[0].logprobs.content[0] is not an object"));
}

GB_TEST(model_lists_completions_and_scores_check_every_field) {
  using gb::server::parse_completion;
  using gb::server::parse_models_list;
  using gb::server::parse_scored_prompt;
  auto models = parse_models_list(R"({"object": "list", "data": [{"id": "a", "object": "model"}, {"id": "b"}]})");
  QVERIFY(models.ok() && *models == (std::vector<std::string>{"a", "b"}));
  const struct {
    const char* body;
    const char* names;
  } bad_models[] = {
      {"<html>", "not valid JSON"},       {"[]", "not a JSON object"},
      {R"({"data": {}})", "data is not an array"}, {R"({"data": []})", "names no model"},
      {R"({})", "names no model"},        {R"({"data": [5]})", "data[0].id is not a string"},
      {R"({"data": [{"id": 5}]})", "data[0].id is not a string"},
      {R"({"data": [{"id": "a"}, {"name": "b"}]})", "data[1].id is not a string"},
  };
  for (const auto& c : bad_models) {
    const std::string got = outcome_of_parse([&] { return parse_models_list(c.body); });
    QVERIFY2(mentions(got, c.names), (std::string(c.body) + " -> " + got).c_str());
  }

  // n choices, placed by index (the array position when there is none).
  auto two = parse_completion(R"({"choices": [{"index": 1, "text": "b", "finish_reason": "length"},
                                              {"index": 0, "text": "a", "logprobs": {"tokens": ["a"], "token_logprobs": [-1]}}]})",
                              2);
  QVERIFY2(two.ok(), two.ok() ? "" : two.error().message.c_str());
  QCOMPARE((*two)[0].text, std::string("a"));
  QCOMPARE((*two)[1].finish_reason, std::string("length"));
  QCOMPARE((*two)[0].tokens.size(), size_t{1});
  QCOMPARE((*two)[0].tokens[0].text, std::string("a"));
  auto unindexed = parse_completion(R"({"choices": [{"text": "a"}, {"text": "b"}]})", 2);
  QVERIFY(unindexed.ok() && (*unindexed)[1].text == "b");
  const struct {
    const char* body;
    int n;
    const char* names;
  } bad_completions[] = {
      {"not json", 1, "not valid JSON"},
      {R"({"choices": [{"text": "a"}]})", 2, "1 choices for n = 2"},
      {R"({"choices": 5})", 1, "choices is not an array"},
      {R"({})", 1, "0 choices for n = 1"},
      {R"({"choices": ["a"]})", 1, "choices[0] is not an object"},
      {R"({"choices": [{"index": "0"}]})", 1, "choices[0].index is not a whole number"},
      {R"({"choices": [{"index": -1}]})", 1, "choices[0].index is not a whole number"},
      {R"({"choices": [{"index": 0.5}]})", 1, "choices[0].index is not a whole number"},
      {R"({"choices": [{"index": 1e300}]})", 1, "choices[0].index is not a whole number"},
      {R"({"choices": [{"index": 3}]})", 1, "choices[0].index = 3 is out of range"},
      {R"({"choices": [{"index": 0}, {"index": 0}]})", 2, "two choices have index 0"},
      {R"({"choices": [{"text": 1}]})", 1, "choices[0].text is not a string"},
      {R"({"choices": [{"finish_reason": {}}]})", 1, "choices[0].finish_reason is not a string"},
      {R"({"choices": [{"logprobs": {"tokens": [null, 1]}}]})", 1, "choices[0].logprobs.tokens[1] is not a string"},
      {R"({"choices": [{"text": "a"}]})", 0, "1 choices for n = 0"},
  };
  for (const auto& c : bad_completions) {
    const std::string got = outcome_of_parse([&] { return parse_completion(c.body, c.n); });
    QVERIFY2(mentions(got, c.names), (std::string(c.body) + " -> " + got).c_str());
  }

  // Echo scoring: the first token has no logprob (null); the rest do.
  auto scored = parse_scored_prompt(R"({"choices": [{"logprobs": {"tokens": ["a", " b"], "token_logprobs": [null, -0.5],
                                       "top_logprobs": [null, {" b": -0.5, " c": -1}]}}]})");
  QVERIFY2(scored.ok(), scored.ok() ? "" : scored.error().message.c_str());
  QVERIFY(!(*scored)[0].logprob.has_value());
  QCOMPARE(*(*scored)[1].logprob, -0.5f);
  QCOMPARE((*scored)[1].top.size(), size_t{2});
  const struct {
    const char* body;
    const char* names;
  } bad_scores[] = {
      {"", "not valid JSON"},
      {R"({"choices": []})", "has no choices"},
      {R"({"choices": [7]})", "choices[0] is not an object"},
      {R"({"choices": [{"logprobs": 1}]})", "choices[0].logprobs is not an object"},
      {R"({"choices": [{"logprobs": {"tokens": ["a"], "token_logprobs": [null]}}]})", "does not support scoring"},
      {R"({"choices": [{"logprobs": {"tokens": ["a", "b"], "token_logprobs": [null, null]}}]})", "does not support scoring"},
      {R"({"choices": [{"logprobs": {"tokens": ["a", "b"], "token_logprobs": [null, "x"]}}]})",
       "choices[0].logprobs.token_logprobs[1] is not a number"},
  };
  for (const auto& c : bad_scores) {
    const std::string got = outcome_of_parse([&] { return parse_scored_prompt(c.body); });
    QVERIFY2(mentions(got, c.names), (std::string(c.body) + " -> " + got).c_str());
  }

  // Error bodies: the message when there is one, else the body's start.
  QCOMPARE(gb::server::parse_error_message(R"({"error": {"message": "no"}})"), std::string("no"));
  QCOMPARE(gb::server::parse_error_message(R"({"error": "no"})"), std::string("no"));
  QCOMPARE(gb::server::parse_error_message(R"({"error": {"message": 5}})"), std::string(R"({"error": {"message": 5}})"));
  QCOMPARE(gb::server::parse_error_message("[1]"), std::string("[1]"));
  QCOMPARE(gb::server::parse_error_message(std::string(400, 'x')), std::string(300, 'x') + "...");
}

// Server-sent-events lines: the data of "data:" lines, nothing for the rest.
GB_TEST(sse_lines_give_their_data) {
  using gb::server::sse_data;
  QCOMPARE(std::string(*sse_data("data: {\"a\": 1}")), std::string("{\"a\": 1}"));
  QCOMPARE(std::string(*sse_data("data:{}")), std::string("{}"));
  QCOMPARE(std::string(*sse_data("data:  x")), std::string(" x"));  // one space is the separator
  for (const char* line : {"data: [DONE]", "data:[DONE]", "data:", "data: ", ": keep-alive", "event: error", "", "dat"})
    QVERIFY2(!sse_data(line).has_value(), line);
}
