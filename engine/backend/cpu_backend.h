// The CPU reference backend's factory: the one header a caller includes when it
// needs the host backend itself, not "a backend for this model" (for that, go
// through runtime/make_backend.h, which applies the device policy). Those callers
// are the backend's own tests, the comparisons that hold another backend up
// against it (it is the oracle every other path must reproduce), and the draft
// model, which sits below runtime (see engine/speculative/draft_model.cpp).
//
// The class itself (CpuBackend) is private to engine/backend (cpu_backend_impl.h).
// Threads: any thread; the returned backend belongs to its one caller thread.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace gb {

struct Model;

struct CpuBackendOptions {
  int32_t num_threads = 0;  // 0: every available core
  // Repack matrices whose type has a CPU layout (Q4_K -> Q4_K_R) at load, once
  // per model: the same results, faster decode (backend/cpu_weights.h).
  bool repack_weights = true;
  // Round the F32 and F16 matrices to BF16 at load and run them as bf16 dot
  // products (VDPBF16PS where the processor has AVX512-BF16): prefill about
  // 1.4-1.7x faster than F16's float32 FMAs on Zen 5, F32 weights read in half
  // the bytes, at the cost of exactness: weights and activations keep 8
  // mantissa bits (docs/models.md, "bf16 matmuls"). Off by default.
  bool bf16_matmuls = false;
  // Hold every matrix in transparent huge pages where the kernel gives them
  // (copied unchanged when no layout or type asks for a copy anyway): the same
  // bits, decode reads faster (backend/cpu_weights.h). GLASSBOX_CPU_HUGE_PAGES=0
  // turns it off.
  bool huge_pages = true;
};

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model, const CpuBackendOptions& options = {});

}  // namespace gb
