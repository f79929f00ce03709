// The backend's one matrix product, through cuBLAS: y = x W^T (+ beta y) for a
// row-major weight W (rows = output features, cols = input features), as the
// model files store them. F32 weights multiply F32 activations with F32 compute
// (no TF32 unless allowed); F16/BF16 weights are used as stored and multiply
// activations cast to the same type, accumulating in F32 (CUBLAS_COMPUTE_32F).
// Thread: the caller owns the handle and its stream.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "core/result.h"
#include "model/dtype.h"

namespace gb::cuda {

struct DeviceMatrix {
  const void* data = nullptr;  // (rows, cols) row-major, `dtype`
  DType dtype = DType::F32;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features
};

// y (num_rows, w.rows) float = x (num_rows, w.cols) . w^T + beta * y, where x has
// w's dtype. beta = 1 fuses the residual add into the product.
Status gemm_rows(cublasHandle_t handle, const DeviceMatrix& w, const void* x, int32_t num_rows, float* y, float beta,
                 bool allow_tf32);

}  // namespace gb::cuda
