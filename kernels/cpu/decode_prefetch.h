// How far ahead of the weights it is reading a decode loop (one token: the
// weights streamed once, at the memory's pace) asks for them with software
// prefetch, in bytes, per weight type. Not a constant tuned on one machine: the
// best distance depends on the processor's prefetchers and memory (#44), so
// the CPU backend may measure it once per processor and cache the choice
// (backend/decode_tuning.h); these are the starting values and the setting.
//
// The distance never changes a result: the loops add in the same order
// whatever they prefetch (the kernels' bit-for-bit tests run every candidate).
// Any thread; a matmul reads the value once when it starts.
#pragma once

#include <cstdint>
#include <optional>

#include "cpu/weight_type.h"

namespace gb::kernels {

// The distances a measurement tries (bytes; 0 = no software prefetch).
inline constexpr int64_t kDecodePrefetchCandidates[] = {0, 4096, 8192, 16384, 32768, 65536, 131072};
inline constexpr int64_t kDecodePrefetchMax = 1 << 20;

// Where each type starts at the active kernel level (a table in
// decode_prefetch.cpp, measured on Zen 5): F32 0 (four rows side by side, the
// hardware prefetcher keeps up), F16 / BF16 16 KB at the AVX-512 levels (one
// row) and 64 KB at AVX2 (four rows), quantized types 16 KB.
int64_t default_decode_prefetch(WeightType t);

// The distance the loops use now: this thread's override if one is set (a
// measurement trying candidates), else the process-wide setting, else the
// default. The environment variable GLASSBOX_CPU_PREFETCH (bytes, every type)
// comes before the process-wide setting: a benchmark's fixed distance.
int64_t decode_prefetch(WeightType t);

// Whether the decode loop of type t at the active kernel level reads the
// distance: every float type and every quantized type with a SIMD kernel (not
// the scalar level).
bool decode_prefetch_applies(WeightType t);

// The distance GLASSBOX_CPU_PREFETCH fixes for every type, if it holds one (a
// whole number of bytes; anything else is ignored).
std::optional<int64_t> decode_prefetch_from_environment();

// Sets the process-wide distance of one type (clamped to [0, kDecodePrefetchMax]).
void set_decode_prefetch(WeightType t, int64_t bytes);
// Back to the default (or GLASSBOX_CPU_PREFETCH) for every type.
void reset_decode_prefetch();

// While alive, decode_prefetch(t) on this thread returns `bytes` for every type.
class ScopedDecodePrefetch {
 public:
  explicit ScopedDecodePrefetch(int64_t bytes);
  ~ScopedDecodePrefetch();
  ScopedDecodePrefetch(const ScopedDecodePrefetch&) = delete;
  ScopedDecodePrefetch& operator=(const ScopedDecodePrefetch&) = delete;

 private:
  int64_t previous_;
};

}  // namespace gb::kernels
