// A forward pass the backend fails (a device out of memory, a kernel fault) is
// an error for the requests of that step, never for the engine: they end with
// an ErrorEvent naming the reason and finish reason "error", their blocks go
// back, requests that were not in the failed step go on untouched, and later
// requests give the tokens a clean engine gives. The backend is the CPU one
// behind a wrapper that fails chosen forward calls.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "forwarding_backend.h"
#include "gb_test.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "stories_fixture.h"
#include "tokenizer/tokenizer.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_engine_backend_failure {

namespace {

// The CPU backend, except that forward calls numbered in `fail_calls` (0-based)
// fail the way a device does when it runs out of memory.
class FailingBackend final : public gbtest::ForwardingBackend {
 public:
  FailingBackend(std::unique_ptr<gb::Backend> inner, std::vector<int> fail_calls)
      : ForwardingBackend(std::move(inner)), fail_calls_(std::move(fail_calls)) {}

  gb::Status forward(const gb::BatchLayout& batch, std::span<float> logits) override {
    const int call = num_calls_++;
    if (std::find(fail_calls_.begin(), fail_calls_.end(), call) != fail_calls_.end())
      return gb::make_error("cannot allocate 1073741824 bytes of device memory for activations: out of memory");
    return ForwardingBackend::forward(batch, logits);
  }

  int num_calls() const { return num_calls_; }

 private:
  std::vector<int> fail_calls_;
  int num_calls_ = 0;
};

struct Outcome {
  std::vector<gb::TokenId> tokens;
  std::string finish_reason;
  std::vector<std::string> errors;  // this request's ErrorEvents
};

struct Run {
  std::map<uint64_t, Outcome> requests;
  std::vector<std::string> engine_errors;  // ErrorEvents without a request
};

void collect(const std::vector<gb::TraceEvent>& events, Run& run) {
  for (const gb::TraceEvent& e : events) {
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      run.requests[t->request.value].tokens.push_back(t->token);
    } else if (const auto* f = std::get_if<gb::RequestFinishedEvent>(&e.body)) {
      run.requests[f->request.value].finish_reason = f->reason;
    } else if (const auto* err = std::get_if<gb::ErrorEvent>(&e.body)) {
      if (err->request) run.requests[err->request->value].errors.push_back(err->message);
      else run.engine_errors.push_back(err->message);
    }
  }
}

gb::GenerationRequest greedy(std::vector<gb::TokenId> prompt, int max_tokens) {
  gb::GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

std::vector<gb::TokenId> prompt_of(int n, int salt) {
  std::vector<gb::TokenId> p{1};
  for (int i = 1; i < n; ++i) p.push_back(static_cast<gb::TokenId>(259 + (i * 37 + salt * 11) % 250));
  return p;
}

std::unique_ptr<gb::Engine> make_engine(const gbtest::StoriesFixture& f, std::vector<int> fail_calls,
                                        FailingBackend** backend, gb::EngineConfig config = {}) {
  config.check_invariants = true;
  config.num_blocks = 64;
  gb::CpuBackendOptions cpu;
  cpu.num_threads = 1;
  auto wrapped = std::make_unique<FailingBackend>(gb::make_cpu_backend(f.model, cpu), std::move(fail_calls));
  *backend = wrapped.get();
  auto engine = std::make_unique<gb::Engine>(f.model, f.tokenizer, std::move(wrapped), config);
  GB_CHECK(engine->start().ok());
  return engine;
}

// Steps until idle (at most `limit` steps), collecting every event; false if a
// step returned an error or the engine never went idle.
bool run_to_idle(gb::Engine& engine, Run& run, int limit = 400) {
  for (int i = 0; i < limit && engine.has_work(); ++i) {
    if (!engine.step()) return false;
    collect(engine.drain_events(), run);
  }
  collect(engine.drain_events(), run);
  return !engine.has_work();
}

std::vector<gb::TokenId> run_alone(const gbtest::StoriesFixture& f, const gb::GenerationRequest& r) {
  FailingBackend* backend = nullptr;
  auto engine = make_engine(f, {}, &backend);
  auto id = engine->submit(r);
  GB_CHECK(id.ok());
  Run run;
  GB_CHECK(run_to_idle(*engine, run));
  return run.requests[id->value].tokens;
}

void check_pool_whole(gb::Engine& engine) {
  const gb::Engine::KvUsage u = engine.kv_usage();
  QCOMPARE(u.num_running, 0);
  QCOMPARE(u.num_waiting, 0);
  QCOMPARE(u.num_owned, 0);
  QCOMPARE(u.num_owned + u.num_free + u.num_cached, u.num_blocks);
}

}  // namespace

