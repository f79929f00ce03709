// The backend's matrix products: y = x W^T (+ beta y) for a row-major weight W
// (rows = output features, cols = input features), as the model files store
// them, written into columns of a wider row-major y (leading dimension ldy), so
// the parts of a fused projection of mixed types land side by side.
//   - gemm_rows (cuBLAS): F32 weights multiply F32 activations with F32 compute
//     (no TF32 unless allowed); F16/BF16 weights are used as stored and multiply
//     activations cast to the same type, accumulating in F32 (CUBLAS_COMPUTE_32F).
//   - gemm_quant_rows: quantized weights stay GGUF blocks on the device. Up to
//     kMaxGemvTokens activation rows: the dequantize-on-the-fly GEMV kernel
//     (decode, small batches). More rows (prefill): tiles of weight rows are
//     dequantized to float32 into a bounded workspace and multiplied by cuBLAS,
//     one tile after another on the same stream.
// Thread: the caller owns the handle and its stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/result.h"
#include "model/dtype.h"

namespace gb::cuda {

struct DeviceMatrix {
  const void* data = nullptr;  // (rows, cols) row-major, `dtype` (quantized: GGUF blocks)
  WeightType dtype = WeightType::F32;
  int64_t rows = 0;        // output features
  int64_t cols = 0;        // input features
  int64_t row_stride = 0;  // bytes from one row to the next
};

// y (num_rows, ldy), columns [0, w.rows) = x (num_rows, w.cols) . w^T + beta * y,
// where x has w's dtype (F32/F16/BF16). beta = 1 fuses the residual add.
Status gemm_rows(cublasHandle_t handle, const DeviceMatrix& w, const void* x, int32_t num_rows, float* y, int64_t ldy,
                 float beta, bool allow_tf32);

// Device scratch for dequantized weight tiles: at least w.cols floats; a tile
// is floats / w.cols rows.
struct QuantWorkspace {
  float* data = nullptr;
  size_t floats = 0;
};

// As gemm_rows for a quantized w and float32 x. `handle` must run on `stream`.
Status gemm_quant_rows(cublasHandle_t handle, const DeviceMatrix& w, const float* x, int32_t num_rows, float* y,
                       int64_t ldy, float beta, const QuantWorkspace& workspace, cudaStream_t stream,
                       bool allow_tf32 = false);

}  // namespace gb::cuda
