// Sampler comparisons (runtime/comparison.h) on stories260K: identical lanes
// agree (CRN on and off), a lane is exactly its settings run alone with the
// sample's seed, CRN hands every lane the same draw at each position (property
// test over random settings), the prompt's KV blocks are shared by reference
// and all come back to the pool when the comparison closes, and the statistics
// match hand-computed values.
#include <algorithm>
#include <map>
#include <random>

#include "gb_test.h"
#include "kv/scheduler.h"
#include "runtime/comparison.h"
#include "runtime/comparison_json.h"
#include "sampling/sampler_rng.h"
#include "stories_fixture.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_comparison {

namespace {

using Fixture = gbtest::StoriesFixture;

std::vector<gb::TokenId> story_prompt(const Fixture& f) {
  return f.tokenizer->encode("Once upon a time, there was a little girl named Lily. She loved to", true);
}

gb::SamplerSettings sampled(float temperature, float top_p, int top_k) {
  gb::SamplerSettings s;
  s.temperature = temperature;
  s.top_p = top_p;
  s.top_k = top_k;
  s.min_p = 0.0f;
  return s;
}

gb::ComparisonSpec spec_of(const Fixture& f, std::vector<gb::ComparisonLane> lanes, int samples, bool crn,
                           int max_tokens) {
  gb::ComparisonSpec spec;
  spec.prompt_ids = story_prompt(f);
  spec.lanes = std::move(lanes);
  spec.num_samples = samples;
  spec.seed = 20261201;
  spec.crn = crn;
  spec.max_tokens = max_tokens;
  return spec;
}

std::unique_ptr<gb::Comparison> run(const Fixture& f, gb::ComparisonSpec spec, gb::EngineConfig config = {}) {
  config.max_seqs = static_cast<int32_t>(spec.lanes.size()) * spec.num_samples + 1;
  auto engine = gbtest::make_test_engine(f, config);
  auto c = gb::run_comparison(*engine, std::move(spec));
  GB_CHECK_MSG(c.ok(), c.ok() ? "" : c.error().message.c_str());
  return std::move(*c);
}

// The tokens (and raw log-probabilities) of `settings` submitted alone.
std::pair<std::vector<gb::TokenId>, std::vector<double>> run_alone(const Fixture& f, const std::vector<gb::TokenId>& prompt,
                                                                   gb::SamplerSettings settings, bool ignore_eos) {
  auto engine = gbtest::make_test_engine(f);
  gb::GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling = std::move(settings);
  r.ignore_eos = ignore_eos;
  GB_CHECK(engine->submit(r).ok());
  GB_CHECK(engine->run_until_idle().ok());
  std::pair<std::vector<gb::TokenId>, std::vector<double>> out;
  for (const gb::TraceEvent& e : engine->drain_events())
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      out.first.push_back(t->token);
      out.second.push_back(gb::raw_logprob(t->record).value_or(0.0));
    }
  return out;
}

}  // namespace

GB_TEST(identical_lanes_give_identical_tokens_with_and_without_crn) {
  REQUIRE_FIXTURE(f);
  for (bool crn : {false, true}) {
    const gb::SamplerSettings s = sampled(1.0f, 0.95f, 0);
    auto c = run(f, spec_of(f, {{"A", s}, {"B", s}, {"C", sampled(1.0f, 0.5f, 0)}}, 3, crn, 24));
    QVERIFY(c->done());
    for (int j = 0; j < 3; ++j) {
      QCOMPARE(c->sample(1, j).token_ids, c->sample(0, j).token_ids);
      QVERIFY(!c->sample(1, j).first_divergence.has_value());
      QCOMPARE(c->sample(1, j).seed, c->sample(0, j).seed);
      QVERIFY(!c->sample(0, j).token_ids.empty());
    }
    // Not a vacuous pass: the samples of one lane differ from each other.
    QVERIFY(c->sample(0, 0).token_ids != c->sample(0, 1).token_ids || c->sample(0, 1).token_ids != c->sample(0, 2).token_ids);
    // CRN shares the seed across different settings; without it they get their own.
    QCOMPARE(c->sample(2, 0).seed == c->sample(0, 0).seed, crn);
  }
}

