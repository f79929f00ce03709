// How the CUDA backend fails and what it holds: the debug mode the tests run in
// (every kernel drained and checked as it finishes, a fault named by its
// kernel: backend/cuda/cuda_check.h), and work buffers sized when the engine
// starts, so that steps while serving allocate no device memory.
#include <cuda_runtime_api.h>

#include <string>
#include <variant>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "cuda_test_support.h"
#include "gb_test.h"
#include "runtime/engine.h"
#include "stories_fixture.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_cuda_errors {

GB_TEST(the_tests_run_the_kernel_debug_mode_and_it_names_the_kernel) {
  QVERIFY2(gb::cuda::sync_each_kernel(), "gb_test_setup sets GLASSBOX_CUDA_SYNC_EACH_KERNEL=1");
  QCOMPARE(gb::cuda::kernel_name("cuda::launch_rmsnorm(in.data, nullptr, n)"), std::string("rmsnorm"));
  QCOMPARE(gb::cuda::kernel_name("launch_quant_gemv(w.data, w.row_stride)"), std::string("quant_gemv"));
  QCOMPARE(gb::cuda::kernel_name("cublasGemmEx()"), std::string("cublasGemmEx"));
  const gb::Status refused = gb::cuda::check_kernel(cudaErrorInvalidConfiguration, "cuda::launch_rope(x, n)", nullptr);
  QVERIFY(!refused.ok());
  QVERIFY2(refused.error().message.find("CUDA kernel rope did not launch: cudaErrorInvalidConfiguration") !=
               std::string::npos,
           refused.error().message.c_str());
  // A launch that went well is drained and checked (the default stream here).
  QVERIFY(gb::cuda::check_kernel(cudaSuccess, "cuda::launch_add(a, b)", nullptr).ok());
}

GB_TEST(an_engine_reserves_the_work_at_start_and_its_steps_allocate_nothing) {
  REQUIRE_FIXTURE(f);
  auto made = gb::make_cuda_backend(f.model);
  QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());
  gb::CudaBackend* gpu = made->get();
  gb::EngineConfig config;
  config.check_invariants = true;
  config.max_batch_tokens = 256;
  config.max_seqs = 8;
  gb::Engine engine(f.model, f.tokenizer, std::move(made).value(), config);
  QVERIFY(engine.start().ok());
  QVERIFY(gpu->work_bytes_reserved() > 0);
  const size_t held = gpu->device_info().memory_used_bytes;
  // Prompts up to the step budget (chunked), eight at once, every logit row a
  // step can ask for within the limits.
  for (int i = 0; i < 12; ++i) {
    gb::GenerationRequest r;
    r.prompt_ids.assign(static_cast<size_t>(20 + 37 * i), 300 + i);
    r.prompt_ids[0] = 1;
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 16;
    r.sampling.top_n_record = 5;
    r.ignore_eos = true;
    QVERIFY(engine.submit(r).ok());
  }
  QVERIFY(engine.run_until_idle().ok());
  int finished = 0;
  for (const gb::TraceEvent& e : engine.drain_events()) {
    if (const auto* err = std::get_if<gb::ErrorEvent>(&e.body)) QFAIL(err->message.c_str());
    if (const auto* fin = std::get_if<gb::RequestFinishedEvent>(&e.body)) finished += fin->reason == "max_tokens";
  }
  QCOMPARE(finished, 12);
  QCOMPARE(gpu->device_info().memory_used_bytes, held);
}

}  // namespace test_cuda_errors
