// KV eviction policies as Compare lanes (runtime/comparison.h,
// ComparisonLane::kv_policy) on stories260K: a policy lane whose budget holds
// the whole sequence is token-identical to the full lane (the policy is not
// part of the stream key, with CRN or without); a pruned lane is exactly its
// settings and policy submitted alone, and it did evict; forked samples still
// share the prompt's blocks beside policy lanes, and everything returns to the
// pool; a lane's JSON carries "kv_policy" both ways, and bad policies are
// refused naming the lane or the member.
#include <algorithm>

#include "gb_test.h"
#include "kv/kv_policy_json.h"
#include "kv/scheduler.h"
#include "runtime/comparison.h"
#include "runtime/comparison_json.h"
#include "stories_fixture.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_comparison_kv_policy {

namespace {

using Fixture = gbtest::StoriesFixture;

gb::SamplerSettings sampled(float temperature) {
  gb::SamplerSettings s;
  s.temperature = temperature;
  s.top_p = 0.95f;
  s.min_p = 0.0f;
  return s;
}

gb::KvPolicy policy(gb::KvPolicyKind kind, int32_t budget, int32_t sinks = -1) {
  gb::KvPolicy p;
  p.kind = kind;
  p.budget = budget;
  p.sinks = sinks;
  return p;
}

gb::ComparisonSpec spec_of(const Fixture& f, std::vector<gb::ComparisonLane> lanes, int samples, bool crn,
                           int max_tokens) {
  gb::ComparisonSpec spec;
  spec.prompt_ids = f.tokenizer->encode("Once upon a time, there was a little girl named Lily. She loved to", true);
  spec.lanes = std::move(lanes);
  spec.num_samples = samples;
  spec.seed = 20261207;
  spec.crn = crn;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  return spec;
}

struct Run {
  std::unique_ptr<gb::Engine> engine;
  std::unique_ptr<gb::Comparison> comparison;
  std::vector<gb::TraceEvent> events;
};

Run run(const Fixture& f, gb::ComparisonSpec spec) {
  gb::EngineConfig config;
  config.max_seqs = static_cast<int32_t>(spec.lanes.size()) * spec.num_samples + 1;
  Run r;
  r.engine = gbtest::make_test_engine(f, config);
  auto c = gb::run_comparison(*r.engine, std::move(spec), [&](const gb::TraceEvent& e) { r.events.push_back(e); });
  GB_CHECK_MSG(c.ok(), c.ok() ? "" : c.error().message.c_str());
  r.comparison = std::move(*c);
  return r;
}

int evictions_of(const Run& r, gb::RequestId id) {
  int n = 0;
  for (const gb::TraceEvent& e : r.events)
    if (const auto* ev = std::get_if<gb::KvEvictionEvent>(&e.body)) n += ev->request == id ? 1 : 0;
  return n;
}

}  // namespace

GB_TEST(policy_lanes_with_room_for_everything_equal_the_full_lane) {
  REQUIRE_FIXTURE(f);
  const gb::SamplerSettings s = sampled(1.0f);
  for (bool crn : {false, true}) {
    // 18 prompt tokens + 24 generated: a budget of 64 never evicts.
    Run r = run(f, spec_of(f,
                           {{"full", s, {}},
                            {"sink", s, policy(gb::KvPolicyKind::Sink, 64)},
                            {"h2o", s, policy(gb::KvPolicyKind::H2O, 64)},
                            {"snapkv", s, policy(gb::KvPolicyKind::SnapKV, 64)}},
                           3, crn, 24));
    const gb::Comparison& c = *r.comparison;
    QVERIFY(c.done());
    for (int32_t lane = 1; lane < 4; ++lane)
      for (int32_t j = 0; j < 3; ++j) {
        QCOMPARE(c.sample(lane, j).seed, c.sample(0, j).seed);
        QCOMPARE(c.sample(lane, j).token_ids, c.sample(0, j).token_ids);
        QVERIFY(!c.sample(lane, j).first_divergence.has_value());
        QCOMPARE(evictions_of(r, c.sample(lane, j).request), 0);
      }
    QCOMPARE(static_cast<int>(c.sample(0, 0).token_ids.size()), 24);
    // Not vacuous: the samples of a lane differ from each other.
    QVERIFY(c.sample(0, 0).token_ids != c.sample(0, 1).token_ids ||
            c.sample(0, 1).token_ids != c.sample(0, 2).token_ids);
  }
}