GB_TEST(a_lane_equals_its_settings_run_alone_with_the_same_seed) {
  REQUIRE_FIXTURE(f);
  gb::SamplerSettings reordered = sampled(0.8f, 0.9f, 20);
  std::reverse(reordered.order.begin(), reordered.order.end());  // chain order is part of a lane
  gb::SamplerSettings penalised = sampled(1.2f, 1.0f, 40);
  penalised.repeat_penalty = 1.3f;
  penalised.min_p = 0.05f;
  for (bool crn : {false, true}) {
    gb::ComparisonSpec spec = spec_of(f, {{"greedy", sampled(0.0f, 1.0f, 0)}, {"reordered", reordered},
                                          {"penalised", penalised}}, 2, crn, 20);
    spec.ignore_eos = true;
    const auto prompt = spec.prompt_ids;
    const auto lanes = spec.lanes;
    auto c = run(f, std::move(spec));
    for (size_t i = 0; i < lanes.size(); ++i)
      for (int j = 0; j < 2; ++j) {
        const gb::ComparisonSample& s = c->sample(static_cast<int32_t>(i), j);
        gb::SamplerSettings alone = lanes[i].settings;
        alone.seed = s.seed;
        alone.max_tokens = 20;
        const auto [tokens, logprobs] = run_alone(f, prompt, alone, true);
        QCOMPARE(s.token_ids, tokens);
        QCOMPARE(s.stats.length, 20);
        for (size_t k = 0; k < tokens.size(); ++k)
          QVERIFY(std::abs(gb::raw_logprob(s.tokens[k].record).value() - logprobs[k]) < 1e-4);
      }
  }
}

// Property: under CRN, the picker's and XTC's uniforms at generated position k of
// sample j are SamplerRng(seed_j) at counter k for every lane, whatever the
// settings and however long each lane runs.
GB_TEST(crn_holds_the_draw_fixed_per_position_for_random_settings) {
  REQUIRE_FIXTURE(f);
  std::mt19937 rng(7);
  int num_length_mismatches = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const int num_lanes = std::uniform_int_distribution<int>(2, 6)(rng);
    std::vector<gb::ComparisonLane> lanes;
    for (int i = 0; i < num_lanes; ++i) {
      gb::SamplerSettings s;
      s.temperature = std::uniform_real_distribution<float>(0.0f, 1.6f)(rng);
      if (s.temperature < 0.1f) s.temperature = 0.0f;
      s.top_k = std::vector<int>{0, 3, 40}[rng() % 3];
      s.top_p = std::uniform_real_distribution<float>(0.3f, 1.0f)(rng);
      s.min_p = std::uniform_real_distribution<float>(0.0f, 0.2f)(rng);
      s.xtc.probability = (rng() % 2) ? 0.5f : 0.0f;
      std::shuffle(s.order.begin(), s.order.end(), rng);
      if (rng() % 2) s.stop_strings = {"."};  // some lanes end early, so lengths differ
      lanes.push_back({"lane" + std::to_string(i), s});
    }
    const int samples = std::uniform_int_distribution<int>(1, 3)(rng);
    auto c = run(f, spec_of(f, lanes, samples, true, std::uniform_int_distribution<int>(12, 40)(rng)));
    for (int j = 0; j < samples; ++j) {
      const gb::SamplerRng stream(c->sample(0, j).seed);
      for (int i = 0; i < num_lanes; ++i) {
        const gb::ComparisonSample& s = c->sample(i, j);
        QCOMPARE(s.seed, c->sample(0, j).seed);
        num_length_mismatches += s.token_ids.size() != c->sample(0, j).token_ids.size();
        for (size_t k = 0; k < s.tokens.size(); ++k) {
          const gb::TokenRecord& r = s.tokens[k].record;
          QCOMPARE(r.rng_counter, static_cast<uint64_t>(k));
          QCOMPARE(r.draw, stream.uniform_at(k, gb::SamplerRng::kPickLane));
          QCOMPARE(r.xtc_draw, stream.uniform_at(k, gb::SamplerRng::kXtcLane));
        }
      }
    }
  }
  QVERIFY(num_length_mismatches > 0);  // lanes did diverge in length somewhere
}

GB_TEST(prompt_blocks_are_shared_not_copied_and_all_return_to_the_pool) {
  REQUIRE_FIXTURE(f);
  gb::ComparisonSpec spec = spec_of(f, {{"A", sampled(0.9f, 0.95f, 40)}, {"B", sampled(1.3f, 1.0f, 0)}}, 4, false, 16);
  spec.prompt_ids.resize(40, 300);  // 40 tokens: the first 39 fill 2 blocks of 16
  const int32_t num_children = 8;
  gb::EngineConfig config;
  config.max_seqs = num_children + 1;
  auto engine = gbtest::make_test_engine(f, config);
  const gb::KvCacheManager& kv = engine->scheduler().kv_cache();
  auto started = gb::Comparison::start(*engine, spec);
  QVERIFY(started.ok());
  gb::Comparison& c = **started;
  int32_t num_prefill_tokens = 0, max_decode_seqs = 0;
  bool checked_sharing = false;
  while (!c.done()) {
    QVERIFY(c.advance(*engine).ok());
    if (c.forked() && !checked_sharing) {
      checked_sharing = true;
      const std::vector<int32_t> parent = kv.table(c.prompt_request()).block_ids();
      QCOMPARE(parent.size(), size_t{3});
      QCOMPARE(c.num_prompt_blocks_shared(), 2);
      for (const gb::ComparisonSample& s : c.samples()) {
        const std::vector<int32_t> child = kv.table(s.request).block_ids();
        QCOMPARE(child[0], parent[0]);
        QCOMPARE(child[1], parent[1]);
        QVERIFY(child[2] != parent[2]);  // the partial block is the child's own copy
      }
      for (int b = 0; b < 2; ++b) QCOMPARE(kv.pool().block(gb::BlockId{parent[b]}).ref_count, 1 + num_children);
      // 3 prompt blocks + one copied partial block per child; nothing else.
      QCOMPARE(kv.num_owned(), 3 + num_children);
    }
    if (c.done()) break;
    QVERIFY(engine->step().ok());
    for (const gb::TraceEvent& e : engine->drain_events()) {
      c.observe(e);
      if (const auto* p = std::get_if<gb::PrefillChunkEvent>(&e.body)) num_prefill_tokens += p->num_tokens;
      if (const auto* st = std::get_if<gb::StepEvent>(&e.body))
        max_decode_seqs = std::max(max_decode_seqs, st->num_decode_tokens);
    }
  }
  // The prompt ran once; each child recomputed only the last prompt token.
  QCOMPARE(num_prefill_tokens, 40 + num_children);
  QCOMPARE(max_decode_seqs, num_children);  // all samples decoded in the same steps
  // Finished samples freed their own blocks; the prompt's stay until closed.
  QCOMPARE(kv.num_owned(), 3);
  c.close(*engine);
  QCOMPARE(kv.num_owned(), 0);
  QCOMPARE(kv.num_available(), kv.num_blocks());
  QVERIFY(engine->scheduler().check_invariants().ok());
}

