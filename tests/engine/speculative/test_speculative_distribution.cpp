// Sampled speculative decoding emits the target's distribution, end to end on
// stories260K. For a fixed prompt and settings (temperature 1, top-k 8), the
// exact joint distribution of the first two generated tokens is
//   P(x1, x2) = p(x1 | prompt) p(x2 | prompt, x1),
// computed here from direct backend forward passes and the sampler chain's
// distribution() (the plain path's math, 8 + 1 forwards). Then 10^4 requests
// with seeds 0 .. 10^4 - 1 run through the Engine with each drafter; x1 comes
// from the prefill step and x2 from a verification with k = 2 (accepted draft
// or resampled token). Their empirical joint must pass a chi-square test at
// false-alarm rate 1e-4 (Wilson-Hilferty quantile; merged bins under 5
// expected). Seeds are fixed, so the outcome is deterministic.
#include <cstdio>

#include "sampling/sampler_chain.h"
#include "spec_engine_support.h"
#include "spec_fit.h"

namespace {

using namespace spectest;

constexpr int kNumRuns = 10000;

gb::SamplerSettings settings() {
  gb::SamplerSettings s;
  s.temperature = 1.0f;
  s.top_k = 8;
  s.max_tokens = 4;  // room for a k = 2 draft after x1
  return s;
}

// p(. | tokens) after the chain, from one forward pass over the whole sequence.
std::vector<double> target_distribution(const Fixture& f, const std::vector<gb::TokenId>& tokens) {
  auto backend = gb::make_cpu_backend(f.model);
  GB_CHECK(backend->init_kv_pool({8, 16}).ok());
  gb::BatchLayout b;
  std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};
  b.add_sequence(tokens.data(), static_cast<int32_t>(tokens.size()), 0, table.data(), 8, false);
  std::vector<float> logits(512);
  GB_CHECK(backend->forward(b, logits).ok());
  gb::SamplerChain chain(settings());
  auto d = chain.distribution(logits, tokens);
  GB_CHECK(d.ok());
  return *d;
}

constexpr const char* kStoryPrompt = "Once upon a time, there was a";
// Repeats, so the n-gram drafter finds the continuation of x1 in the prompt.
constexpr const char* kRepeatingPrompt = "Lily and Tom. Lily and Tom. Lily and Tom. Lily and";

void check_drafter(const Fixture& f, const std::string& name, const gb::SpeculativeConfig& base,
                   const char* prompt_text = kStoryPrompt) {
  const std::vector<gb::TokenId> prompt = f.tokenizer->encode(prompt_text, true);
  // Exact joint over (x1, x2) as a flat 512 x 512 table (sparse: top-k 8 each).
  const std::vector<double> p1 = target_distribution(f, prompt);
  std::vector<double> joint(512 * 512, 0.0);
  for (gb::TokenId a = 0; a < 512; ++a) {
    if (p1[static_cast<size_t>(a)] == 0.0) continue;
    std::vector<gb::TokenId> t = prompt;
    t.push_back(a);
    const std::vector<double> p2 = target_distribution(f, t);
    for (gb::TokenId b = 0; b < 512; ++b)
      joint[static_cast<size_t>(a) * 512 + static_cast<size_t>(b)] = p1[static_cast<size_t>(a)] * p2[static_cast<size_t>(b)];
  }

  gb::SpeculativeConfig config = base;
  config.k = config.k_min = config.k_max = 2;
  config.adaptive = false;
  std::vector<long> counts(512 * 512, 0);
  gb::EngineConfig ec;
  ec.max_seqs = 128;
  ec.max_batch_tokens = 2048;
  ec.num_scratch_blocks = 64 * gb::self_draft_scratch_blocks(2, 16);  // half the batch self-drafts at a time
  ec.check_invariants = true;
  int64_t drafted = 0, accepted = 0;
  const int kChunk = 500;
  for (int first = 0; first < kNumRuns; first += kChunk) {
    auto engine = make_engine(f, ec);
    std::vector<gb::RequestId> ids;
    for (int seed = first; seed < first + kChunk; ++seed) {
      gb::GenerationRequest r;
      r.prompt_ids = prompt;
      r.sampling = settings();
      r.sampling.seed = static_cast<uint64_t>(seed);
      r.ignore_eos = true;
      r.speculative = config;
      auto id = engine->submit(r);
      QVERIFY2(id.ok(), id.ok() ? "" : id.error().message.c_str());
      ids.push_back(*id);
    }
    QVERIFY(engine->run_until_idle().ok());
    auto out = collect(engine->drain_events());
    for (gb::RequestId id : ids) {
      const Output& o = out[id.value];
      QVERIFY2(o.tokens.size() >= 2, (name + ": a run ended before its second token").c_str());
      ++counts[static_cast<size_t>(o.tokens[0]) * 512 + static_cast<size_t>(o.tokens[1])];
      auto s = engine->speculative_stats(id);
      drafted += s->drafted;
      accepted += s->accepted;
    }
  }
  // The drafter was really used, and really rejected sometimes.
  QVERIFY2(drafted > kNumRuns / 4, (name + ": too few drafted tokens: " + std::to_string(drafted)).c_str());
  QVERIFY2(accepted > 0, (name + ": nothing accepted").c_str());
  const std::string fit = check_fit(joint, counts);
  QVERIFY2(fit.empty(), (name + ": " + fit + " (acceptance " + std::to_string(accepted) + "/" + std::to_string(drafted) + ")").c_str());
  std::printf("%s: joint (x1, x2) fits over %d runs, acceptance %lld/%lld, TV %.4f\n", name.c_str(), kNumRuns,
        static_cast<long long>(accepted), static_cast<long long>(drafted), total_variation(joint, counts));
}

}  // namespace

GB_TEST(sampled_ngram_matches_target) {
  REQUIRE_FIXTURE(f);
  check_drafter(f, "ngram", spec_of("ngram:n=3"), kRepeatingPrompt);
}
GB_TEST(sampled_draft_f16_matches_target) {
  REQUIRE_FIXTURE(f);
  GB_REQUIRE_SHARED(p, "models/stories260K/stories260K-F16.gguf");
  check_drafter(f, "draft F16", spec_of("draft:" + p));
}
GB_TEST(sampled_draft_l4_matches_target) {
  REQUIRE_FIXTURE(f);
  GB_REQUIRE_SHARED(p, "models/stories260K/stories260K_L4_draft.bin");
  check_drafter(f, "draft L4", spec_of("draft:" + p));
}
GB_TEST(sampled_self_draft_matches_target) {
  REQUIRE_FIXTURE(f);
  check_drafter(f, "self 2", spec_of("self:2"));
}
GB_TEST(sampled_random_drafter_matches_target) {
  REQUIRE_FIXTURE(f);
  gb::SpeculativeConfig c = spec_of("ngram");
  c.kind = gb::DrafterKind::Custom;
  c.make_custom = [] { return std::make_unique<RandomProposer>(); };
  check_drafter(f, "random", c);
}
