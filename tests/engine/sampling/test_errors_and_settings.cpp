// Every broken input gives a per-request error whose message names the problem
// (never a crash, never a silent fallback); settings validation; the sampler
// order string; JSON round trip of settings.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sampling/sampler_settings_json.h"
#include "sampling_test_support.h"

using namespace gb;
using namespace gbtest::sampling;

namespace {

// The error message of sampling `logits` with `s`, or "" if it succeeded.
std::string sample_error(const SamplerSettings& s, const std::vector<float>& logits,
                         const std::vector<TokenId>& history = {}) {
  SamplerChain chain(s);
  SamplerRng rng(1);
  auto t = chain.sample(logits, history, rng);
  return t.ok() ? std::string() : t.error().message;
}

std::string validate_error(const SamplerSettings& s) {
  Status st = validate(s);
  return st.ok() ? std::string() : st.error().message;
}

bool has(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

#define GB_EXPECT_ERROR(message_expr, needle)                                        \
  do {                                                                               \
    const std::string gb_msg_ = (message_expr);                                      \
    QVERIFY2(!gb_msg_.empty(), "expected an error mentioning " needle);             \
    QVERIFY2(has(gb_msg_, needle), ("message \"" + gb_msg_ + "\" lacks " needle).c_str()); \
  } while (0)

}  // namespace

GB_TEST(broken_logits_are_errors) {
  const SamplerSettings s;
  GB_EXPECT_ERROR(sample_error(s, {0.0f, 1.0f, NAN, 2.0f}), "token 2 is NaN");
  GB_EXPECT_ERROR(sample_error(s, {0.0f, INFINITY}), "token 1 is +inf");
  GB_EXPECT_ERROR(sample_error(s, {}), "empty vocabulary");
  GB_EXPECT_ERROR(sample_error(s, {-INFINITY, -INFINITY}), "every one of the 2 raw logits is -inf");
  // -inf alone is a mask, not an error.
  QVERIFY(sample_error(s, {-INFINITY, 0.0f}).empty());
}

GB_TEST(everything_banned_is_an_error) {
  SamplerSettings s;
  s.logit_bias = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
  GB_EXPECT_ERROR(sample_error(s, {1.0f, 2.0f, 3.0f}), "all candidates removed by stage \"logit_bias\"");
  // Partial ban plus raw mask covering the rest: same error.
  s.logit_bias = {{0, -INFINITY}};
  GB_EXPECT_ERROR(sample_error(s, {1.0f, -INFINITY}), "every token is banned");
  // distribution() reports it too.
  SamplerChain chain(s);
  auto d = chain.distribution(std::vector<float>{1.0f, -INFINITY}, {});
  QVERIFY(!d.ok());
}

GB_TEST(out_of_vocabulary_ids_are_errors) {
  SamplerSettings s;
  GB_EXPECT_ERROR(sample_error(s, {0.0f, 1.0f}, {0, 5}), "history token 5 at position 1");
  s.logit_bias = {{7, 1.0f}};
  GB_EXPECT_ERROR(sample_error(s, {0.0f, 1.0f}), "logit_bias names token 7");
}

GB_TEST(invalid_settings_are_errors_from_every_call) {
  SamplerSettings s;
  s.top_p = 0.0f;
  GB_EXPECT_ERROR(validate_error(s), "top_p = 0");
  GB_EXPECT_ERROR(sample_error(s, {0.0f, 1.0f}), "top_p");  // the chain refuses too
  SamplerChain chain(s);
  QVERIFY(!chain.status().ok());
  QVERIFY(!chain.distribution(std::vector<float>{0.0f}, {}).ok());
  // A failed sample still advances the stream by one token.
  SamplerRng rng(4);
  QVERIFY(!chain.sample(std::vector<float>{0.0f}, {}, rng).ok());
  QCOMPARE(rng.counter(), uint64_t{1});
}

GB_TEST(validate_names_each_field) {
  auto with = [](auto edit) {
    SamplerSettings s;
    edit(s);
    return validate_error(s);
  };
  QVERIFY(validate_error(SamplerSettings{}).empty());
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.temperature = -0.5f; }), "temperature = -0.5");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.temperature = NAN; }), "temperature = nan");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.top_k = -1; }), "top_k = -1");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.top_p = -0.1f; }), "top_p");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.top_p = 1.5f; }), "top_p = 1.5");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.min_p = 1.5f; }), "min_p = 1.5");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.typical_p = 0.0f; }), "typical_p = 0");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.repeat_penalty = 0.0f; }), "repeat_penalty = 0");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.presence_penalty = INFINITY; }), "presence_penalty = inf");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.frequency_penalty = NAN; }), "frequency_penalty");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.penalty_last_n = -2; }), "penalty_last_n = -2");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.logit_bias = {{3, NAN}}; }), "logit_bias[3]");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.logit_bias = {{3, INFINITY}}; }), "logit_bias[3] = inf");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.logit_bias = {{-1, 1.0f}}; }), "logit_bias token id = -1");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.dry.base = 0.5f; }), "dry.base = 0.5");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.dry.multiplier = -1.0f; }), "dry.multiplier");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.dry.allowed_length = 0; }), "dry.allowed_length = 0");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.xtc.threshold = 2.0f; }), "xtc.threshold = 2");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.xtc.probability = -0.1f; }), "xtc.probability");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.order = {SamplerStage::TopK, SamplerStage::TopK}; }),
                  "\"top_k\" twice");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.stop_strings = {"ok", ""}; }), "empty string");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.max_tokens = -3; }), "max_tokens = -3");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) { s.top_n_record = -1; }), "top_n_record");
  GB_EXPECT_ERROR(with([](SamplerSettings& s) {
                    s.reasoning.max_tokens = 10;
                    s.reasoning.close_marker.clear();
                  }),
                  "close_marker");
}

