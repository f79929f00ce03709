// The engine-level backend comparison (tests/support/engine_backend_compare.h)
// on the CPU: every scenario of engine_backend_scenarios.h runs through an
// Engine on the CPU backend with one thread and with two, which must agree
// bit for bit (tolerance 0: the threads split rows and heads, never a sum).
// This proves the harness and the scenarios without a GPU; the CUDA instance
// (tests/kernels/cuda/test_cuda_engine.cpp) holds the CUDA backend to the
// same scenarios. The comparison itself is tested on hand-made runs (each
// rule fails when it should, near-ties pass with a note) and on two engines
// that really differ (bf16 matmuls against float32). The sliding-window
// scenarios also run against a CPU backend that, like the CUDA one, keeps no
// window group.
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "engine_backend_compare.h"
#include "forwarding_backend.h"
#include "engine_backend_scenarios.h"
#include "gb_test.h"
#include "runtime/engine.h"
#include "runtime/make_backend.h"
#include "stories_fixture.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_engine_backend_compare {

namespace {

gbtest::NamedBackend cpu_backend(std::string name, int32_t num_threads, bool bf16_matmuls = false) {
  gb::BackendOptions options;
  options.device = gb::Device::Cpu;
  options.num_threads = num_threads;
  options.bf16_matmuls = bf16_matmuls;
  return {std::move(name), [options](std::shared_ptr<const gb::Model> model) { return gb::make_backend(std::move(model), options); }};
}

gbtest::BackendPair threads_pair() {
  return {cpu_backend("cpu, 1 thread", 1), cpu_backend("cpu, 2 threads", 2), 0.0f};
}

// The CPU backend as the CUDA backend presents itself to the engine: no
// window group (every layer in one table), no capture, no KV eviction.
class WithoutWindowGroup final : public gbtest::ForwardingBackend {
 public:
  explicit WithoutWindowGroup(std::unique_ptr<gb::Backend> inner) : ForwardingBackend(std::move(inner)) {}
  bool supports_window_group() const override { return false; }
  gb::Status forward_capture(const gb::BatchLayout&, std::span<float>, gb::CaptureRows&) override {
    return gb::make_error("no capture");
  }
  gb::Status epilogue_rows(std::span<const float>, int32_t, std::span<float>) override {
    return gb::make_error("no epilogue rows");
  }
  bool supports_kv_eviction() const override { return false; }
};

gbtest::NamedBackend cpu_without_window_group() {
  return {"cpu without a window group", [](std::shared_ptr<const gb::Model> model) -> gb::Result<std::unique_ptr<gb::Backend>> {
            return std::unique_ptr<gb::Backend>(std::make_unique<WithoutWindowGroup>(gb::make_cpu_backend(std::move(model), {1})));
          }};
}

// A record of `n` candidates with logits first, first - step, ... (ids 10, 11, ...).
gb::TokenRecord make_record(float first, float step, int n = 4) {
  gb::TokenRecord r;
  for (int i = 0; i < n; ++i) {
    gb::CandidateRecord c;
    c.id = 10 + i;
    c.logit = first - step * static_cast<float>(i);
    c.prob_before = 0.5f / static_cast<float>(i + 1);
    r.top.push_back(c);
  }
  r.num_candidates_before = 512;
  r.chosen = r.top[0].id;
  r.chosen_logit = r.top[0].logit;
  r.chosen_prob_before = r.top[0].prob_before;
  r.entropy_before = 2.0f;
  return r;
}

// Two requests of three tokens each, the second a fork of the first's tokens.
gbtest::EngineRun make_run(const std::string& backend) {
  gbtest::EngineRun run;
  run.backend = backend;
  for (uint64_t id : {1, 2}) {
    gbtest::RequestOutput& o = run.requests[id];
    o.prompt = {1, 300, 301};
    if (id == 2) o.prompt = {1, 300, 301, 10, 10};
    for (int i = 0; i < 3; ++i) {
      o.tokens.push_back(10);
      o.records.push_back(make_record(5.0f, 0.5f));
      o.origins.push_back(gb::TokenOrigin::Plain);
    }
    o.finish_reason = "max_tokens";
  }
  return run;
}

constexpr float kTol = 2e-3f;

}  // namespace

