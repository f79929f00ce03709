// Scalar reference dequantization: one function per weight type, turning n
// values (a whole number of blocks, layouts in quant_blocks.h) into float32.
// These are the oracle every other path is checked against; they are bit-exact
// with gguf-py / ggml (tests/kernels/cpu/test_dequantize.cpp). Pure; any thread.
#pragma once

#include <cstdint>

namespace gb::kernels {

void dequantize_row_f32(const void* src, float* dst, int64_t n);
void dequantize_row_f16(const void* src, float* dst, int64_t n);
void dequantize_row_bf16(const void* src, float* dst, int64_t n);
void dequantize_row_q4_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_1(const void* src, float* dst, int64_t n);
void dequantize_row_q5_0(const void* src, float* dst, int64_t n);
void dequantize_row_q5_1(const void* src, float* dst, int64_t n);
void dequantize_row_q8_0(const void* src, float* dst, int64_t n);
void dequantize_row_q2_k(const void* src, float* dst, int64_t n);
void dequantize_row_q3_k(const void* src, float* dst, int64_t n);
void dequantize_row_q4_k(const void* src, float* dst, int64_t n);
void dequantize_row_q5_k(const void* src, float* dst, int64_t n);
void dequantize_row_q6_k(const void* src, float* dst, int64_t n);
void dequantize_row_iq4_nl(const void* src, float* dst, int64_t n);
void dequantize_row_iq4_xs(const void* src, float* dst, int64_t n);
void dequantize_row_mxfp4(const void* src, float* dst, int64_t n);
void dequantize_row_q4_k_r(const void* src, float* dst, int64_t n);  // CPU layout (repack.h)
void dequantize_row_q5_k_r(const void* src, float* dst, int64_t n);  // CPU layout (repack.h)
void dequantize_row_q6_k_r(const void* src, float* dst, int64_t n);  // CPU layout (repack.h)

}  // namespace gb::kernels
