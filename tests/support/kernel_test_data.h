// Random inputs for the kernel tests (header-only; link glassbox_kernels_cpu):
// normal floats, and blocks of a quantized weight type with random bytes whose
// f16 scales are replaced by finite values of either sign (the files hold
// negative scales too, and random bytes would give NaN/Inf scales), E8M0
// exponents (MXFP4) by scales of 2^-13 to 2^-3 (values up to 12 times that).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/convert.h"
#include "cpu/weight_type.h"

namespace gbtest {

inline std::vector<float> random_normals(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<uint8_t> random_quant_blocks(const gb::kernels::WeightTypeTraits& tr, int64_t rows, int64_t cols,
                                                uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t blocks = rows * cols / tr.block_elements;
  std::vector<uint8_t> w(static_cast<size_t>(blocks * tr.block_bytes));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::normal_distribution<float> scale(0.0f, 0.02f);
  for (int64_t b = 0; b < blocks; ++b)
    for (int16_t off : {tr.scale_offset, tr.min_offset}) {
      if (off < 0) continue;
      if (tr.scale_format == gb::kernels::ScaleFormat::E8M0) {
        w[static_cast<size_t>(b * tr.block_bytes + off)] = static_cast<uint8_t>(115 + rng() % 11);  // 2^(e - 128)
        continue;
      }
      const uint16_t h = gb::kernels::f32_to_f16(scale(rng));
      std::memcpy(w.data() + b * tr.block_bytes + off, &h, 2);
    }
  return w;
}

}  // namespace gbtest