GB_TEST(golden_prompts_batched_one_thread_equals_two) { gbtest::check_golden_prompts_batched(threads_pair()); }
GB_TEST(forks_one_thread_equals_two) { gbtest::check_forks(threads_pair()); }
GB_TEST(preemption_one_thread_equals_two) { gbtest::check_preemption(threads_pair()); }
GB_TEST(sliding_window_one_thread_equals_two) { gbtest::check_sliding_window(threads_pair()); }
GB_TEST(speculative_one_thread_equals_two) { gbtest::check_speculative(threads_pair()); }
GB_TEST(token_records_one_thread_equals_two) { gbtest::check_token_records(threads_pair()); }

// What the CUDA instance does with the Gemma 3-style model: the reference
// releases its sliding layers' window group, the candidate keeps every block
// in one table. Bit for bit: the same arithmetic, only where the sliding
// layers' K/V live differs.
GB_TEST(sliding_window_without_a_window_group_equals_with_one) {
  gbtest::check_sliding_window({cpu_backend("cpu", 1), cpu_without_window_group(), 0.0f});
}

GB_TEST(compare_accepts_equal_runs_and_differences_within_the_tolerance) {
  const gbtest::EngineRun ref = make_run("ref");
  gbtest::EngineRun got = make_run("got");
  QVERIFY(gbtest::compare_runs(ref, got, 0.0f).failures.empty());
  got.requests[1].records[1].top[2].logit += kTol * 0.9f;
  got.requests[2].records[0].entropy_before += kTol;  // within tolerance x log(512)
  const gbtest::CompareReport rep = gbtest::compare_runs(ref, got, kTol);
  QVERIFY2(rep.failures.empty(), rep.failures.empty() ? "" : rep.failures.front().c_str());
  QCOMPARE(rep.num_tokens_compared, int64_t{6});
  QVERIFY(!gbtest::compare_runs(ref, got, 0.0f).failures.empty());  // exact asks for bit equality
}

GB_TEST(compare_fails_on_a_logit_probability_or_entropy_beyond_the_tolerance) {
  const gbtest::EngineRun ref = make_run("ref");
  const auto fails = [&](const std::function<void(gb::TokenRecord&)>& perturb, const char* expected) {
    gbtest::EngineRun got = make_run("got");
    perturb(got.requests[2].records[1]);
    const gbtest::CompareReport rep = gbtest::compare_runs(ref, got, kTol);
    return rep.failures.size() == 1 && rep.failures[0].find("request 2, token 1") != std::string::npos &&
           rep.failures[0].find(expected) != std::string::npos;
  };
  QVERIFY(fails([](gb::TokenRecord& r) { r.top[1].logit += 3 * kTol; }, "candidate 11: logit"));
  QVERIFY(fails([](gb::TokenRecord& r) { r.chosen_logit -= 3 * kTol; }, "chosen logit"));
  QVERIFY(fails([](gb::TokenRecord& r) { r.top[3].prob_before *= 1.1f; }, "candidate 13: probability"));
  QVERIFY(fails([](gb::TokenRecord& r) { r.chosen_prob_before *= 0.99f; }, "chosen log-probability"));
  QVERIFY(fails([](gb::TokenRecord& r) { r.entropy_before += 0.1f; }, "entropy"));
  QVERIFY(fails([](gb::TokenRecord& r) { r.top.pop_back(); }, "records hold 4 vs 3"));
}

// An id may leave the top-N only across its boundary (the last logits within
// the tolerance); one that is far above the other list's last is a failure.
GB_TEST(compare_allows_top_n_swaps_only_at_the_boundary) {
  const gbtest::EngineRun ref = make_run("ref");
  gbtest::EngineRun got = make_run("got");
  got.requests[1].records[0].top[3].id = 99;  // the reference's last (3.5) swapped for a neighbour
  got.requests[1].records[0].top[3].logit = 3.5f + kTol * 0.5f;
  QVERIFY(gbtest::compare_runs(ref, got, kTol).failures.empty());
  got.requests[1].records[0].top[3].logit = 3.5f + kTol * 3;
  QCOMPARE(gbtest::compare_runs(ref, got, kTol).failures.size(), size_t{1});
  gbtest::EngineRun inner = make_run("got");
  inner.requests[1].records[0].top[1].id = 98;  // a candidate in the middle of the list replaced
  QCOMPARE(gbtest::compare_runs(ref, inner, kTol).failures.size(), size_t{1});
}

