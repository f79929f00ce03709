// One query of a grouped attention call (paged_attention_group in
// paged_attention.h). A plain aggregate with no member functions, so the
// per-instruction-set kernel units may include it (see matmul_avx2.cpp).
#pragma once

#include <cstdint>

namespace gb::kernels {

struct AttentionQuery {
  const float* q;   // (head_dim), already rotated
  float* out;       // (head_dim)
  int32_t first;    // first position it sees (a sliding window's start, else 0)
  int32_t num_ctx;  // one past the last position it sees (its own position + 1)
};

}  // namespace gb::kernels
