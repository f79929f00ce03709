#include "backend/cuda/cuda_gemm.h"

#include <library_types.h>

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "cuda/cuda_kernels.h"

namespace gb::cuda {
namespace {

// cuBLAS is column-major. Row-major W (out, in) is column-major (in, out) with
// ld = in, so op(A) = A^T is (out, in); row-major x (n, in) is column-major
// (in, n); the column-major result (out, n) with ld = ldy is row-major y (n, ldy).
Status gemm_typed(cublasHandle_t handle, const void* w, cudaDataType_t type, int64_t rows, int64_t cols, const void* x,
                  int32_t num_rows, float* y, int64_t ldy, float beta, cublasComputeType_t compute) {
  const float alpha = 1.0f;
  const auto m = static_cast<int>(rows), k = static_cast<int>(cols);
  GB_CUBLAS_TRY(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, num_rows, k, &alpha, w, type, k, x, type, k, &beta, y,
                             CUDA_R_32F, static_cast<int>(ldy), compute, CUBLAS_GEMM_DEFAULT));
  if (sync_each_kernel()) {  // the debug mode (cuda_check.h): cuBLAS's kernels checked like ours
    cudaStream_t stream = nullptr;
    GB_CUBLAS_TRY(cublasGetStream(handle, &stream));
    GB_TRY(check_kernel(cudaSuccess, "cublasGemmEx()", stream));
  }
  return {};
}

std::string type_name(WeightType t) { return std::string(kernels::weight_traits(t).name); }

}  // namespace

Status gemm_rows(cublasHandle_t handle, const DeviceMatrix& w, const void* x, int32_t num_rows, float* y, int64_t ldy,
                 float beta, bool allow_tf32) {
  if (num_rows <= 0) return {};
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  switch (w.dtype) {
    case WeightType::F32: break;
    case WeightType::F16: type = CUDA_R_16F; compute = CUBLAS_COMPUTE_32F; break;
    case WeightType::BF16: type = CUDA_R_16BF; compute = CUBLAS_COMPUTE_32F; break;
    default: return make_error("cuBLAS GEMM: weight type " + type_name(w.dtype) + " is not a float type");
  }
  return gemm_typed(handle, w.data, type, w.rows, w.cols, x, num_rows, y, ldy, beta, compute);
}

Status gemm_quant_rows(cublasHandle_t handle, const DeviceMatrix& w, const float* x, int32_t num_rows, float* y,
                       int64_t ldy, float beta, const QuantWorkspace& workspace, cudaStream_t stream,
                       bool allow_tf32) {
  if (num_rows <= 0) return {};
  if (!quant_kernels_support(w.dtype))
    return make_error("CUDA backend: no kernels for weight type " + type_name(w.dtype));
  if (num_rows <= kMaxGemvTokens) {
    GB_CUDA_KERNEL(stream, launch_quant_gemv(w.data, w.row_stride, w.dtype, w.rows, w.cols, x, num_rows, y, ldy, beta, stream));
    return {};
  }
  const int64_t tile_rows =
      std::min<int64_t>(w.rows, static_cast<int64_t>(workspace.floats) / std::max<int64_t>(w.cols, 1));
  if (workspace.data == nullptr || tile_rows <= 0)
    return make_error("CUDA backend: the dequantization workspace holds " + std::to_string(workspace.floats) +
                      " floats, a tile needs at least " + std::to_string(w.cols));
  const cublasComputeType_t compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  for (int64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
    const int64_t n = std::min(tile_rows, w.rows - r0);
    GB_CUDA_KERNEL(stream, launch_dequantize_rows(w.data, w.row_stride, w.dtype, r0, n, w.cols, workspace.data, stream));
    GB_TRY(gemm_typed(handle, workspace.data, CUDA_R_32F, n, w.cols, x, num_rows, y + r0, ldy, beta, compute));
  }
  return {};
}

}  // namespace gb::cuda
