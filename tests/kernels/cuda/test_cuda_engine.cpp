// The CUDA backend through gb::Engine: every scenario of
// tests/support/engine_backend_scenarios.h (golden prompts batched with
// chunked prefill, forks, preemption, sliding windows, speculative decoding,
// top-32 token records) runs on the CPU backend (the reference) and on the
// CUDA backend, and the CUDA engine's greedy tokens must be the CPU's (a
// different token only at a genuine near-tie of the CPU's logits) with every
// per-token record's logits, probabilities and entropy within the tolerance
// below (tests/support/engine_backend_compare.h has the rules). Each scenario
// also checks, on both backends, that it exercised what it names.
//
// What the CUDA backend refuses is not run: mixture-of-experts models and KV
// eviction. Its pool keeps no window group (supports_window_group() is
// false), so the Gemma 3-style model keeps every block there while the CPU
// releases its sliding layers' window group, and the tokens must still agree.
// K/V are F16 on both (the engine's default; CudaBackend::kv_types() has it).
//
// Tolerances (absolute, on raw logits; first estimates, to tighten after
// device runs -- each scenario prints its largest differences):
//   stories260K (logits up to ~13) .............. 2e-3: F16 K/V rounded from
//       values that differ in their last bits, and other summation orders;
//   the synthetic sliding-window models (logits of standard deviation ~10,
//       up to ~30) ................................ 6e-2: test_cuda_backend's
//       F16 K/V bound, 2e-3 x the largest logit.
// Without a device every case is skipped (gb_test_setup, cuda_test_support.cpp).
#include <memory>
#include <utility>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "engine_backend_compare.h"
#include "engine_backend_scenarios.h"
#include "gb_test.h"
#include "model/model.h"
#include "runtime/make_backend.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_cuda_engine {

namespace {

constexpr float kStoriesLogitTolerance = 2e-3f;
constexpr float kSyntheticLogitTolerance = 6e-2f;

gbtest::BackendPair cpu_vs_cuda(float logit_tolerance) {
  gbtest::NamedBackend cpu{"cpu", [](std::shared_ptr<const gb::Model> model) {
                             gb::BackendOptions options;
                             options.device = gb::Device::Cpu;
                             return gb::make_backend(std::move(model), options);
                           }};
  gbtest::NamedBackend cuda{"cuda", [](std::shared_ptr<const gb::Model> model) -> gb::Result<std::unique_ptr<gb::Backend>> {
                              auto made = gb::make_cuda_backend(std::move(model));
                              if (!made) return made.error();
                              return std::unique_ptr<gb::Backend>(std::move(made).value());
                            }};
  return {std::move(cpu), std::move(cuda), logit_tolerance};
}

}  // namespace

GB_TEST(cuda_engine_golden_prompts_batched) { gbtest::check_golden_prompts_batched(cpu_vs_cuda(kStoriesLogitTolerance)); }
GB_TEST(cuda_engine_forks) { gbtest::check_forks(cpu_vs_cuda(kStoriesLogitTolerance)); }
GB_TEST(cuda_engine_preemption) { gbtest::check_preemption(cpu_vs_cuda(kStoriesLogitTolerance)); }
GB_TEST(cuda_engine_sliding_window) { gbtest::check_sliding_window(cpu_vs_cuda(kSyntheticLogitTolerance)); }
GB_TEST(cuda_engine_speculative) { gbtest::check_speculative(cpu_vs_cuda(kStoriesLogitTolerance)); }
GB_TEST(cuda_engine_token_records) { gbtest::check_token_records(cpu_vs_cuda(kStoriesLogitTolerance)); }

}  // namespace test_cuda_engine