GB_TEST(order_string_parsing) {
  auto order = parse_sampler_order("penalties,dry,top_k,typical_p,top_p,min_p,xtc,temperature");
  QVERIFY(order.ok());
  QCOMPARE(order->size(), size_t{8});
  QCOMPARE((*order)[3], SamplerStage::TypicalP);
  QCOMPARE(format_sampler_order(*order), std::string("penalties,dry,top_k,typical_p,top_p,min_p,xtc,temperature"));
  auto spaced = parse_sampler_order(" top_k , temp ,typical");
  QVERIFY(spaced.ok());
  QCOMPARE(format_sampler_order(*spaced), std::string("top_k,temperature,typical_p"));
  QVERIFY(parse_sampler_order("").ok());
  auto unknown = parse_sampler_order("top_k,mirostat");
  QVERIFY(!unknown.ok());
  QVERIFY(has(unknown.error().message, "unknown stage \"mirostat\""));
  auto twice = parse_sampler_order("top_k,min_p,top_k");
  QVERIFY(!twice.ok());
  QVERIFY(has(twice.error().message, "\"top_k\" appears twice"));
  QCOMPARE(format_sampler_order(default_sampler_order()),
           std::string("penalties,dry,logit_bias,top_k,typical_p,top_p,min_p,xtc,temperature"));
}

GB_TEST(settings_json_round_trip) {
  SamplerSettings s;
  s.temperature = 0.7f;
  s.top_k = 12;
  s.min_p = 0.1f;
  s.logit_bias = {{5, -INFINITY}, {6, 1.25f}};
  s.dry.multiplier = 0.8f;
  s.dry.sequence_breaker_ids = {13, 29901};
  s.xtc.probability = 0.5f;
  s.xtc.protected_ids = {2};
  s.order = {SamplerStage::MinP, SamplerStage::Temperature};
  s.seed = 18446744073709551615ULL;  // the largest seed survives JSON
  s.stop_strings = {"\nUser:", "###"};
  s.stop_token_ids = {2};
  s.reasoning.max_tokens = 100;
  const std::string text = sampler_settings_to_json(s);
  QVERIFY(has(text, "\"-inf\""));
  QVERIFY(has(text, "\"order\":\"min_p,temperature\""));
  auto back = sampler_settings_from_json(text);
  QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
  QCOMPARE(back->top_k, 12);
  QCOMPARE(back->temperature, 0.7f);
  QCOMPARE(back->logit_bias.size(), size_t{2});
  QCOMPARE(back->logit_bias[0].second, -INFINITY);
  QCOMPARE(back->seed, s.seed);
  QCOMPARE(back->dry.sequence_breaker_ids, s.dry.sequence_breaker_ids);
  QCOMPARE(back->stop_strings, s.stop_strings);
  QCOMPARE(format_sampler_order(back->order), std::string("min_p,temperature"));
  QCOMPARE(sampler_settings_to_json(*back), text);
}

GB_TEST(settings_json_errors) {
  auto err = [](const char* text) {
    auto r = sampler_settings_from_json(text, "preset.json");
    return r.ok() ? std::string() : r.error().message;
  };
  GB_EXPECT_ERROR(err("{not json"), "preset.json: not valid JSON");
  GB_EXPECT_ERROR(err("[1]"), "must be a JSON object");
  GB_EXPECT_ERROR(err("{\"top_kk\": 3}"), "\"top_kk\" is not a known sampler setting");
  GB_EXPECT_ERROR(err("{\"top_k\": \"many\"}"), "\"top_k\" must be a number");
  GB_EXPECT_ERROR(err("{\"top_k\": 2.5}"), "\"top_k\" must be an integer");
  GB_EXPECT_ERROR(err("{\"dry\": {\"bas\": 2}}"), "\"dry.bas\"");
  GB_EXPECT_ERROR(err("{\"logit_bias\": [[1]]}"), "logit_bias");
  GB_EXPECT_ERROR(err("{\"order\": \"top_k,nope\"}"), "unknown stage \"nope\"");
  GB_EXPECT_ERROR(err("{\"top_p\": 0}"), "top_p = 0");
  auto arr = sampler_settings_from_json("{\"order\": [\"top_k\", \"temp\"], \"temperature\": 0}");
  QVERIFY(arr.ok());
  QVERIFY(arr->is_greedy());
  QCOMPARE(format_sampler_order(arr->order), std::string("top_k,temperature"));
}
