// CPU layouts: file types rewritten at load into a layout their CPU kernels
// read faster (weight_type.h: WeightTypeTraits::cpu_layout / repack_row). The
// values, and so every result, are the file type's bit for bit. Layouts in
// quant_blocks.h. Pure; any thread.
#pragma once

#include <cstdint>

namespace gb::kernels {

// n values (a whole number of 256-value blocks) of Q4_K into Q4_K_R.
void repack_row_q4_k_r(const void* src, void* dst, int64_t n);
// n values of Q5_K into Q5_K_R.
void repack_row_q5_k_r(const void* src, void* dst, int64_t n);
// n values of Q6_K into Q6_K_R.
void repack_row_q6_k_r(const void* src, void* dst, int64_t n);

}  // namespace gb::kernels