GB_TEST(a_failed_step_fails_its_requests_and_the_engine_serves_the_next_ones) {
  REQUIRE_FIXTURE(f);
  FailingBackend* backend = nullptr;
  gb::EngineConfig config;
  config.max_retained = 0;
  auto engine = make_engine(f, {3}, &backend, config);
  const gb::GenerationRequest a = greedy(prompt_of(20, 1), 12), b = greedy(prompt_of(33, 2), 12);
  auto ia = engine->submit(a);
  auto ib = engine->submit(b);
  QVERIFY(ia.ok() && ib.ok());
  Run run;
  // Steps 0-2 run; the fourth forward call fails with both requests decoding.
  for (int i = 0; i < 3; ++i) {
    auto stepped = engine->step();
    QVERIFY(stepped.ok() && *stepped);
    collect(engine->drain_events(), run);
  }
  const size_t tokens_before = run.requests[ia->value].tokens.size();
  QVERIFY(tokens_before > 0);
  auto failed = engine->step();
  QVERIFY2(failed.ok(), "a failed forward pass must not be an engine error");
  QVERIFY(*failed);
  collect(engine->drain_events(), run);
  QCOMPARE(backend->num_calls(), 4);
  for (const gb::RequestId id : {*ia, *ib}) {
    const Outcome& o = run.requests[id.value];
    QCOMPARE(o.finish_reason, std::string("error"));
    QCOMPARE(o.errors.size(), size_t{1});
    QVERIFY2(o.errors[0].find("forward pass failed") != std::string::npos &&
                 o.errors[0].find("out of memory") != std::string::npos,
             o.errors[0].c_str());
    QVERIFY(!engine->is_live(id));
  }
  QCOMPARE(run.requests[ia->value].tokens.size(), tokens_before);  // nothing after the failure
  QVERIFY(run.engine_errors.empty());
  QVERIFY(!engine->has_work());
  check_pool_whole(*engine);

  // The same engine serves a new request as a clean engine does.
  auto ic = engine->submit(a);
  QVERIFY(ic.ok());
  QVERIFY(run_to_idle(*engine, run));
  QCOMPARE(run.requests[ic->value].finish_reason, std::string("max_tokens"));
  QVERIFY(run.requests[ic->value].tokens == run_alone(f, a));
  check_pool_whole(*engine);
}

GB_TEST(a_request_outside_the_failed_step_is_not_touched) {
  REQUIRE_FIXTURE(f);
  FailingBackend* backend = nullptr;
  gb::EngineConfig config;
  config.max_seqs = 1;  // one request per step: the second waits while the first runs
  config.max_retained = 0;
  auto engine = make_engine(f, {2}, &backend, config);
  const gb::GenerationRequest a = greedy(prompt_of(18, 3), 8), b = greedy(prompt_of(25, 4), 8);
  auto ia = engine->submit(a);
  auto ib = engine->submit(b);
  QVERIFY(ia.ok() && ib.ok());
  Run run;
  QVERIFY(run_to_idle(*engine, run));
  QCOMPARE(backend->num_calls(), 3 + 8);  // a: prefill, a decode, the failed step; then b: prefill and 7 decodes
  const Outcome& oa = run.requests[ia->value];
  const Outcome& ob = run.requests[ib->value];
  QCOMPARE(oa.finish_reason, std::string("error"));
  QCOMPARE(oa.errors.size(), size_t{1});
  QCOMPARE(ob.finish_reason, std::string("max_tokens"));
  QVERIFY(ob.errors.empty());
  QVERIFY(ob.tokens == run_alone(f, b));
  check_pool_whole(*engine);
}

GB_TEST(a_backend_that_fails_every_step_ends_every_request_and_goes_idle) {
  REQUIRE_FIXTURE(f);
  FailingBackend* backend = nullptr;
  std::vector<int> every(64);
  for (int i = 0; i < 64; ++i) every[static_cast<size_t>(i)] = i;
  gb::EngineConfig config;
  config.max_seqs = 2;
  auto engine = make_engine(f, every, &backend, config);
  std::vector<gb::RequestId> ids;
  for (int i = 0; i < 5; ++i) {
    auto id = engine->submit(greedy(prompt_of(10 + i, i), 4));
    QVERIFY(id.ok());
    ids.push_back(*id);
  }
  Run run;
  QVERIFY(run_to_idle(*engine, run, 50));
  for (const gb::RequestId id : ids) {
    QCOMPARE(run.requests[id.value].finish_reason, std::string("error"));
    QVERIFY(run.requests[id.value].tokens.empty());
    QCOMPARE(run.requests[id.value].errors.size(), size_t{1});
  }
  QCOMPARE(backend->num_calls(), 3);  // steps of two, two, one request
  check_pool_whole(*engine);
}

}  // namespace test_engine_backend_failure
