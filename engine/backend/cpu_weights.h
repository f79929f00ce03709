// The weights as the CPU kernels read them: the model's tensor views, with every
// matrix whose type has a CPU layout (kernels/cpu/weight_type.h: cpu_layout,
// e.g. Q4_K -> Q4_K_R) repacked into owned memory at load, and the file pages
// behind a repacked matrix handed back to the kernel (they are read again from
// the file if anything touches them later). A repacked layout holds the same
// values and its kernels give the same bits, so results do not change; only
// speed does (docs/performance.md). Private to engine/backend.
//
// Made once per model and shared by every CPU backend of it (a weak cache keyed
// by the model), so two backends of one model do not hold two copies.
// Immutable once made; any thread may read it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "model/model.h"

namespace gb {

class ThreadPool;

struct CpuWeights {
  std::shared_ptr<const Model> model;  // keeps the mapping the other views point into
  ModelWeights weights;
  std::vector<std::shared_ptr<std::byte[]>> buffers;  // the repacked matrices, 64-byte aligned
  size_t repacked_bytes = 0;
  int repacked_tensors = 0;
};

// The CPU weights of `model`: repacked (shared with other backends of the same
// model) when `repack` and the environment does not say GLASSBOX_CPU_REPACK=0,
// else the model's views as they are. Repacking splits
// the rows of each matrix over `pool`.
std::shared_ptr<const CpuWeights> cpu_weights(const std::shared_ptr<const Model>& model, bool repack, ThreadPool& pool);

}  // namespace gb