// A pool that cannot hold every sample at once: samples wait (or are preempted
// and recompute) and still produce exactly the tokens of a roomy pool.
GB_TEST(a_small_pool_gives_the_same_tokens) {
  REQUIRE_FIXTURE(f);
  const gb::ComparisonSpec spec =
      spec_of(f, {{"A", sampled(0.9f, 0.95f, 40)}, {"B", sampled(1.2f, 1.0f, 0)}}, 3, true, 200);
  gb::EngineConfig roomy;
  roomy.num_blocks = 256;
  gb::EngineConfig tight;
  tight.num_blocks = 32;  // 512 slots; six samples of up to ~215 tokens need far more
  auto a = run(f, spec, roomy);
  tight.max_seqs = 7;
  auto engine = gbtest::make_test_engine(f, tight);
  int32_t max_waiting = 0, num_preemptions = 0;
  auto b = gb::run_comparison(*engine, spec, [&](const gb::TraceEvent& e) {
    if (const auto* st = std::get_if<gb::StepEvent>(&e.body)) {
      max_waiting = std::max(max_waiting, st->num_waiting);
      num_preemptions += st->num_preemptions;
    }
  });
  QVERIFY(b.ok());
  QVERIFY(max_waiting + num_preemptions > 0);  // the pool really was too small
  QCOMPARE(engine->scheduler().kv_cache().num_owned(), 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) QCOMPARE((*b)->sample(i, j).token_ids, a->sample(i, j).token_ids);
}

GB_TEST(statistics_and_divergence_match_hand_computed_values) {
  std::vector<gb::TokenSampledEvent> tokens;
  for (gb::TokenId id : {5, 6, 5, 6, 5, 6, 7}) {
    gb::TokenSampledEvent t;
    t.token = id;
    tokens.push_back(t);
  }
  const gb::SampleStats s = gb::compute_sample_stats(tokens);
  QCOMPARE(s.length, 7);
  QCOMPARE(s.distinct_1, 3.0 / 7.0);
  QCOMPARE(s.distinct_2, 3.0 / 6.0);         // (5,6) (6,5) (6,7)
  QCOMPARE(s.repetition_rate, 1.0 - 3.0 / 4.0);  // 4-grams 5656 6565 5656 6567: 3 distinct of 4
  QVERIFY(!gb::first_divergence({1, 2, 3}, {1, 2, 3}).has_value());
  QCOMPARE(*gb::first_divergence({1, 2, 3}, {1, 9, 3}), 1);
  QCOMPARE(*gb::first_divergence({1, 2}, {1, 2, 3}), 2);
  QCOMPARE(*gb::first_divergence({}, {4}), 0);
}

GB_TEST(comparison_specs_are_checked) {
  gb::ComparisonSpec spec;
  spec.prompt_ids = {1, 2};
  spec.lanes = {{"A", {}}};
  QVERIFY(!gb::validate_comparison(spec).ok());  // one lane
  spec.lanes = {{"A", {}}, {"A", {}}};
  QVERIFY(gb::validate_comparison(spec).error().message.find("same name") != std::string::npos);
  spec.lanes[1].name = "B";
  spec.lanes[1].settings.top_p = 0.0f;
  QVERIFY(gb::validate_comparison(spec).error().message.find("lane 1 (B)") != std::string::npos);
  spec.lanes[1].settings.top_p = 0.9f;
  QVERIFY(gb::validate_comparison(spec).ok());
  spec.num_samples = 33;
  QVERIFY(!gb::validate_comparison(spec).ok());
}

}  // namespace test_comparison
