// KV eviction through the Engine and the scorer, on stories260K (context 512):
//  - with a budget at least the sequence, every policy is greedy-identical to
//    full (tokens and logits bit for bit: the same kernels read the same rows);
//  - at small budgets the policies run within their budget (the engine's
//    invariant sweep after every step), past the model's context, batched ==
//    alone bit for bit (the attention mass is summed in a fixed order), and
//    the policies differ from full and from each other;
//  - score --kv-policy: a budget past the text gives KL 0 and the full cache's
//    log-probabilities; a small one evicts, holds at most its budget, and costs
//    some KL; snapkv prunes the prompt once;
//  - what cannot run is refused with a reason (speculative decoding).
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "kv/kv_policy.h"
#include "runtime/engine.h"
#include "runtime/kv_policy_score.h"
#include "stories_fixture.h"

namespace test_kv_eviction_engine {

namespace {

using gb::KvPolicy;
using gb::KvPolicyKind;

struct Out {
  std::vector<gb::TokenId> tokens;
  std::vector<std::vector<float>> logits;  // top-8 logits per token
  std::string reason;
};

std::vector<gb::TokenId> prompt_of(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<gb::TokenId> pick(259, 511);
  std::vector<gb::TokenId> p{1};
  while (static_cast<int>(p.size()) < n) p.push_back(pick(rng));
  return p;
}

gb::GenerationRequest request(const std::vector<gb::TokenId>& prompt, int max_tokens, const KvPolicy& policy) {
  gb::GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.top_n_record = 8;
  r.ignore_eos = true;
  r.sampling.logit_bias = {{1, -std::numeric_limits<float>::infinity()}};  // BOS ends a llama2.c story
  r.kv_policy = policy;
  return r;
}

std::map<uint64_t, Out> collect(const std::vector<gb::TraceEvent>& events) {
  std::map<uint64_t, Out> out;
  for (const gb::TraceEvent& e : events) {
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      Out& o = out[t->request.value];
      o.tokens.push_back(t->token);
      std::vector<float> l;
      for (const auto& c : t->record.top) l.push_back(c.logit);
      o.logits.push_back(std::move(l));
    } else if (const auto* f = std::get_if<gb::RequestFinishedEvent>(&e.body)) {
      out[f->request.value].reason = f->reason;
    }
  }
  return out;
}

// The requests run together in one engine (batched), in the order given, on
// `threads` threads.
std::vector<Out> run(const gbtest::StoriesFixture& f, const std::vector<gb::GenerationRequest>& reqs,
                     gb::EngineConfig config = {}, int threads = 1) {
  config.check_invariants = true;
  gb::CpuBackendOptions cpu;
  cpu.num_threads = threads;
  auto engine = std::make_unique<gb::Engine>(f.model, f.tokenizer, gb::make_cpu_backend(f.model, cpu), config);
  GB_CHECK(engine->start().ok());
  std::vector<gb::RequestId> ids;
  for (const gb::GenerationRequest& r : reqs) {
    auto id = engine->submit(r);
    GB_CHECK_MSG(id.ok(), id.ok() ? "" : id.error().message.c_str());
    ids.push_back(*id);
  }
  GB_CHECK(engine->run_until_idle().ok());
  auto by_id = collect(engine->drain_events());
  std::vector<Out> out;
  for (gb::RequestId id : ids) out.push_back(by_id[id.value]);
  return out;
}

KvPolicy policy(KvPolicyKind kind, int32_t budget) {
  KvPolicy p;
  p.kind = kind;
  p.budget = budget;
  if (kind == KvPolicyKind::SnapKV) p.window = 8;
  return p;
}

constexpr KvPolicyKind kEvicting[] = {KvPolicyKind::Sink, KvPolicyKind::H2O, KvPolicyKind::SnapKV};

}  // namespace

