// TensorView: a non-owning view of one weight tensor inside a loaded (usually
// memory-mapped) model file. Matrices are row-major (rows = output features,
// cols = input features), so y = W x reads row r for output r; vectors have rows = 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/dtype.h"

namespace gb {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;  // output features (1 for a vector)
  int64_t cols = 0;  // input features (length for a vector)

  int64_t num_elements() const { return rows * cols; }
  size_t num_bytes() const { return *dtype_bytes(dtype, static_cast<uint64_t>(num_elements())); }
  size_t row_bytes() const { return *dtype_bytes(dtype, static_cast<uint64_t>(cols)); }
  const std::byte* row(int64_t r) const {
    return static_cast<const std::byte*>(data) + static_cast<size_t>(r) * row_bytes();
  }
};

// The weights of one transformer block.
struct LayerWeights {
  TensorView attn_norm;  // (dim)
  TensorView wq;         // (num_heads*head_dim, dim)
  TensorView wk;         // (num_kv_heads*head_dim, dim)
  TensorView wv;         // (num_kv_heads*head_dim, dim)
  TensorView wo;         // (dim, num_heads*head_dim)
  TensorView ffn_norm;   // (dim)
  TensorView w_gate;     // (hidden_dim, dim)   llama2.c w1
  TensorView w_down;     // (dim, hidden_dim)   llama2.c w2
  TensorView w_up;       // (hidden_dim, dim)   llama2.c w3
  // Optional (data == nullptr when the architecture has none), always F32:
  TensorView bq;         // (num_heads*head_dim)     Qwen2 q bias
  TensorView bk;         // (num_kv_heads*head_dim)
  TensorView bv;         // (num_kv_heads*head_dim)
};

}  // namespace gb
