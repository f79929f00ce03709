// Kept KV for branching (retain_kv) on a small pool, on stories260K: many
// regenerations never stall the engine, kept blocks are bounded and give way
// to requests that need them, a branch from a request whose blocks are gone is
// a re-prefill with the same result as a copy-on-write fork, prefix-hit counts
// never exceed the prompt, and a request that can never be admitted fails with
// an ErrorEvent instead of leaving the engine with work it cannot do.
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "gb_test.h"
#include "kv/scheduler.h"
#include "runtime/engine.h"
#include "stories_fixture.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_engine_retention {

namespace {

using Fixture = gbtest::StoriesFixture;

struct Output {
  std::vector<gb::TokenId> tokens;
  std::vector<std::vector<float>> top_logits;
  std::string reason;
  int32_t num_prompt = 0;
  int32_t num_cached = 0;
};

std::map<uint64_t, Output> collect(const std::vector<gb::TraceEvent>& events, std::vector<std::string>* errors = nullptr) {
  std::map<uint64_t, Output> out;
  for (const gb::TraceEvent& e : events) {
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      Output& o = out[t->request.value];
      o.tokens.push_back(t->token);
      std::vector<float> logits;
      for (const auto& c : t->record.top) logits.push_back(c.logit);
      o.top_logits.push_back(std::move(logits));
    } else if (const auto* fin = std::get_if<gb::RequestFinishedEvent>(&e.body)) {
      Output& o = out[fin->request.value];
      o.reason = fin->reason;
      o.num_prompt = fin->num_prompt_tokens;
      o.num_cached = fin->num_cached_tokens;
    } else if (const auto* err = std::get_if<gb::ErrorEvent>(&e.body)) {
      if (errors) errors->push_back(err->message);
    }
  }
  return out;
}

std::vector<gb::TokenId> make_prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<gb::TokenId> pick(259, 511);
  std::vector<gb::TokenId> p{1};
  while (static_cast<int>(p.size()) < n) p.push_back(pick(rng));
  return p;
}

gb::GenerationRequest kept(std::vector<gb::TokenId> prompt, int max_tokens, uint64_t seed, float temperature) {
  gb::GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = temperature;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0.0f;
  r.sampling.seed = seed;
  r.sampling.max_tokens = max_tokens;
  r.sampling.top_n_record = 8;
  r.ignore_eos = true;
  // BOS ends a story (as in llama2.c) even with ignore_eos: banned, so every
  // answer runs to max_tokens and the pool really fills.
  r.sampling.logit_bias = {{1, -std::numeric_limits<float>::infinity()}};
  r.retain_kv = true;  // as the workbench submits: every answer can be branched
  return r;
}

// Steps until idle, failing if the engine keeps reporting work without making
// progress (the old behaviour: has_work() true, step() false, for ever).
bool run_bounded(gb::Engine& engine, int max_steps) {
  int idle_steps = 0;
  for (int i = 0; i < max_steps && engine.has_work(); ++i) {
    auto stepped = engine.step();
    if (!stepped) return false;
    idle_steps = *stepped ? 0 : idle_steps + 1;
    if (idle_steps > 2) return false;
  }
  return !engine.has_work();
}

// Blocks the kept requests hold, each counted once.
int32_t kept_blocks(const gb::Engine& engine) {
  std::set<int32_t> blocks;
  for (gb::RequestId id : engine.retained_requests())
    for (int32_t b : engine.scheduler().kv_cache().table(id).block_ids()) blocks.insert(b);
  return static_cast<int32_t>(blocks.size());
}

}  // namespace

