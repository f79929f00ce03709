// Matrix products with weights of any type in the weight-type table
// (weight_type.h), addressed by rows with a stride in bytes:
//
//   W: (rows, cols) in traits.type; row r starts at w + r * row_stride_bytes
//   x: (num_tokens, cols) activations in the form traits.activation asks for:
//      float32 rows, bf16 rows (round_activations_bf16), or ActBlockQ8 rows of
//      cols / 32 blocks (quantize_activations), made once per matmul before the
//      rows are split across threads
//   y: (num_tokens, ldy) float32; rows [row_begin, row_end) of each token
//
// matmul_weights_reference runs the table's scalar vec_dot per (row, token): the
// oracle. matmul_weights runs the kernel level active_isa() chose (cpu_info.h):
// the SIMD kernel of the type at that level where one exists, else the reference.
// No threads of their own; any thread may call them on disjoint row ranges.
#pragma once

#include <cstdint>

#include "cpu/cpu_info.h"
#include "cpu/weight_type.h"

namespace gb::kernels {

struct MatmulInput {
  const float* f32 = nullptr;       // (num_tokens, cols) for ActivationType::F32 (F32, F16 weights)
  const ActBlockQ8* q8 = nullptr;   // (num_tokens, cols / 32) for ActivationType::Q8 (quantized types)
  const uint16_t* bf16 = nullptr;   // (num_tokens, cols) for ActivationType::BF16 (BF16 weights)
};

// Rounds rows [token_begin, token_end) of x (num_tokens, cols) to bfloat16, to
// nearest even (f32_to_bf16's bits), into out (num_tokens, cols).
void round_activations_bf16(const float* x, int64_t cols, int64_t token_begin, int64_t token_end, uint16_t* out);

// Quantizes rows [token_begin, token_end) of x (num_tokens, cols), cols a
// multiple of 32, to 8-bit blocks: d = max|x| / 127 per block of 32, q = round(x / d).
void quantize_activations(const float* x, int64_t cols, int64_t token_begin, int64_t token_end, ActBlockQ8* out);

void matmul_weights_reference(float* y, int64_t ldy, const MatmulInput& x, const void* w, int64_t row_stride_bytes,
                              const WeightTypeTraits& traits, int64_t num_tokens, int64_t cols, int64_t row_begin,
                              int64_t row_end);

void matmul_weights(float* y, int64_t ldy, const MatmulInput& x, const void* w, int64_t row_stride_bytes,
                    const WeightTypeTraits& traits, int64_t num_tokens, int64_t cols, int64_t row_begin,
                    int64_t row_end);

// matmul_weights with a given kernel level (the reference when this CPU lacks
// it): for tests and benchmarks that compare the levels.
void matmul_weights_with(Isa isa, float* y, int64_t ldy, const MatmulInput& x, const void* w,
                         int64_t row_stride_bytes, const WeightTypeTraits& traits, int64_t num_tokens, int64_t cols,
                         int64_t row_begin, int64_t row_end);

// True when matmul_weights has a SIMD kernel for type t on this CPU.
bool matmul_weights_has_simd(WeightType t);

}  // namespace gb::kernels
