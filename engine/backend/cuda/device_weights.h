// DeviceWeights: a model's weights copied once into one device allocation (an
// arena), in the layout the CUDA forward pass wants:
//   - wq, wk, wv concatenated by rows into wqkv (q_dim + 2*kv_dim, dim), so the
//     three projections are one GEMM; likewise w_gate and w_up into
//     w_gate_up (2*hidden_dim, dim). Matrices keep their stored dtype.
//   - RMSNorm weights converted to float32 (they are tiny and read every token).
//   - The classifier aliases the token embedding when the file ties them.
// Immutable after upload(); the owner's thread only.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/device_buffer.h"
#include "core/result.h"

namespace gb {
struct Model;
}

namespace gb::cuda {

struct DeviceLayer {
  const float* attn_norm = nullptr;  // (dim)
  const float* ffn_norm = nullptr;   // (dim)
  DeviceMatrix wqkv;                 // (q_dim + 2*kv_dim, dim): rows of wq, then wk, then wv
  DeviceMatrix wo;                   // (dim, q_dim)
  DeviceMatrix w_gate_up;            // (2*hidden_dim, dim): rows of w_gate, then w_up
  DeviceMatrix w_down;               // (dim, hidden_dim)
};

class DeviceWeights {
 public:
  // Validates shapes against the config and copies everything to the device.
  Status upload(const Model& model);
  void release() { arena_.release(); layers_.clear(); }

  const DeviceMatrix& embedding() const { return embedding_; }   // (vocab_size, dim)
  const DeviceMatrix& classifier() const { return classifier_; } // (vocab_size, dim)
  const float* output_norm() const { return output_norm_; }      // (dim)
  const std::vector<DeviceLayer>& layers() const { return layers_; }
  size_t bytes() const { return arena_.bytes(); }

 private:
  DeviceBuffer arena_;
  DeviceMatrix embedding_;
  DeviceMatrix classifier_;
  const float* output_norm_ = nullptr;
  std::vector<DeviceLayer> layers_;
};

}  // namespace gb::cuda
