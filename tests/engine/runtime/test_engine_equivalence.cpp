// Batching, chunked prefill, paging, prefix caching, preemption and forking
// change speed, never results: each configuration must give the tokens (exact,
// greedy) and the logits (within 1e-5) of the request run alone, on stories260K.
#include <cmath>
#include <map>
#include <random>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "stories_fixture.h"
#include "kv/scheduler.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_engine_equivalence {

namespace {

struct Output {
  std::vector<gb::TokenId> tokens;
  std::vector<std::vector<float>> top_logits;  // per token: logits of the record's top-N, in order
  std::string finish_reason;
  int32_t num_cached = 0;
};

using Fixture = gbtest::StoriesFixture;
using gbtest::load_stories;

// The KV types every engine of these tests stores K/V in (the default F16
// unless a test of the KV types sets another).
gb::KvTypes g_kv_types;

std::unique_ptr<gb::Engine> make_engine(const Fixture& f, gb::EngineConfig config) {
  config.kv_types = g_kv_types;
  return gbtest::make_test_engine(f, config);
}

gb::GenerationRequest greedy(std::vector<gb::TokenId> prompt, int max_tokens) {
  gb::GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.top_n_record = 8;
  r.ignore_eos = true;  // fixed lengths make the comparisons simpler
  return r;
}

// Every request's tokens, top logits and finish reason, from the engine's events.
std::map<uint64_t, Output> collect(const std::vector<gb::TraceEvent>& events) {
  std::map<uint64_t, Output> out;
  for (const gb::TraceEvent& e : events) {
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      Output& o = out[t->request.value];
      o.tokens.push_back(t->token);
      std::vector<float> logits;
      for (const auto& c : t->record.top) logits.push_back(c.logit);
      o.top_logits.push_back(std::move(logits));
    } else if (const auto* fin = std::get_if<gb::RequestFinishedEvent>(&e.body)) {
      out[fin->request.value].finish_reason = fin->reason;
      out[fin->request.value].num_cached = fin->num_cached_tokens;
    }
  }
  return out;
}

// A prompt of `n` tokens: BOS then a deterministic mix of ordinary tokens.
std::vector<gb::TokenId> make_prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<gb::TokenId> pick(259, 511);
  std::vector<gb::TokenId> p{1};
  while (static_cast<int>(p.size()) < n) p.push_back(pick(rng));
  return p;
}

Output run_alone(const Fixture& f, const gb::GenerationRequest& r) {
  gb::EngineConfig config;
  auto engine = make_engine(f, config);
  auto id = engine->submit(r);
  GB_CHECK(id.ok());
  GB_CHECK(engine->run_until_idle().ok());
  return collect(engine->drain_events())[id->value];
}

// Four requests of 10-25 prompt tokens and max_tokens each: in a pool of 10
// blocks (160 token slots) they preempt each other.
std::vector<gb::GenerationRequest> preempting_workload(int max_tokens) {
  std::vector<gb::GenerationRequest> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(greedy(make_prompt(10 + 5 * i, 10 + static_cast<uint32_t>(i)), max_tokens));
  return reqs;
}

// Tokens exact, logits within 1e-5.
void expect_same(const Output& got, const Output& want, const std::string& what) {
  QVERIFY2(got.tokens == want.tokens, (what + ": tokens differ").c_str());
  QCOMPARE(got.top_logits.size(), want.top_logits.size());
  for (size_t i = 0; i < got.top_logits.size(); ++i) {
    QCOMPARE(got.top_logits[i].size(), want.top_logits[i].size());
    for (size_t k = 0; k < got.top_logits[i].size(); ++k)
      QVERIFY2(std::abs(got.top_logits[i][k] - want.top_logits[i][k]) <= 1e-5f,
               (what + ": logit of token " + std::to_string(i) + " rank " + std::to_string(k) + " differs").c_str());
  }
}

}  // namespace

