// Float32 -> quantized blocks, one function per quantized weight type (the
// table's quantize_row). Written from the block layouts (quant_blocks.h), not
// from any other quantizer: each block or sub-block picks its scale (and min)
// by a small search that minimises the squared error of the row (no importance
// matrix), then K-type sub-block scales are themselves quantized to their 4-,
// 6- or 8-bit codes and the values re-rounded against the stored scales.
// MXFP4 is the exception: it follows the GGML reference quantizer's rule (no
// search), so its blocks are gguf-py's byte for byte.
// n is a whole number of blocks. Pure; any thread.
#pragma once

#include <cstdint>

namespace gb::kernels {

void quantize_row_q4_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_1(const float* src, void* dst, int64_t n);
void quantize_row_q5_0(const float* src, void* dst, int64_t n);
void quantize_row_q5_1(const float* src, void* dst, int64_t n);
void quantize_row_q8_0(const float* src, void* dst, int64_t n);
void quantize_row_q2_k(const float* src, void* dst, int64_t n);
void quantize_row_q3_k(const float* src, void* dst, int64_t n);
void quantize_row_q4_k(const float* src, void* dst, int64_t n);
void quantize_row_q5_k(const float* src, void* dst, int64_t n);
void quantize_row_q6_k(const float* src, void* dst, int64_t n);
void quantize_row_iq4_nl(const float* src, void* dst, int64_t n);
void quantize_row_iq4_xs(const float* src, void* dst, int64_t n);
// MXFP4: the exponent from the block's largest |x| and each value's nearest
// code, as ggml's reference quantizer (and gguf-py) chooses them (quantize.cpp).
void quantize_row_mxfp4(const float* src, void* dst, int64_t n);
// A CPU layout: the file type's quantization, repacked (repack.h).
void quantize_row_q4_k_r(const float* src, void* dst, int64_t n);
void quantize_row_q5_k_r(const float* src, void* dst, int64_t n);
void quantize_row_q6_k_r(const float* src, void* dst, int64_t n);
// Float types, so every row of the table has a quantize_row.
void quantize_row_f32(const float* src, void* dst, int64_t n);
void quantize_row_f16(const float* src, void* dst, int64_t n);
void quantize_row_bf16(const float* src, void* dst, int64_t n);

}  // namespace gb::kernels
