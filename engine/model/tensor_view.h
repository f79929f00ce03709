// TensorView: a non-owning view of one weight tensor inside a loaded (usually
// memory-mapped) model file. Matrices are row-major (rows = output features,
// cols = input features), so y = W x reads row r for output r; vectors have rows = 1.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/dtype.h"

namespace gb {

struct TensorView {
  std::string name;
  WeightType dtype = WeightType::F32;
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
  TensorView q_norm;     // (head_dim)   per-head RMSNorm of q (Qwen3, Gemma 3)
  TensorView k_norm;     // (head_dim)
  TensorView post_attn_norm;  // (dim)  Gemma 2/3: norm of the attention output
  TensorView post_ffn_norm;   // (dim)  Gemma 2/3: norm of the FFN output
  // Fused layouts (Phi-3): wqkv replaces wq/wk/wv, and w_up holds 2*hidden_dim
  // rows (gate, then up) with no w_gate.
  TensorView wqkv;       // (num_heads*head_dim + 2*num_kv_heads*head_dim, dim)
  // Mixture of experts (ModelConfig::is_moe; then w_gate, w_up, w_down are
  // absent). The GGUF 3-D expert tensors as matrices of the experts' rows one
  // after another, so expert e's gate is rows e*H .. (e+1)*H of gate_exps.
  TensorView router;     // (experts, dim)                 ffn_gate_inp
  TensorView gate_exps;  // (experts * expert_hidden, dim) ffn_gate_exps
  TensorView up_exps;    // (experts * expert_hidden, dim) ffn_up_exps
  TensorView down_exps;  // (experts * dim, expert_hidden) ffn_down_exps
  // gpt-oss (optional, F32): the output projection's bias, the heads' attention
  // sink logits, the router's bias and each expert's biases (one row per expert).
  TensorView bo;              // (dim)                   attn_output.bias
  TensorView sinks;           // (num_heads)             attn_sinks.weight
  TensorView router_bias;     // (experts)               ffn_gate_inp.bias
  TensorView gate_exps_bias;  // (experts, expert_hidden) ffn_gate_exps.bias
  TensorView up_exps_bias;    // (experts, expert_hidden) ffn_up_exps.bias
  TensorView down_exps_bias;  // (experts, dim)           ffn_down_exps.bias

  // Every tensor of the block, present or not, in a fixed order.
  std::array<const TensorView*, 27> all() const {
    return {&attn_norm, &wq, &wk, &wv, &wo, &ffn_norm, &w_gate, &w_down, &w_up, &bq, &bk, &bv,
            &q_norm, &k_norm, &post_attn_norm, &post_ffn_norm, &wqkv, &router, &gate_exps, &up_exps, &down_exps,
            &bo, &sinks, &router_bias, &gate_exps_bias, &up_exps_bias, &down_exps_bias};
  }
  // The tensors of which a token reads only its experts' share.
  bool is_expert_tensor(const TensorView* t) const {
    return t == &gate_exps || t == &up_exps || t == &down_exps || t == &gate_exps_bias || t == &up_exps_bias ||
           t == &down_exps_bias;
  }
};

}  // namespace gb
