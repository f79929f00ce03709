// CudaBackend: gb::Backend on one NVIDIA GPU. Weights are uploaded once
// (DeviceWeights; quantized ones stay quantized), the KV pool is plain device memory in the layout backend.h
// documents, and every step runs embedding -> layers -> final norm ->
// classifier on one CUDA stream with cuBLAS for the matrix products.
//
// This header is plain C++ (no CUDA headers) so the CLI and the engine can
// include it whether or not they are compiled by nvcc. Every failure of a CUDA
// or cuBLAS call comes back as a gb::Status / gb::Result with a message; the
// backend never aborts on a device error. Like every Backend, one thread (the
// engine thread) calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/ids.h"
#include "core/result.h"

namespace gb {

struct Model;

struct CudaBackendOptions {
  int32_t device_index = 0;
  // F32 weights only: let cuBLAS use TF32 tensor cores (faster, ~1e-3 relative
  // error). Off by default so F32 models match the CPU reference to ~1e-5.
  bool allow_tf32 = false;
};

// What the token inspector records for one logits row, computed on the device.
struct LogitSummary {
  std::vector<std::pair<TokenId, float>> top;  // (id, logit), descending; ties: lower id first
  float log_normalizer = 0.0f;                 // log sum_i exp(logit_i)
  float entropy = 0.0f;                        // -sum p log p of softmax(logits), nats
};

class CudaBackend : public Backend {
 public:
  // forward() that also summarises each logits row on the device: summaries
  // receives num_logits entries with top_n (<= 256) candidates each. `logits`
  // may be empty, in which case the vocabulary rows never leave the device.
  virtual Status forward_inspect(const BatchLayout& batch, int32_t top_n, std::span<LogitSummary> summaries,
                                 std::span<float> logits) = 0;
};

// True when the CUDA runtime finds at least one usable device; otherwise false
// with the reason in *why (driver missing, no device, ...). Never aborts.
bool cuda_device_available(std::string* why = nullptr);

// Ok when the CUDA backend has kernels for every weight type of the model (F32,
// F16, BF16 and the quantized types of kernels/cuda/quant_matmul.cu); otherwise
// an error naming the first tensor it cannot run and its type. Needs no device.
Status cuda_weights_supported(const Model& model);

// Uploads the model's weights to the device (quantized tensors as their GGUF
// blocks). Fails with a message when there is no device, memory runs out, or
// the model has a shape or weight type this backend does not support
// (head_dim > 256, see cuda_weights_supported).
Result<std::unique_ptr<CudaBackend>> make_cuda_backend(std::shared_ptr<const Model> model,
                                                       const CudaBackendOptions& options = {});

}  // namespace gb
