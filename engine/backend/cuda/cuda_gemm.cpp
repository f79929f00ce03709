#include "backend/cuda/cuda_gemm.h"

#include <library_types.h>

#include <string>

#include "backend/cuda/cuda_check.h"

namespace gb::cuda {

Status gemm_rows(cublasHandle_t handle, const DeviceMatrix& w, const void* x, int32_t num_rows, float* y, float beta,
                 bool allow_tf32) {
  if (num_rows <= 0) return {};
  // cuBLAS is column-major. Row-major W (out, in) is column-major (in, out) with
  // ld = in, so op(A) = A^T is (out, in); row-major x (n, in) is column-major
  // (in, n); the column-major result (out, n) is row-major y (n, out).
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  switch (w.dtype) {
    case DType::F32: break;
    case DType::F16: type = CUDA_R_16F; compute = CUBLAS_COMPUTE_32F; break;
    case DType::BF16: type = CUDA_R_16BF; compute = CUBLAS_COMPUTE_32F; break;
    default: return make_error("cuBLAS GEMM: weight type " + std::string(kernels::weight_traits(w.dtype).name) +
                               " is not a float type");
  }
  const float alpha = 1.0f;
  const auto m = static_cast<int>(w.rows), k = static_cast<int>(w.cols);
  GB_CUBLAS_TRY(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, num_rows, k, &alpha, w.data, type, k, x, type, k,
                             &beta, y, CUDA_R_32F, m, compute, CUBLAS_GEMM_DEFAULT));
  return {};
}

}  // namespace gb::cuda