GB_TEST(fifty_regenerations_of_long_answers_on_a_small_pool_all_finish) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.num_blocks = 32;  // 512 tokens: one answer of 270 tokens takes 17 blocks
  config.max_retained = 4;
  auto engine = gbtest::make_test_engine(f, config);
  const std::vector<gb::TokenId> prompt = make_prompt(40, 3);  // two full blocks to share
  std::vector<gb::RequestId> ids;
  for (int i = 0; i < 50; ++i) {
    // A new seed each time, as Regenerate draws one.
    auto id = engine->submit(kept(prompt, 230, 1000 + static_cast<uint64_t>(i), 1.0f));
    QVERIFY(id.ok());
    ids.push_back(*id);
    QVERIFY2(run_bounded(*engine, 1000), ("regeneration " + std::to_string(i) + " did not finish").c_str());
    const auto out = collect(engine->drain_events());
    QCOMPARE(out.at(id->value).reason, std::string("max_tokens"));
    QCOMPARE(out.at(id->value).tokens.size(), size_t{230});
    // Every regeneration after the first reuses the prompt's full blocks.
    QCOMPARE(out.at(id->value).num_cached, i == 0 ? 0 : 32);
    QVERIFY(static_cast<int>(engine->retained_requests().size()) <= config.max_retained);
    // What is owned is exactly what the kept requests hold; the rest is free or cached.
    const auto& kv = engine->scheduler().kv_cache();
    QCOMPARE(kv.num_owned(), kept_blocks(*engine));
    QCOMPARE(kv.num_owned() + kv.num_free() + kv.num_cached(), config.num_blocks);
    QVERIFY(engine->scheduler().check_invariants().ok());
  }
  // The newest answer is still kept (copy-on-write branch); releasing every kept
  // request leaves nothing owned.
  QVERIFY(engine->scheduler().is_retained(ids.back()));
  for (gb::RequestId id : engine->retained_requests()) QVERIFY(engine->release(id));
  QCOMPARE(engine->scheduler().kv_cache().num_owned(), 0);
}

GB_TEST(kept_blocks_give_way_to_a_request_that_needs_them) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.num_blocks = 16;
  config.max_retained = 0;  // no count bound: only pressure releases them
  auto engine = gbtest::make_test_engine(f, config);
  for (uint32_t i = 0; i < 3; ++i) {
    auto id = engine->submit(kept(make_prompt(10, 20 + i), 100, 5, 0.0f));  // 110 tokens: 7 blocks
    QVERIFY(id.ok());
    QVERIFY(run_bounded(*engine, 500));
    QCOMPARE(collect(engine->drain_events()).at(id->value).reason, std::string("max_tokens"));
  }
  // The third needed blocks the first two kept: the longest unused went first.
  QCOMPARE(engine->retained_requests().size(), size_t{2});
  QCOMPARE(engine->retained_requests().back().value, uint64_t{3});
}

GB_TEST(a_pool_full_of_kept_blocks_without_eviction_fails_the_waiting_request_clearly) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.num_blocks = 16;
  config.max_retained = 0;
  config.evict_retained = false;  // only release() frees kept blocks
  auto engine = gbtest::make_test_engine(f, config);
  std::vector<gb::RequestId> ids;
  for (uint32_t i = 0; i < 2; ++i) {
    auto id = engine->submit(kept(make_prompt(10, 30 + i), 100, 5, 0.0f));
    QVERIFY(id.ok());
    ids.push_back(*id);
    QVERIFY(run_bounded(*engine, 500));
  }
  (void)engine->drain_events();
  // 14 of 16 blocks are kept; a 40-token prompt needs 3.
  auto stuck = engine->submit(kept(make_prompt(40, 40), 100, 5, 0.0f));
  QVERIFY(stuck.ok());
  // Nothing runs and it cannot be admitted: one step reports it, then no work is left.
  QVERIFY(engine->has_work());
  auto stepped = engine->step();
  QVERIFY(stepped.ok());
  QVERIFY(!*stepped);
  QVERIFY(!engine->has_work());
  std::vector<std::string> errors;
  const auto out = collect(engine->drain_events(), &errors);
  QCOMPARE(errors.size(), size_t{1});
  QVERIFY2(errors[0].find("cannot start") != std::string::npos && errors[0].find("release") != std::string::npos,
           errors[0].c_str());
  QCOMPARE(out.at(stuck->value).reason, std::string("error"));
  // The way out: release the kept requests; the same request then runs.
  for (gb::RequestId id : ids) QVERIFY(engine->release(id));
  auto again = engine->submit(kept(make_prompt(40, 40), 100, 5, 0.0f));
  QVERIFY(again.ok());
  QVERIFY(run_bounded(*engine, 500));
  QCOMPARE(collect(engine->drain_events()).at(again->value).reason, std::string("max_tokens"));
}