// Every KV type: a prefix-cache hit, a copy-on-write fork and preemption with
// recompute give exactly the tokens and logits of cold runs at that type (the
// cache holds the same quantized rows however they got there), and a request
// of one type never hits blocks cached under another (the isolation key).
GB_TEST(every_kv_type_keeps_prefix_hits_forks_and_preemption_exact) {
  REQUIRE_FIXTURE(f);
  const gb::WeightType types[] = {gb::WeightType::F32, gb::WeightType::BF16, gb::WeightType::Q8_0, gb::WeightType::Q4_0, gb::WeightType::Q4_1,
                             gb::WeightType::IQ4_NL};
  for (const gb::WeightType t : types) {
    g_kv_types = {t, t == gb::WeightType::Q4_0 ? gb::WeightType::Q8_0 : t};
    const std::string what = gb::kv_types_name(g_kv_types);
    // Prefix hit.
    const auto prompt = make_prompt(100, 5);
    auto engine = make_engine(f, {});
    QVERIFY(engine->submit(greedy(prompt, 4)).ok());
    QVERIFY(engine->run_until_idle().ok());
    auto second = engine->submit(greedy(prompt, 12));
    QVERIFY(second.ok());
    QVERIFY(engine->run_until_idle().ok());
    auto out = collect(engine->drain_events());
    QCOMPARE(out[second->value].num_cached, 96);
    auto cold = greedy(prompt, 12);
    cold.use_prefix_cache = false;
    const Output alone = run_alone(f, cold);
    expect_same(out[second->value], alone, what + " prefix hit");
    // Preemption: 4 requests in 10 blocks.
    gb::EngineConfig small;
    small.num_blocks = 10;
    auto tight = make_engine(f, small);
    const std::vector<gb::GenerationRequest> reqs = preempting_workload(60);
    std::vector<gb::RequestId> ids;
    for (const gb::GenerationRequest& r : reqs) ids.push_back(tight->submit(r).value());
    QVERIFY(tight->run_until_idle().ok());
    auto tight_out = collect(tight->drain_events());
    for (size_t i = 0; i < reqs.size(); ++i) expect_same(tight_out[ids[i].value], run_alone(f, reqs[i]), what + " preempted");
    if (QTest::currentTestFailed()) break;
  }
  // The same engine never serves a prefix cached under other KV types: the
  // isolation key differs (hash_isolation_key covers kv_types).
  gb::IsolationKey a, b;
  a.kv_types = "f16/f16";
  b.kv_types = "q8_0/q8_0";
  QVERIFY(gb::hash_isolation_key(a) != gb::hash_isolation_key(b));
  g_kv_types = {};
}

GB_TEST(batched_equals_alone_for_1_to_32_other_requests) {
  REQUIRE_FIXTURE(f);
  const auto subject = greedy(make_prompt(9, 1), 24);
  const Output alone = run_alone(f, subject);
  QCOMPARE(alone.tokens.size(), size_t{24});
  for (int others : {1, 3, 8, 32}) {
    gb::EngineConfig config;
    config.max_seqs = 64;
    config.max_batch_tokens = 512;
    auto engine = make_engine(f, config);
    std::vector<gb::RequestId> ids;
    for (int i = 0; i < others; ++i) {
      // Others of different lengths, submitted before and after the subject.
      auto id = engine->submit(greedy(make_prompt(3 + (i * 7) % 40, 100 + static_cast<uint32_t>(i)), 5 + i % 17));
      QVERIFY(id.ok());
      if (i == others / 2) {
        auto sid = engine->submit(subject);
        QVERIFY(sid.ok());
        ids.push_back(*sid);
      }
    }
    QVERIFY(engine->run_until_idle().ok());
    auto out = collect(engine->drain_events());
    expect_same(out[ids[0].value], alone, "batched with " + std::to_string(others));
    if (QTest::currentTestFailed()) return;
  }
}

GB_TEST(chunked_prefill_equals_one_shot) {
  REQUIRE_FIXTURE(f);
  const auto subject = greedy(make_prompt(150, 2), 16);
  const Output alone = run_alone(f, subject);
  for (int chunk : {1, 7, 64}) {
    gb::EngineConfig config;
    config.max_prefill_chunk = chunk;
    auto engine = make_engine(f, config);
    auto id = engine->submit(subject);
    QVERIFY(id.ok());
    // A decode running alongside, so chunks and decodes share steps.
    QVERIFY(engine->submit(greedy(make_prompt(4, 3), 40)).ok());
    QVERIFY(engine->run_until_idle().ok());
    expect_same(collect(engine->drain_events())[id->value], alone, "chunk " + std::to_string(chunk));
    if (QTest::currentTestFailed()) return;
  }
}