GB_TEST(a_pruned_lane_is_its_policy_run_alone_and_forks_still_share_the_prompt) {
  REQUIRE_FIXTURE(f);
  const std::vector<gb::ComparisonLane> lanes = {{"greedy", sampled(0.0f), {}},
                                                 {"sink", sampled(0.0f), policy(gb::KvPolicyKind::Sink, 8, 4)},
                                                 {"h2o", sampled(0.7f), policy(gb::KvPolicyKind::H2O, 12)},
                                                 {"sampled", sampled(0.7f), {}}};
  gb::ComparisonSpec spec = spec_of(f, lanes, 2, false, 32);
  const std::vector<gb::TokenId> prompt = spec.prompt_ids;
  Run r = run(f, std::move(spec));
  const gb::Comparison& c = *r.comparison;
  for (int32_t lane = 1; lane <= 2; ++lane)
    for (int32_t j = 0; j < 2; ++j) {
      const gb::ComparisonSample& s = c.sample(lane, j);
      QVERIFY(evictions_of(r, s.request) > 0);  // the policy pruned this sample's cache
      // The same request submitted alone, with the sample's seed and the policy.
      auto engine = gbtest::make_test_engine(f);
      gb::GenerationRequest alone;
      alone.prompt_ids = prompt;
      alone.sampling = lanes[static_cast<size_t>(lane)].settings;
      alone.sampling.seed = s.seed;
      alone.sampling.max_tokens = 32;
      alone.sampling.top_n_record = 1;
      alone.ignore_eos = true;
      alone.kv_policy = lanes[static_cast<size_t>(lane)].kv_policy;
      QVERIFY(engine->submit(alone).ok());
      QVERIFY(engine->run_until_idle().ok());
      std::vector<gb::TokenId> tokens;
      for (const gb::TraceEvent& e : engine->drain_events())
        if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) tokens.push_back(t->token);
      QCOMPARE(s.token_ids, tokens);
    }
  // The lanes ran with their resolved policies, and the full lanes still
  // forked the prompt: its blocks were shared by reference.
  QCOMPARE(gb::describe_kv_policy(c.spec().lanes[1].kv_policy), std::string("sink B=8 S=4 R=4"));
  QVERIFY(c.num_prompt_blocks_shared() >= 1);
  // Closed: every block is back in the pool.
  QCOMPARE(r.engine->scheduler().kv_cache().num_owned(), 0);
}

GB_TEST(a_lane_json_carries_its_kv_policy_both_ways) {
  auto lane = gb::comparison_lane_from_json(
      "h", R"({"temperature": 0.5, "kv_policy": {"policy": "h2o", "budget": 256, "sinks": 4}})", "test");
  QVERIFY(lane.ok());
  QCOMPARE(lane->settings.temperature, 0.5f);
  QCOMPARE(gb::describe_kv_policy(lane->kv_policy), std::string("h2o B=256 S=4 R=128"));
  auto again = gb::comparison_lane_from_json("h", gb::comparison_lane_to_json(*lane), "test");
  QVERIFY(again.ok());
  QVERIFY(again->kv_policy == lane->kv_policy);
  QCOMPARE(again->settings.temperature, 0.5f);
  // Without a policy: full, and the JSON is the sampler's alone.
  auto plain = gb::comparison_lane_from_json("p", R"({"temperature": 0})", "test");
  QVERIFY(plain.ok() && !plain->kv_policy.active());
  QVERIFY(gb::comparison_lane_to_json(*plain).find("kv_policy") == std::string::npos);
  auto named = gb::comparison_lane_from_json("p", R"({"kv_policy": "full"})", "test");
  QVERIFY(named.ok() && !named->kv_policy.active());

  // Refusals name what is wrong.
  const std::pair<const char*, const char*> bad[] = {
      {R"({"kv_policy": "h2o"})", "budget"},
      {R"({"kv_policy": {"policy": "lru", "budget": 8}})", "lru"},
      {R"({"kv_policy": {"policy": "sink", "budget": 8, "sinkz": 2}})", "sinkz"},
      {R"({"kv_policy": {"policy": "sink", "budget": "8"}})", "kv_policy.budget"},
      {R"({"kv_policy": {"policy": "sink", "budget": 4, "sinks": 4}})", "sink"},
      {R"({"kv_policy": 3})", "policy name or an object"},
      {R"({"temperature": -1, "kv_policy": "full"})", "temperature"},
  };
  for (const auto& [text, says] : bad) {
    auto r = gb::comparison_lane_from_json("x", text, "test");
    QVERIFY2(!r.ok(), text);
    QVERIFY2(r.error().message.find(says) != std::string::npos, r.error().message.c_str());
  }
  std::string field;
  QVERIFY(!gb::kv_policy_from_json(R"({"policy": "h2o", "budget": 99999999})", &field).ok());
  QCOMPARE(field, std::string("kv_policy.budget"));
  QCOMPARE(gb::kv_policy_to_json(gb::KvPolicy{}), std::string("\"full\""));
}

GB_TEST(a_policy_the_engine_cannot_run_is_refused_before_the_prompt) {
  REQUIRE_FIXTURE(f);
  gb::ComparisonSpec spec = spec_of(f, {{"a", sampled(0.0f), {}}, {"b", sampled(0.0f), policy(gb::KvPolicyKind::Sink, 4, 4)}}, 1, false, 4);
  QVERIFY(!gb::validate_comparison(spec).ok());
  QVERIFY(gb::validate_comparison(spec).error().message.find("lane 1 (b)") != std::string::npos);
  auto engine = gbtest::make_test_engine(f);
  auto c = gb::Comparison::start(*engine, std::move(spec));
  QVERIFY(!c.ok());
  QVERIFY(!engine->has_work());
}

}  // namespace test_comparison_kv_policy