GB_TEST(every_policy_with_a_budget_past_the_sequence_is_identical_to_full) {
  REQUIRE_FIXTURE(f);
  const auto prompt = prompt_of(60, 3);
  const Out full = run(f, {request(prompt, 80, {})})[0];
  QCOMPARE(static_cast<int>(full.tokens.size()), 80);
  for (KvPolicyKind kind : kEvicting) {
    const Out got = run(f, {request(prompt, 80, policy(kind, 200))})[0];
    const std::string name = gb::kv_policy_name(kind);
    QVERIFY2(got.tokens == full.tokens, (name + ": tokens differ").c_str());
    QVERIFY2(got.logits == full.logits, (name + ": logits differ").c_str());
  }
}

GB_TEST(small_budgets_run_within_budget_past_the_context_and_batched_equals_alone) {
  REQUIRE_FIXTURE(f);
  const auto prompt = prompt_of(100, 7);
  // 100 + 500 tokens: past stories260K's 512-token context, which only an
  // evicting request may pass.
  std::vector<gb::GenerationRequest> reqs;
  for (KvPolicyKind kind : kEvicting) reqs.push_back(request(prompt, 500, policy(kind, 48)));
  reqs.push_back(request(prompt, 300, {}));
  const std::vector<Out> batched = run(f, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Out alone = run(f, {reqs[i]})[0];
    QVERIFY2(alone.tokens == batched[i].tokens && alone.logits == batched[i].logits,
             ("request " + std::to_string(i) + ": batched differs from alone").c_str());
  }
  for (size_t i = 0; i < 2; ++i) {  // sink and h2o keep their budget as they go: past the context
    QCOMPARE(static_cast<int>(batched[i].tokens.size()), 500);
    QCOMPARE(batched[i].reason, std::string("max_tokens"));
  }
  // snapkv's answer appends (its budget is the prompt's): it stops at the context.
  QCOMPARE(static_cast<int>(batched[2].tokens.size()), 512 - 100);
  QCOMPARE(batched[2].reason, std::string("length"));
  // sink and h2o evict from the prompt on; snapkv keeps the answer, so it may
  // match full longer, but not throughout.
  const Out& full = batched[3];
  for (size_t i = 0; i < 3; ++i) {
    const std::vector<gb::TokenId> head(batched[i].tokens.begin(), batched[i].tokens.begin() + 300);
    QVERIFY2(head != full.tokens, (std::string(gb::kv_policy_name(kEvicting[i])) + " matches full").c_str());
  }
  QVERIFY(batched[0].tokens != batched[1].tokens);
  // The attention mass h2o and snapkv rank by is summed in a fixed order:
  // three threads, batched or alone, give the same bits as one.
  const std::vector<Out> threaded = run(f, reqs, {}, 3);
  for (size_t i = 0; i < reqs.size(); ++i) QVERIFY(threaded[i].tokens == batched[i].tokens);
  QVERIFY(run(f, {reqs[1]}, {}, 3)[0].tokens == batched[1].tokens);
  // A pool too small for the full request still serves the evicting ones.
  gb::EngineConfig tight;
  tight.num_blocks = 12;
  const std::vector<Out> small = run(f, {reqs[0], reqs[1]}, tight);
  QVERIFY(small[0].tokens == batched[0].tokens);
  QVERIFY(small[1].tokens == batched[1].tokens);
}