GB_TEST(scrambled_block_order_equals_contiguous) {
  REQUIRE_FIXTURE(f);
  const auto prompt = make_prompt(37, 4);
  auto run = [&](const std::vector<int32_t>& table, std::vector<float>& last_logits) {
    auto backend = gb::make_cpu_backend(f.model, {1});
    GB_CHECK(backend->init_kv_pool({8, 16}).ok());
    gb::BatchLayout batch;
    batch.block_size = 16;
    batch.add_sequence(prompt.data(), 20, 0, table.data(), 4, false);
    std::vector<float> logits(512);
    GB_CHECK(backend->forward(batch, logits).ok());
    batch.clear();
    batch.add_sequence(prompt.data() + 20, 17, 20, table.data(), 4, true);  // second chunk, all logits
    last_logits.resize(17 * 512);
    GB_CHECK(backend->forward(batch, last_logits).ok());
  };
  std::vector<float> contiguous, scrambled;
  run({0, 1, 2, 3}, contiguous);
  run({6, 2, 7, 0}, scrambled);
  QVERIFY(contiguous == scrambled);  // same arithmetic, only the addresses differ
}

GB_TEST(prefix_cache_hit_equals_cold) {
  REQUIRE_FIXTURE(f);
  const auto prompt = make_prompt(100, 5);
  gb::EngineConfig config;
  auto engine = make_engine(f, config);
  auto first = engine->submit(greedy(prompt, 4));
  QVERIFY(first.ok());
  QVERIFY(engine->run_until_idle().ok());
  auto second_req = greedy(prompt, 20);
  auto second = engine->submit(second_req);
  QVERIFY(second.ok());
  QVERIFY(engine->run_until_idle().ok());
  auto out = collect(engine->drain_events());
  QCOMPARE(out[second->value].num_cached, 96);  // 6 full blocks of 16; the last token is always computed
  auto cold_req = second_req;
  cold_req.use_prefix_cache = false;
  expect_same(out[second->value], run_alone(f, cold_req), "prefix hit");
}

GB_TEST(preempt_and_resume_equals_uninterrupted) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.num_blocks = 10;  // 160 token slots for 4 requests that need ~90 each
  config.block_size = 16;
  auto engine = make_engine(f, config);
  const std::vector<gb::GenerationRequest> reqs = preempting_workload(80);
  std::vector<gb::RequestId> ids;
  for (const gb::GenerationRequest& r : reqs) {
    auto id = engine->submit(r);
    QVERIFY(id.ok());
    ids.push_back(*id);
  }
  int preemptions = 0;
  while (engine->has_work()) {
    QVERIFY(engine->step().ok());
    for (const auto& e : engine->drain_events()) {
      if (std::holds_alternative<gb::RequestPreemptedEvent>(e.body)) ++preemptions;
    }
  }
  QVERIFY2(preemptions > 0, "the workload was meant to force preemptions");
  // Re-run with event collection (the loop above drained them), same config.
  auto engine2 = make_engine(f, config);
  for (auto& r : reqs) QVERIFY(engine2->submit(r).ok());
  QVERIFY(engine2->run_until_idle().ok());
  auto out = collect(engine2->drain_events());
  for (size_t i = 0; i < reqs.size(); ++i) {
    expect_same(out[ids[i].value], run_alone(f, reqs[i]), "preempted request " + std::to_string(i));
    if (QTest::currentTestFailed()) return;
  }
}

