// RequestOutput / StepOutputs (runtime/output_processor.h) on stories260K's
// tokenizer, whose pieces are short, so stop strings span several tokens. The
// reference for the text is Tokenizer::decode of the same ids, cut where the
// stop string first appears.
#include <string>
#include <vector>

#include "gb_test.h"
#include "runtime/output_processor.h"
#include "stories_fixture.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_output_processor {

namespace {

#define REQUIRE_TOKENIZER(f)                                                             \
  const gbtest::StoriesFixture f = gbtest::load_stories();                              \
  if (!f.ok()) QFAIL("cannot load models/stories260K/stories260K.bin from the shared dir")

gb::SamplerSettings with_stops(std::vector<std::string> stops) {
  gb::SamplerSettings s;
  s.stop_strings = std::move(stops);
  return s;
}

}  // namespace

GB_TEST(a_stop_string_split_across_tokens_ends_the_request_and_is_never_emitted) {
  REQUIRE_TOKENIZER(f);
  const std::string text = "Once upon a time, there was a dog.";
  const std::string stop = "a time";
  const std::vector<gb::TokenId> ids = f.tokenizer->encode(text, false);
  const std::vector<gb::TokenId> prompt{f.tokenizer->bos_id()};
  // The token whose decoded prefix first contains the stop string.
  size_t stop_token = ids.size();
  for (size_t i = 0; i < ids.size() && stop_token == ids.size(); ++i) {
    std::vector<gb::TokenId> head = prompt;
    head.insert(head.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i + 1));
    if (f.tokenizer->decode(head).find(stop) != std::string::npos) stop_token = i;
  }
  QVERIFY(stop_token < ids.size());
  // The stop string really is split: no single token's text holds it.
  for (gb::TokenId id : ids) QVERIFY(f.tokenizer->decode(std::vector<gb::TokenId>{id}).find(stop) == std::string::npos);

  gb::RequestOutput out(*f.tokenizer, with_stops({stop}), prompt, false);
  std::string emitted;
  for (size_t i = 0; i <= stop_token; ++i) {
    const gb::RequestOutput::Accepted a = out.accept(ids[i], static_cast<double>(i));
    QVERIFY(a.emitted);
    QCOMPARE(a.ends, i == stop_token);
    emitted += a.text;
  }
  out.finish(gb::FinishReason::Stop);
  std::vector<gb::TokenId> all = prompt;
  all.insert(all.end(), ids.begin(), ids.end());
  const std::string full = f.tokenizer->decode(all);
  const std::string want = full.substr(0, full.find(stop));
  QCOMPARE(emitted, want);
  QCOMPARE(out.text(), want);
  QCOMPARE(out.num_generated(), static_cast<int32_t>(stop_token + 1));
  QCOMPARE(out.first_token_ms(), 0.0);
  QCOMPARE(out.last_token_ms(), static_cast<double>(stop_token));
}

GB_TEST(held_back_text_is_released_when_the_request_ends_otherwise) {
  REQUIRE_TOKENIZER(f);
  // "a tim" could still become "a time!", so it is held until the end.
  const std::vector<gb::TokenId> prompt{f.tokenizer->bos_id()};
  const std::vector<gb::TokenId> ids = f.tokenizer->encode("Once upon a tim", false);
  gb::RequestOutput out(*f.tokenizer, with_stops({"a time!"}), prompt, false);
  std::string emitted;
  for (gb::TokenId id : ids) {
    const gb::RequestOutput::Accepted a = out.accept(id, 1.0);
    QVERIFY(a.emitted && !a.ends);
    emitted += a.text;
  }
  QCOMPARE(emitted, std::string("Once upon "));
  out.finish(gb::FinishReason::MaxTokens);
  std::vector<gb::TokenId> all = prompt;
  all.insert(all.end(), ids.begin(), ids.end());
  QCOMPARE(out.text(), f.tokenizer->decode(all));
}

GB_TEST(end_of_generation_and_stop_tokens_end_the_request_without_output) {
  REQUIRE_TOKENIZER(f);
  const std::vector<gb::TokenId> prompt{f.tokenizer->bos_id()};
  const gb::TokenId eos = f.tokenizer->eos_id();
  const gb::TokenId word = f.tokenizer->encode("dog", false).front();

  gb::RequestOutput plain(*f.tokenizer, gb::SamplerSettings{}, prompt, false);
  gb::RequestOutput::Accepted a = plain.accept(eos, 1.0);
  QVERIFY(!a.emitted && a.ends && a.text.empty());
  QCOMPARE(plain.num_generated(), 0);
  QCOMPARE(plain.first_token_ms(), -1.0);
  a = plain.accept(f.tokenizer->bos_id(), 1.0);  // BOS always stops
  QVERIFY(!a.emitted && a.ends);

  gb::RequestOutput ignoring(*f.tokenizer, gb::SamplerSettings{}, prompt, true);
  a = ignoring.accept(eos, 1.0);
  QVERIFY(a.emitted && !a.ends);
  QCOMPARE(ignoring.num_generated(), 1);

  gb::SamplerSettings stop_ids;
  stop_ids.stop_token_ids = {word};
  gb::RequestOutput stopping(*f.tokenizer, stop_ids, prompt, false);
  a = stopping.accept(word, 1.0);
  QVERIFY(!a.emitted && a.ends);
  stopping.set_stop_token_ids({});  // new sampler settings without it
  a = stopping.accept(word, 2.0);
  QVERIFY(a.emitted && !a.ends);
}

GB_TEST(step_outputs_keep_emitted_tokens_and_report_failures_in_order) {
  REQUIRE_TOKENIZER(f);
  const std::vector<gb::TokenId> prompt{f.tokenizer->bos_id()};
  gb::RequestOutput out(*f.tokenizer, gb::SamplerSettings{}, prompt, false);
  gb::StepOutputs step;
  const std::vector<gb::TokenId> ids = f.tokenizer->encode("Once", false);
  for (gb::TokenId id : ids) {
    gb::TokenSampledEvent ev;
    ev.request = gb::RequestId{7};
    ev.token = id;
    QVERIFY(!step.add_token(out, ev, 10.0, 3.0, 4.0));
  }
  gb::TokenSampledEvent eos;
  eos.request = gb::RequestId{7};
  eos.token = f.tokenizer->eos_id();
  QVERIFY(step.add_token(out, eos, 11.0, 3.0, 4.0));
  QCOMPARE(step.tokens.size(), ids.size());  // EOS is not an event
  std::string text;
  for (size_t i = 0; i < step.tokens.size(); ++i) {
    QCOMPARE(step.tokens[i].index, static_cast<int32_t>(i));
    QCOMPARE(step.tokens[i].record.forward_ms, 3.0);
    QCOMPARE(step.tokens[i].record.sample_ms, 6.0);
    text += step.tokens[i].text;
  }
  QCOMPARE(text, std::string("Once"));

  step.fail(gb::RequestId{9}, f.tokenizer->eos_id(), "bad logits");
  QVERIFY(step.has_failed(gb::RequestId{9}) && !step.has_failed(gb::RequestId{7}));
  QCOMPARE(step.errors.size(), size_t{1});
  QCOMPARE(step.errors[0].message, std::string("request 9: bad logits"));
  QCOMPARE(step.sampled.size(), size_t{1});
  QVERIFY(step.sampled[0].stop && step.sampled[0].token == f.tokenizer->eos_id());
}

}  // namespace test_output_processor
