// One weight of a float type (F32, F16, BF16) as float32: the scalar read for
// the tail columns of the SIMD matmuls (matmul_avx2.cpp, matmul_avx512.cpp).
// Only those translation units include it, each compiled with F16C. The
// function sits in an anonymous namespace, so every includer keeps its own copy:
// the linker can never hand a caller on another CPU a copy compiled with
// another unit's instruction-set flags (the reason those files include no
// shared inline code otherwise).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/weight_type.h"

namespace gb::kernels {
namespace {

template <WeightType WT>
inline float load_elem(const void* w, int64_t i) {
  if constexpr (WT == WeightType::F32) {
    return static_cast<const float*>(w)[i];
  } else if constexpr (WT == WeightType::F16) {
    return _cvtsh_ss(static_cast<const uint16_t*>(w)[i]);
  } else {
    const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(w)[i]) << 16;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
  }
}

}  // namespace
}  // namespace gb::kernels