GB_TEST(fork_then_continue_equals_independent_run) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  auto engine = make_engine(f, config);
  auto parent_req = greedy(make_prompt(12, 6), 30);
  parent_req.retain_kv = true;
  auto parent = engine->submit(parent_req);
  QVERIFY(parent.ok());
  QVERIFY(engine->run_until_idle().ok());
  auto parent_out = collect(engine->drain_events())[parent->value];
  QCOMPARE(parent_out.tokens.size(), size_t{30});

  // Branch after the prompt and 10 generated tokens with a different 11th token.
  const int32_t shared = 12 + 10;
  const gb::TokenId alternative = parent_out.tokens[10] == 300 ? 301 : 300;
  auto child = engine->fork(*parent, shared, alternative, 12);
  QVERIFY2(child.ok(), child.ok() ? "" : child.error().message.c_str());
  // Full blocks of the shared prefix are held by parent and child.
  const auto& kv = engine->scheduler().kv_cache();
  const auto& ptable = kv.table(*parent);
  const auto& ctable = kv.table(*child);
  QVERIFY(ptable.block_ids().size() >= 1 && ctable.block_ids().size() >= 1);
  QCOMPARE(ptable.block_ids()[0], ctable.block_ids()[0]);
  QCOMPARE(kv.pool().block(gb::BlockId{ptable.block_ids()[0]}).ref_count, 2);
  QVERIFY(engine->run_until_idle().ok());
  auto child_out = collect(engine->drain_events())[child->value];

  // Independent run: prompt = shared tokens + the alternative, generated from scratch.
  std::vector<gb::TokenId> independent_prompt = make_prompt(12, 6);
  independent_prompt.insert(independent_prompt.end(), parent_out.tokens.begin(), parent_out.tokens.begin() + 10);
  independent_prompt.push_back(alternative);
  Output independent = run_alone(f, greedy(independent_prompt, 11));
  // The child's first token is the forced alternative; the rest must match.
  QCOMPARE(child_out.tokens.size(), size_t{12});
  QCOMPARE(child_out.tokens[0], alternative);
  child_out.tokens.erase(child_out.tokens.begin());
  child_out.top_logits.erase(child_out.top_logits.begin());
  expect_same(child_out, independent, "fork");
  QVERIFY(engine->release(*parent));
  QVERIFY(engine->release(*child));
  QCOMPARE(engine->scheduler().kv_cache().num_owned(), 0);
}

GB_TEST(impossible_prompt_rejected_for_that_request_only) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.num_blocks = 4;
  auto engine = make_engine(f, config);
  auto ok_req = engine->submit(greedy(make_prompt(10, 7), 5));
  QVERIFY(ok_req.ok());
  auto too_long = engine->submit(greedy(make_prompt(100, 8), 5));  // needs 7 blocks of 4
  QVERIFY(!too_long.ok());
  QVERIFY2(too_long.error().message.find("KV blocks") != std::string::npos, too_long.error().message.c_str());
  QVERIFY(engine->run_until_idle().ok());
  auto out = collect(engine->drain_events());
  QCOMPARE(out[ok_req->value].tokens.size(), size_t{5});
}

GB_TEST(seeded_sampling_same_tokens_alone_and_in_a_batch) {
  REQUIRE_FIXTURE(f);
  auto subject = greedy(make_prompt(6, 9), 40);
  subject.sampling.temperature = 1.0f;
  subject.sampling.top_k = 0;
  subject.sampling.top_p = 0.9f;
  subject.sampling.min_p = 0.0f;
  subject.sampling.seed = 1234;
  const Output alone = run_alone(f, subject);
  QCOMPARE(run_alone(f, subject).tokens, alone.tokens);  // repeatable
  gb::EngineConfig config;
  auto engine = make_engine(f, config);
  for (int i = 0; i < 5; ++i) {
    auto other = greedy(make_prompt(5 + i, 50 + static_cast<uint32_t>(i)), 20 + i);
    other.sampling.temperature = 0.7f;
    other.sampling.seed = static_cast<uint64_t>(i);
    QVERIFY(engine->submit(other).ok());
  }
  auto id = engine->submit(subject);
  QVERIFY(id.ok());
  QVERIFY(engine->run_until_idle().ok());
  expect_same(collect(engine->drain_events())[id->value], alone, "seeded sample in a batch");
  // A different seed draws a different sequence (40 tokens at temperature 1).
  subject.sampling.seed = 1235;
  QVERIFY(run_alone(f, subject).tokens != alone.tokens);
}


// The CPU pool is reserved, not touched: resident memory follows the tokens
// held (a few pages per layer for one short request), not the capacity.
GB_TEST(kv_pool_memory_is_committed_as_it_is_used) {
  REQUIRE_FIXTURE(f);
  gb::EngineConfig config;
  config.num_blocks = 4096;  // 65536 token slots
  auto engine = make_engine(f, config);
  const size_t pool = engine->backend().kv_pool_bytes();
  QCOMPARE(pool, size_t{4096} * 16 * gb::kv_bytes_per_token(f.model->config, config.kv_types));
  QCOMPARE(engine->backend().kv_resident_bytes(), size_t{0});
  QVERIFY(engine->submit(greedy(make_prompt(30, 3), 10)).ok());
  QVERIFY(engine->run_until_idle().ok());
  const size_t resident = engine->backend().kv_resident_bytes();
  QVERIFY2(resident > 0 && resident < pool / 64,
           (std::to_string(resident) + " resident of a " + std::to_string(pool) + "-byte pool").c_str());
}

}  // namespace test_engine_equivalence
