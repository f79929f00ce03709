// Matrix products y = W x for the forward pass, on a row range so the caller can
// split rows across threads (the kernels never start threads themselves).
//
//   W: (rows, cols) row-major in `wtype` (rows = output features), row stride = cols;
//      a float type (F32, F16, BF16): quantized types go through matmul_quant.h
//   x: (num_tokens, cols) float32, row-major
//   y: (num_tokens, ldy) float32; rows [row_begin, row_end) of each token's output
//      are written at y[t * ldy + r]
//
// matmul_reference is the scalar oracle (float32 accumulation in index order).
// matmul runs the kernel level active_isa() chose at run time (cpu_info.h):
// AVX-512, AVX2/FMA or the reference. The SIMD results differ from the reference
// only by summation order, and within one level a token's result does not
// depend on the other tokens of the call (decode alone == the same token in a
// prefill batch, bit for bit).
#pragma once

#include <cstdint>

#include "cpu/cpu_info.h"
#include "cpu/weight_type.h"

namespace gb::kernels {

void matmul_reference(float* y, int64_t ldy, const float* x, const void* w, WeightType wtype,
                      int64_t num_tokens, int64_t cols, int64_t row_begin, int64_t row_end);

void matmul(float* y, int64_t ldy, const float* x, const void* w, WeightType wtype, int64_t num_tokens,
            int64_t cols, int64_t row_begin, int64_t row_end);

// matmul with a given level (the reference when this CPU lacks it): for tests
// and benchmarks that compare the levels.
void matmul_with(Isa isa, float* y, int64_t ldy, const float* x, const void* w, WeightType wtype, int64_t num_tokens,
                 int64_t cols, int64_t row_begin, int64_t row_end);

// Sums n floats (n a multiple of 32): a streaming read for bandwidth measurement,
// at the widest level this processor runs (AVX-512 where it has it).
float read_sum(const float* p, int64_t n);

// FMA peak of the active level in GFLOP/s (float32, the lane width the level's
// matmul uses), measured by a short probe of independent FMA chains (about
// 0.1 s) running on `threads` threads at once (the total over all of them); 0
// for the scalar level. For benchmarks: the fraction of peak a matmul reaches.
double fma_peak_gflops(int threads = 1);

// Peak of the bf16 dot product (VDPBF16PS, two flops per product) in GFLOP/s
// on `threads` threads at once where the active level has it (Avx512Bf16),
// else 0: the denominator for BF16-weight prefill.
double bf16_dot_peak_gflops(int threads = 1);

// True when matmul() uses a SIMD level (AVX2 or better) on this machine.
bool matmul_has_simd();

}  // namespace gb::kernels
