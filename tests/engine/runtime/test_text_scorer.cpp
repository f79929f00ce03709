// Teacher-forced scoring (runtime/text_scorer.h): the log-probabilities of a
// scored text equal those generation recorded for the same tokens, KL of a model
// against itself is exactly 0 with full top-1 agreement, the F16 copy of
// stories260K is close but not identical, and mismatched vocabularies are refused.
#include <cmath>

#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "runtime/comparison.h"
#include "runtime/text_scorer.h"
#include "stories_fixture.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_text_scorer {

namespace {

using Fixture = gbtest::StoriesFixture;

std::unique_ptr<gb::Backend> cpu(const std::shared_ptr<const gb::Model>& m) {
  gb::CpuBackendOptions o;
  o.num_threads = 1;
  return gb::make_cpu_backend(m, o);
}

std::shared_ptr<const gb::Model> load(const std::string& path) {
  gb::LoadOptions o;
  o.context_length = 512;
  auto m = gb::load_model(path, o);
  GB_CHECK_MSG(m.ok(), m.ok() ? "" : m.error().message.c_str());
  return *m;
}

}  // namespace

GB_TEST(score_logprobs_equal_those_of_generation) {
  REQUIRE_FIXTURE(f);
  auto engine = gbtest::make_test_engine(f);
  gb::GenerationRequest r;
  r.prompt_ids = f.tokenizer->encode("Once upon a time, there was a big dog.", true);
  r.sampling.temperature = 0.9f;
  r.sampling.seed = 5;
  r.sampling.max_tokens = 60;
  r.ignore_eos = true;
  QVERIFY(engine->submit(r).ok());
  QVERIFY(engine->run_until_idle().ok());
  std::vector<gb::TokenId> all = r.prompt_ids;
  std::vector<gb::TokenSampledEvent> generated;
  for (const gb::TraceEvent& e : engine->drain_events())
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      generated.push_back(*t);
      all.push_back(t->token);
    }
  QCOMPARE(generated.size(), size_t{60});
  auto backend = cpu(f.model);
  gb::ScoreOptions options;
  options.chunk = 17;  // chunk edges inside the prompt and the output
  options.k_type = options.v_type = gb::EngineConfig{}.kv_types.k;  // the engine's default KV type (F16)
  auto score = gb::score_tokens(*f.model, *backend, nullptr, nullptr, all, options);
  QVERIFY(score.ok());
  QCOMPARE(score->tokens.size(), all.size() - 1);
  const size_t first = r.prompt_ids.size();
  double sum = 0.0;
  for (size_t k = 0; k < generated.size(); ++k) {
    const gb::TokenScore& s = score->tokens[first + k - 1];
    QCOMPARE(s.position, static_cast<int32_t>(first + k));
    QCOMPARE(s.id, generated[k].token);
    QVERIFY(std::abs(s.logprob - gb::raw_logprob(generated[k].record).value()) < 1e-4);
    QCOMPARE(s.rank, generated[k].record.chosen_rank);
    QVERIFY(std::abs(s.entropy - generated[k].record.entropy_before) < 1e-4);
    QCOMPARE(s.top.front().first, generated[k].record.top.front().id);
  }
  for (const gb::TokenScore& s : score->tokens) sum += s.logprob;
  QVERIFY(std::abs(score->perplexity - std::exp(-sum / static_cast<double>(score->tokens.size()))) < 1e-9);
}

GB_TEST(kl_of_a_model_against_itself_is_zero_and_f16_is_close) {
  REQUIRE_FIXTURE(f);
  const std::vector<gb::TokenId> ids =
      f.tokenizer->encode("Lily and Ben went to the park. They saw a big tree and a little bird.", true);
  auto a = cpu(f.model);
  auto b = cpu(f.model);
  auto self = gb::score_tokens(*f.model, *a, f.model.get(), b.get(), ids);
  QVERIFY(self.ok());
  for (const gb::TokenScore& s : self->tokens) {
    QCOMPARE(*s.kl, 0.0);
    QVERIFY(*s.top1_agree);
  }
  QCOMPARE(self->kl->mean, 0.0);
  QCOMPARE(self->kl->top1_agreement, 1.0);

  GB_REQUIRE_SHARED(f16_path, "models/stories260K/stories260K-F16.gguf");
  auto f16 = load(f16_path);
  auto tok16 = gb::load_tokenizer(*f16, "");
  QVERIFY(tok16.ok());
  QVERIFY(gb::check_comparable_vocabularies(*f.tokenizer, "a", **tok16, "b").ok());
  auto c = cpu(f16);
  auto vs = gb::score_tokens(*f16, *c, f.model.get(), b.get(), ids);
  QVERIFY(vs.ok());
  QVERIFY(vs->kl->mean > 0.0);      // F16 rounding moves the distributions a little ...
  QVERIFY(vs->kl->mean < 1e-3);     // ... but only a little
  QVERIFY(vs->kl->top1_agreement > 0.9);
  const gb::KlSummary& k = *vs->kl;
  QVERIFY(k.min <= k.p01 && k.p01 <= k.p05 && k.p05 <= k.p10 && k.p10 <= k.p50 && k.p50 <= k.p90 && k.p90 <= k.p95 &&
          k.p95 <= k.p99 && k.p99 <= k.p999 && k.p999 <= k.max);
}

