// DeviceWeights: a model's weights copied once into one device allocation (an
// arena), in the layout the CUDA forward pass wants:
//   - wq, wk, wv concatenated by rows into wqkv (q_dim + 2*kv_dim, dim), so the
//     three projections are one GEMM; likewise w_gate and w_up into
//     w_gate_up (2*hidden_dim, dim). Matrices keep their stored dtype: float
//     types as they are, quantized types as their GGUF blocks (never a
//     dequantized copy). When the fused tensors differ in type (a Q4_K_M file
//     with a Q6_K wv), the projection keeps one part per run of equal types,
//     each multiplied into its own columns of the output.
//     Phi-3's fused attn_qkv and ffn_up (gate rows, then up rows) are already in
//     that layout and are uploaded as they are.
//   - RMSNorm weights, q/k norms, post norms, q/k/v biases and the RoPE
//     frequency factors converted to float32 (tiny, read every token); the ones
//     an architecture lacks stay null.
//   - The classifier aliases the token embedding when the file ties them.
// Immutable after upload(); the owner's thread only.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/device_buffer.h"
#include "core/result.h"

namespace gb {
struct Model;
}

namespace gb::cuda {

// A projection y (n, rows) = x (n, cols) W^T whose rows are stored as up to
// three consecutive parts (each one dtype); part i fills the output columns
// after those of parts 0..i-1.
struct DeviceProjection {
  static constexpr int kMaxParts = 3;
  std::array<DeviceMatrix, kMaxParts> parts{};
  int32_t num_parts = 0;
  int64_t rows = 0;  // all parts' rows
  int64_t cols = 0;
};

struct DeviceLayer {
  const float* attn_norm = nullptr;  // (dim)
  const float* ffn_norm = nullptr;   // (dim)
  DeviceProjection wqkv;             // (q_dim + 2*kv_dim, dim): rows of wq, then wk, then wv
  DeviceProjection wo;               // (dim, q_dim)
  DeviceProjection w_gate_up;        // (2*hidden_dim, dim): rows of w_gate, then w_up
  DeviceProjection w_down;           // (dim, hidden_dim)
  // Optional (null when the architecture has none):
  const float* bq = nullptr;         // (q_dim)     Qwen2
  const float* bk = nullptr;         // (kv_dim)
  const float* bv = nullptr;         // (kv_dim)
  const float* q_norm = nullptr;     // (head_dim)  Qwen3, Gemma 3
  const float* k_norm = nullptr;     // (head_dim)
  const float* post_attn_norm = nullptr;  // (dim) Gemma 2/3
  const float* post_ffn_norm = nullptr;   // (dim)
};

// Ok when the CUDA backend has kernels for every weight tensor's type;
// otherwise an error naming the first tensor and its type.
Status check_weight_types(const Model& model);

class DeviceWeights {
 public:
  // Validates shapes against the config and copies everything to the device.
  Status upload(const Model& model);
  void release() { arena_.release(); layers_.clear(); }

  const DeviceMatrix& embedding() const { return embedding_; }       // (vocab_size, dim)
  const DeviceProjection& classifier() const { return classifier_; } // (vocab_size, dim)
  const float* output_norm() const { return output_norm_; }      // (dim)
  const float* rope_freqs() const { return rope_freqs_; }        // (rope_dim/2), or null
  const std::vector<DeviceLayer>& layers() const { return layers_; }
  size_t bytes() const { return arena_.bytes(); }

 private:
  DeviceBuffer arena_;
  DeviceMatrix embedding_;
  DeviceProjection classifier_;
  const float* output_norm_ = nullptr;
  const float* rope_freqs_ = nullptr;
  std::vector<DeviceLayer> layers_;
};

}  // namespace gb::cuda
