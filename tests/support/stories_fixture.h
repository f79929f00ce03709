// stories260K loaded for engine-level tests (context 512, its own tokenizer),
// and engines built on it with invariant sweeps after every step. Shared by the
// runtime and speculative tests.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace gbtest {

struct StoriesFixture {
  std::shared_ptr<const gb::Model> model;
  std::shared_ptr<const gb::Tokenizer> tokenizer;
  std::string model_path;
  bool ok() const { return model && tokenizer; }
};

// Empty fixture (ok() false) when the shared file is missing or fails to load.
inline StoriesFixture load_stories() {
  StoriesFixture f;
  f.model_path = shared_file("models/stories260K/stories260K.bin");
  if (f.model_path.empty()) return f;
  gb::LoadOptions options;
  options.context_length = 512;
  auto model = gb::load_model(f.model_path, options);
  if (!model) return f;
  auto tok = gb::load_tokenizer(**model, "");
  if (!tok) return f;
  f.model = *model;
  f.tokenizer = *tok;
  return f;
}

// One-thread CPU engine (deterministic timing-free runs) with invariant sweeps.
inline std::unique_ptr<gb::Engine> make_test_engine(const StoriesFixture& f, gb::EngineConfig config = {}) {
  config.check_invariants = true;
  gb::CpuBackendOptions cpu;
  cpu.num_threads = 1;
  auto engine = std::make_unique<gb::Engine>(f.model, f.tokenizer, gb::make_cpu_backend(f.model, cpu), config);
  GB_CHECK(engine->start().ok());
  return engine;
}

}  // namespace gbtest

// Binds `f` to the loaded stories260K fixture, failing the test (never passing
// silently) when it cannot be loaded.
#define REQUIRE_FIXTURE(f)                                     \
  const ::gbtest::StoriesFixture f = ::gbtest::load_stories(); \
  if (!f.ok()) QFAIL("cannot load models/stories260K/stories260K.bin from the shared dir")