GB_TEST(a_branch_after_release_equals_the_copy_on_write_branch) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  auto engine = gbtest::make_test_engine(f, config);
  auto parent = engine->submit(kept(make_prompt(12, 6), 60, 9, 0.0f));
  QVERIFY(parent.ok());
  QVERIFY(run_bounded(*engine, 500));
  const Output p = collect(engine->drain_events()).at(parent->value);
  const int32_t at = 12 + 37;  // not a block boundary: the last block is partial
  const gb::TokenId alternative = p.tokens[37] == 300 ? 301 : 300;

  auto cow = engine->fork(*parent, at, alternative, 20);
  QVERIFY2(cow.ok(), cow.ok() ? "" : cow.error().message.c_str());
  QVERIFY(run_bounded(*engine, 500));
  const Output a = collect(engine->drain_events()).at(cow->value);
  QCOMPARE(a.num_cached, at);  // every shared token reused, none recomputed

  QVERIFY(engine->release(*parent));
  QVERIFY(!engine->scheduler().is_retained(*parent));
  auto again = engine->fork(*parent, at, alternative, 20);
  QVERIFY2(again.ok(), again.ok() ? "" : again.error().message.c_str());
  QVERIFY(run_bounded(*engine, 500));
  const Output b = collect(engine->drain_events()).at(again->value);
  QCOMPARE(b.tokens, a.tokens);
  QCOMPARE(b.top_logits.size(), a.top_logits.size());
  for (size_t i = 0; i < a.top_logits.size(); ++i)
    for (size_t k = 0; k < a.top_logits[i].size(); ++k) QVERIFY(std::abs(a.top_logits[i][k] - b.top_logits[i][k]) <= 1e-5f);
  // The released full blocks were still cached: the re-prefill hit them.
  QCOMPARE(b.num_cached, at / 16 * 16);
  QCOMPARE(b.num_prompt, at);
}

GB_TEST(a_cancelled_request_can_still_be_branched) {
  REQUIRE_FIXTURE(f);
  auto engine = gbtest::make_test_engine(f, {});
  auto id = engine->submit(kept(make_prompt(8, 2), 200, 4, 0.0f));
  QVERIFY(id.ok());
  for (int i = 0; i < 30; ++i) QVERIFY(engine->step().ok());
  QVERIFY(engine->cancel(*id));
  QVERIFY(!engine->has_work());
  const Output p = collect(engine->drain_events()).at(id->value);
  QCOMPARE(p.reason, std::string("cancelled"));
  QVERIFY(p.tokens.size() > 10);
  auto child = engine->fork(*id, 8 + 10, std::nullopt, 5);
  QVERIFY2(child.ok(), child.ok() ? "" : child.error().message.c_str());
  QVERIFY(run_bounded(*engine, 200));
  const Output c = collect(engine->drain_events()).at(child->value);
  // Greedy: recomputing the logits after output token 9 gives output token 10 again.
  QCOMPARE(c.tokens.front(), p.tokens[10]);
  QCOMPARE(engine->scheduler().kv_cache().num_owned(), engine->scheduler().kv_cache().table(*child).num_blocks());
}

GB_TEST(prefix_hits_never_exceed_the_prompt_under_preemption) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.num_blocks = 24;
  config.max_retained = 2;
  auto engine = gbtest::make_test_engine(f, config);
  const std::vector<gb::TokenId> prompt = make_prompt(40, 8);
  std::vector<gb::RequestId> ids;
  for (int i = 0; i < 6; ++i) {  // together far more than the pool: preemptions
    auto id = engine->submit(kept(prompt, 120, 50 + static_cast<uint64_t>(i), 1.0f));
    QVERIFY(id.ok());
    ids.push_back(*id);
  }
  int preemptions = 0;
  std::vector<gb::TraceEvent> events;
  for (int i = 0; i < 3000 && engine->has_work(); ++i) {
    QVERIFY(engine->step().ok());
    for (auto& e : engine->drain_events()) {
      preemptions += std::holds_alternative<gb::RequestPreemptedEvent>(e.body);
      if (const auto* a = std::get_if<gb::RequestAdmittedEvent>(&e.body)) QVERIFY(a->num_cached_tokens <= 40);
      events.push_back(std::move(e));
    }
  }
  QVERIFY(!engine->has_work());
  QVERIFY2(preemptions > 0, "the workload was meant to force preemptions");
  const auto out = collect(events);
  for (gb::RequestId id : ids) {
    QCOMPARE(out.at(id.value).reason, std::string("max_tokens"));
    QVERIFY(out.at(id.value).num_cached <= out.at(id.value).num_prompt);
  }
}

GB_TEST(a_forgotten_request_cannot_be_branched_and_says_so) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.max_finished_records = 2;
  auto engine = gbtest::make_test_engine(f, config);
  std::vector<gb::RequestId> ids;
  for (uint32_t i = 0; i < 3; ++i) {
    auto id = engine->submit(kept(make_prompt(6, 60 + i), 8, 1, 0.0f));
    QVERIFY(id.ok());
    ids.push_back(*id);
    QVERIFY(run_bounded(*engine, 100));
  }
  auto old = engine->fork(ids[0], 8, std::nullopt, 4);
  QVERIFY(!old.ok());
  QVERIFY2(old.error().message.find("unknown") != std::string::npos, old.error().message.c_str());
  QVERIFY(engine->fork(ids[2], 8, std::nullopt, 4).ok());
  // Its record gone, it keeps no blocks either.
  QVERIFY(!engine->scheduler().is_retained(ids[0]));
}

