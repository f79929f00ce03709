// The weights as the CPU kernels read them: the model's tensor views, with every
// matrix whose type has a CPU layout (kernels/cpu/weight_type.h: cpu_layout,
// e.g. Q4_K -> Q4_K_R) repacked into owned memory at load, and the file pages
// behind a repacked matrix handed back to the kernel (they are read again from
// the file if anything touches them later). A repacked layout holds the same
// values and its kernels give the same bits, so results do not change; only
// speed does (docs/performance.md). On request (CpuBackendOptions::
// bf16_matmuls) the float matrices (F32, F16) are instead rounded to BF16 at
// load, so they run as bf16 dot products: faster, and no longer exact
// (docs/models.md, "bf16 matmuls").
//
// Held matrices live in one anonymous region advised into transparent huge
// pages (core/host_region.h), and with huge_pages (the default, where the
// kernel gives huge pages) every other matrix is copied there unchanged: a
// decode step streams every weight once, and with 4 KB file pages it crosses a
// page, misses the TLB and loses the hardware prefetchers' run every 4 KB
// (TinyLlama decode on one Zen 5 thread: F16 +9-17%, Q8_0 +8-18%, F32 +5-7%,
// Q4_K_M +1-6%; docs/performance.md). Copies are skipped when they would not fit
// in the memory available. A mixture's expert tensors are not among these
// matrices: they stay in the file. Private to engine/backend.
//
// Made once per model and shared by every CPU backend of it (a weak cache keyed
// by the model), so two backends of one model do not hold two copies.
// Immutable once made; any thread may read it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/decode_tuning.h"
#include "model/model.h"

namespace gb {

class ThreadPool;

struct CpuWeights {
  std::shared_ptr<const Model> model;  // keeps the mapping the other views point into
  ModelWeights weights;
  std::vector<std::shared_ptr<std::byte[]>> buffers;  // the held matrices (one region, each 64-byte aligned)
  size_t owned_bytes = 0;       // held in buffers (repacked, rounded to BF16 or copied)
  size_t released_bytes = 0;    // file bytes of the matrices those replace, handed back to the kernel
  int repacked_tensors = 0;     // matrices in a CPU layout
  int bf16_tensors = 0;         // float matrices rounded to BF16
  int copied_tensors = 0;       // matrices copied unchanged into huge pages
  bool huge_pages = false;      // every dense matrix a step reads is in buffers advised into huge pages
                                // (a mixture's expert tensors are read from the file in place)
  // The decode prefetch distance of each type these matrices hold, as this
  // process chose it (backend/decode_tuning.h: measured once per processor).
  std::vector<DecodePrefetchChoice> decode_prefetch;
};

struct CpuWeightsOptions {
  bool repack = true;           // types with a CPU layout into it (same bits)
  bool bf16_matmuls = false;    // F32 and F16 matrices rounded to BF16 (not the same bits)
  bool huge_pages = true;       // held matrices in transparent huge pages, the others copied there unchanged
};

// The CPU weights of `model` as `options` ask (shared with other backends of
// the same model and options), or the model's views as they are when nothing
// is asked; the environment's GLASSBOX_CPU_REPACK=0 turns repacking off.
// Rewriting splits the rows of each matrix over `pool`.
std::shared_ptr<const CpuWeights> cpu_weights(const std::shared_ptr<const Model>& model, const CpuWeightsOptions& options,
                                              ThreadPool& pool);

}  // namespace gb