// A different token is accepted only where the reference's top-1/top-2 gap
// is within the tolerance; the rest of that request, and a request whose
// prompt was built from it, are then not compared.
GB_TEST(compare_accepts_a_different_token_only_at_a_near_tie) {
  gbtest::EngineRun ref = make_run("ref");
  ref.requests[1].records[1] = make_record(5.0f, kTol * 0.5f);  // top-1/top-2 gap 1e-3
  gbtest::EngineRun got = ref;
  got.backend = "got";
  got.requests[1].tokens[1] = 11;
  got.requests[1].tokens[2] = 42;
  got.requests[2].prompt.back() = 11;
  const gbtest::CompareReport tie = gbtest::compare_runs(ref, got, kTol);
  QVERIFY2(tie.failures.empty(), tie.failures.empty() ? "" : tie.failures.front().c_str());
  QCOMPARE(tie.near_ties.size(), size_t{2});
  QVERIFY(tie.near_ties[0].find("request 1, token 1: ref chose 10, got chose 11") != std::string::npos);
  for (const std::string& note : tie.near_ties) std::printf("near-tie note: %s\n", note.c_str());
  // The same token change where the gap is 0.5: a failure naming it all.
  gbtest::EngineRun clear = make_run("got");
  clear.requests[1].tokens[1] = 11;
  const gbtest::CompareReport rep = gbtest::compare_runs(make_run("ref"), clear, kTol);
  QCOMPARE(rep.failures.size(), size_t{1});
  QVERIFY2(rep.failures[0] == "request 1, token 1: ref chose 10, got chose 11; the reference's top-1/top-2 gap is 0.5 "
                              "(tolerance 0.002)",
           rep.failures[0].c_str());
  // Without an earlier near-tie a prompt that differs is a failure.
  gbtest::EngineRun prompt = make_run("got");
  prompt.requests[2].prompt.back() = 11;
  QCOMPARE(gbtest::compare_runs(make_run("ref"), prompt, kTol).failures.size(), size_t{1});
}

GB_TEST(compare_fails_on_lengths_finish_reasons_missing_requests_and_errors) {
  const gbtest::EngineRun ref = make_run("ref");
  gbtest::EngineRun shorter = make_run("got");
  shorter.requests[2].tokens.pop_back();
  shorter.requests[2].records.pop_back();
  QCOMPARE(gbtest::compare_runs(ref, shorter, kTol).failures.size(), size_t{1});
  gbtest::EngineRun reason = make_run("got");
  reason.requests[1].finish_reason = "stop";
  QCOMPARE(gbtest::compare_runs(ref, reason, kTol).failures.size(), size_t{1});
  gbtest::EngineRun missing = make_run("got");
  missing.requests.erase(2);
  QCOMPARE(gbtest::compare_runs(ref, missing, kTol).failures.size(), size_t{2});  // the count, and which
  gbtest::EngineRun failed = make_run("got");
  failed.error = "start: out of memory";
  QCOMPARE(gbtest::compare_runs(ref, failed, kTol).failures.size(), size_t{1});
}

// Two engines that really differ: float32 matrices against bf16 dot products
// (logits move by ~1e-2) must not pass a 1e-5 comparison, and the counts show
// what ran.
GB_TEST(compare_catches_engines_that_differ) {
  REQUIRE_FIXTURE(f);
  gbtest::Scenario s;
  s.name = "bf16 against f32";
  s.model = f.model;
  s.tokenizer = f.tokenizer;
  s.config.num_blocks = 32;
  s.drive = [](gb::Engine& engine) -> gb::Status {
    GB_TRY(engine.submit(gbtest::greedy_request({1, 400, 300, 500}, 30)));
    return engine.run_until_idle();
  };
  const gbtest::EngineRun ref = gbtest::run_scenario(s, cpu_backend("cpu f32", 1));
  const gbtest::EngineRun bf16 = gbtest::run_scenario(s, cpu_backend("cpu bf16", 1, true));
  QVERIFY2(ref.error.empty() && bf16.error.empty(), (ref.error + bf16.error).c_str());
  QCOMPARE(ref.counts.tokens, int64_t{30});
  QCOMPARE(ref.counts.records, int64_t{30});
  const gbtest::CompareReport rep = gbtest::compare_runs(ref, bf16, 1e-5f);
  QVERIFY(!rep.failures.empty());
  std::printf("f32 vs bf16 at 1e-5: %s\n", rep.failures.front().c_str());
  QVERIFY(gbtest::compare_runs(ref, gbtest::run_scenario(s, cpu_backend("cpu f32 again", 2)), 0.0f).failures.empty());
}

}  // namespace test_engine_backend_compare