// The full-cache shadow: the same tokens with every token kept, in the same
// batches; a KvShadowEvent per generated token after the first, KL 0 where
// nothing was evicted, not 0 once the budget bites.
GB_TEST(a_shadow_follows_its_request_and_measures_the_cost_per_token) {
  REQUIRE_FIXTURE(f);
  const auto prompt = prompt_of(30, 5);
  for (const int32_t budget : {400, 24}) {
    auto engine = gbtest::make_test_engine(f, {});
    auto r = request(prompt, 120, policy(KvPolicyKind::Sink, budget));
    r.kv_shadow = true;
    auto id = engine->submit(r);
    QVERIFY(id.ok());
    QVERIFY(engine->run_until_idle().ok());
    const std::vector<gb::TraceEvent> events = engine->drain_events();
    std::optional<uint64_t> shadow;
    std::vector<gb::KvShadowEvent> kls;
    std::map<uint64_t, std::vector<gb::TokenId>> tokens;
    for (const gb::TraceEvent& e : events) {
      if (const auto* sub = std::get_if<gb::RequestSubmittedEvent>(&e.body); sub && sub->purpose == "kv_shadow")
        shadow = sub->request.value;
      if (const auto* k = std::get_if<gb::KvShadowEvent>(&e.body)) kls.push_back(*k);
      if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) tokens[t->request.value].push_back(t->token);
    }
    QVERIFY(shadow.has_value());
    QCOMPARE(static_cast<int>(kls.size()), 119);  // every token after the first, which the shadow starts from
    QCOMPARE(static_cast<int>(tokens[*shadow].size()), 119);
    QVERIFY(std::equal(tokens[*shadow].begin(), tokens[*shadow].end(), tokens[id->value].begin() + 1));
    double sum = 0.0;
    for (size_t i = 0; i < kls.size(); ++i) {
      QCOMPARE(kls[i].request.value, id->value);
      QCOMPARE(kls[i].index, static_cast<int32_t>(i) + 1);
      QCOMPARE(kls[i].position, 30 + static_cast<int32_t>(i) + 1);
      sum += kls[i].kl;
    }
    if (budget == 400) {
      QCOMPARE(sum, 0.0);
      for (const auto& k : kls) QVERIFY(k.top1_agree && k.logprob_full == k.logprob_pruned);
    } else {
      QVERIFY2(sum > 1e-3, std::to_string(sum).c_str());
    }
  }
}

GB_TEST(eviction_is_refused_with_speculative_decoding) {
  REQUIRE_FIXTURE(f);
  auto engine = gbtest::make_test_engine(f, {});
  auto r = request(prompt_of(20, 1), 10, policy(KvPolicyKind::Sink, 32));
  gb::SpeculativeConfig spec;
  r.speculative = spec;
  auto id = engine->submit(r);
  QVERIFY(!id.ok());
  QVERIFY2(id.error().message.find("speculative") != std::string::npos, id.error().message.c_str());
  auto bad = request(prompt_of(20, 1), 10, policy(KvPolicyKind::H2O, 0));
  QVERIFY(!engine->submit(bad).ok());
}

GB_TEST(score_with_a_policy_measures_against_the_full_cache_in_one_batch) {
  REQUIRE_FIXTURE(f);
  std::vector<gb::TokenId> text = prompt_of(300, 11);
  gb::CpuBackendOptions cpu;
  cpu.num_threads = 1;
  auto backend = gb::make_cpu_backend(f.model, cpu);
  for (KvPolicyKind kind : kEvicting) {
    const std::string name = gb::kv_policy_name(kind);
    const int32_t prompt = kind == KvPolicyKind::SnapKV ? 150 : 1;
    auto big = gb::resolve_kv_policy(policy(kind, 400));
    QVERIFY(big.ok());
    gb::KvPolicyScoreStats st;
    auto same = gb::score_tokens_with_kv_policy(*f.model, *backend, text, *big, prompt, {}, &st);
    QVERIFY2(same.ok(), same.ok() ? "" : same.error().message.c_str());
    QCOMPARE(static_cast<int>(same->tokens.size()), 300 - prompt);
    QCOMPARE(st.num_evicted, int64_t{0});
    for (const gb::TokenScore& t : same->tokens) {
      QCOMPARE(*t.kl, 0.0);
      QCOMPARE(t.logprob, *t.base_logprob);
    }
    auto small = gb::resolve_kv_policy(policy(kind, 40));
    QVERIFY(small.ok());
    auto cost = gb::score_tokens_with_kv_policy(*f.model, *backend, text, *small, prompt, {}, &st);
    QVERIFY2(cost.ok(), cost.ok() ? "" : cost.error().message.c_str());
    QVERIFY2(st.num_evicted > 0, name.c_str());
    QVERIFY2(cost->kl->mean > 1e-4, name.c_str());
    if (kind != KvPolicyKind::SnapKV) QVERIFY2(st.max_slots <= 40, (name + " held " + std::to_string(st.max_slots)).c_str());
    else QCOMPARE(st.num_evicted, int64_t{150 - 40});  // the prompt pruned once to its budget
  }
  QVERIFY(!gb::score_tokens_with_kv_policy(*f.model, *backend, text, KvPolicy{}, 1).ok());
}

}  // namespace test_kv_eviction_engine