GB_TEST(a_fork_with_no_free_block_for_its_copy_re_prefills_instead_of_failing) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.num_blocks = 16;
  config.max_retained = 0;
  auto engine = gbtest::make_test_engine(f, config);
  auto a = engine->submit(kept(make_prompt(10, 70), 200, 5, 0.0f));
  auto b = engine->submit(kept(make_prompt(10, 71), 200, 5, 0.0f));
  QVERIFY(a.ok() && b.ok());
  // Step until the two running requests own every block (nothing kept to release).
  const gb::KvCacheManager& kv = engine->scheduler().kv_cache();
  for (int i = 0; i < 500 && kv.num_available() > 0; ++i) QVERIFY(engine->step().ok());
  QCOMPARE(kv.num_available(), 0);
  const gb::Request* r = engine->scheduler().find(*a);
  QVERIFY(r != nullptr && r->state == gb::RequestState::Running);
  int32_t at = r->num_tokens_computed;
  if (at % 16 == 0) --at;  // a partial last block: copy-on-write needs a free block
  const gb::TokenId alternative = 300;
  auto child = engine->fork(*a, at, alternative, 20);
  QVERIFY2(child.ok(), child.ok() ? "" : child.error().message.c_str());
  QVERIFY(run_bounded(*engine, 3000));
  const Output c = collect(engine->drain_events()).at(child->value);
  QCOMPARE(c.reason, std::string("max_tokens"));
  // The same fork on a roomy pool after the parent finished: the same tokens.
  auto roomy = gbtest::make_test_engine(f, {});
  auto a2 = roomy->submit(kept(make_prompt(10, 70), 200, 5, 0.0f));
  QVERIFY(a2.ok());
  QVERIFY(run_bounded(*roomy, 500));
  auto child2 = roomy->fork(*a2, at, alternative, 20);
  QVERIFY(child2.ok());
  QVERIFY(run_bounded(*roomy, 500));
  QCOMPARE(c.tokens, collect(roomy->drain_events()).at(child2->value).tokens);
}

// Engine::kv_usage, the summary serve-bench reports: a kept request of 40 + 10
// tokens holds 50 computed slots... minus the last token, whose K/V is never
// computed: ceil(49 / 16) = 4 blocks, 64 - 49 = 15 empty slots in them.
GB_TEST(kv_usage_counts_the_blocks_and_empty_slots_a_kept_request_holds) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.num_blocks = 32;
  auto engine = gbtest::make_test_engine(f, config);
  QCOMPARE(engine->kv_usage().num_owned, 0);
  QCOMPARE(engine->kv_usage(true).num_empty_owned_slots, int64_t{0});
  const std::vector<gb::TokenId> prompt = make_prompt(40, 5);
  auto id = engine->submit(kept(prompt, 10, 1, 0.0f));
  QVERIFY(id.ok());
  // Queued: live, holding its prompt; waiting until a step admits it.
  QVERIFY(engine->is_live(*id));
  QVERIFY(engine->live_tokens(*id) == prompt);
  QCOMPARE(engine->kv_usage().num_waiting, 1);
  QVERIFY(run_bounded(*engine, 100));
  QVERIFY(!engine->is_live(*id));
  QVERIFY(engine->live_tokens(*id).empty());
  QCOMPARE(engine->kv_usage().num_waiting, 0);
  QCOMPARE(engine->kv_usage().num_empty_owned_slots, int64_t{0});  // not counted unless asked
  QCOMPARE(engine->kv_snapshot().num_owned, kept_blocks(*engine));
  const gb::Engine::KvUsage u = engine->kv_usage(/*count_empty_slots=*/true);
  QCOMPARE(u.num_blocks, 32);
  QCOMPARE(u.num_running, 0);
  QCOMPARE(u.num_owned, kept_blocks(*engine));
  QCOMPARE(u.num_owned, 4);
  QCOMPARE(u.num_empty_owned_slots, int64_t{15});
  QCOMPARE(u.num_owned + u.num_free + u.num_cached, u.num_blocks);
}

}  // namespace test_engine_retention