// llama-perplexity's windows: whole windows of w tokens (the rest dropped), each
// starting with BOS and run from an empty cache, only tokens w/2+1 .. w-1 of
// each counted -- so a token's score depends only on its own window.
GB_TEST(windows_score_the_second_half_of_each_window_like_llama_perplexity) {
  REQUIRE_FIXTURE(f);
  std::vector<gb::TokenId> ids = f.tokenizer->encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day she saw "
      "a big red ball in the park. She ran to it and kicked it very hard. The ball flew over the fence and into "
      "the garden of an old man. Lily was scared, but she went to knock on his door. The old man smiled and gave "
      "her the ball back, and they became good friends.",
      true);
  QVERIFY(ids.size() > 100);
  const int32_t w = 32;
  auto model_backend = cpu(f.model);
  auto base_backend = cpu(f.model);
  auto windows = gb::score_tokens_in_windows(*f.model, *model_backend, f.model.get(), base_backend.get(), ids, w,
                                             f.tokenizer->bos_id());
  QVERIFY2(windows.ok(), windows.ok() ? "" : windows.error().message.c_str());
  const auto num_windows = static_cast<int32_t>(ids.size()) / w;
  QCOMPARE(static_cast<int32_t>(windows->tokens.size()), num_windows * (w - 1 - w / 2));
  QCOMPARE(windows->kl->mean, 0.0);  // the model against itself
  QCOMPARE(windows->kl->top1_agreement, 1.0);
  // Window 1 alone, BOS first, as a plain scoring: the same numbers.
  std::vector<gb::TokenId> second(ids.begin() + w, ids.begin() + 2 * w);
  second.front() = f.tokenizer->bos_id();
  auto alone = gb::score_tokens(*f.model, *model_backend, nullptr, nullptr, second);
  QVERIFY(alone.ok());
  for (const gb::TokenScore& t : windows->tokens) {
    QVERIFY(t.position % w > w / 2);  // second halves only
    QCOMPARE(t.id, ids[static_cast<size_t>(t.position)]);
    if (t.position / w != 1) continue;
    const gb::TokenScore& a = alone->tokens[static_cast<size_t>(t.position % w - 1)];
    QCOMPARE(a.id, t.id);
    QCOMPARE(a.logprob, t.logprob);
  }
  double sum = 0.0;
  for (const gb::TokenScore& t : windows->tokens) sum += t.logprob;
  QVERIFY(std::abs(windows->perplexity - std::exp(-sum / static_cast<double>(windows->tokens.size()))) < 1e-9 * windows->perplexity);
  // Too short for one window, or a window too small: clear errors.
  QVERIFY(!gb::score_tokens_in_windows(*f.model, *model_backend, nullptr, nullptr, ids, 4096, 1).ok());
  QVERIFY(!gb::score_tokens_in_windows(*f.model, *model_backend, nullptr, nullptr, ids, 2, 1).ok());
}

GB_TEST(different_vocabularies_and_bad_inputs_are_refused) {
  REQUIRE_FIXTURE(f);
  GB_REQUIRE_SHARED(other_path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  auto other = load(other_path);
  auto other_tok = gb::load_tokenizer(*other, "");
  QVERIFY(other_tok.ok());
  const gb::Status st = gb::check_comparable_vocabularies(*f.tokenizer, "stories", **other_tok, "tiny-random");
  QVERIFY(!st.ok());
  QVERIFY(st.error().message.find("cannot compare stories with tiny-random") != std::string::npos);
  auto backend = cpu(f.model);
  QVERIFY(!gb::score_tokens(*f.model, *backend, nullptr, nullptr, std::vector<gb::TokenId>{1}).ok());
  QVERIFY(!gb::score_tokens(*f.model, *backend, nullptr, nullptr, std::vector<gb::TokenId>{1, 512}).ok());
  std::vector<gb::TokenId> too_long(513, 300);
  const auto err = gb::score_tokens(*f.model, *backend, nullptr, nullptr, too_long);
  QVERIFY(!err.ok() && err.error().message.find("context") != std::string::npos);
}

GB_TEST(percentiles_interpolate_between_ranks) {
  QCOMPARE(gb::percentile({}, 0.5), 0.0);
  QCOMPARE(gb::percentile({3.0, 1.0, 2.0}, 0.5), 2.0);
  QCOMPARE(gb::percentile({0.0, 10.0}, 0.9), 9.0);
  QCOMPARE(gb::percentile({0.0, 10.0}, 1.0), 10.0);
}

}  // namespace test_text_scorer
