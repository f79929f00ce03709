// Turns CUDA runtime and cuBLAS status codes into gb::Status values with a
// message naming the call and the error. Every CUDA and cuBLAS call in the
// backend goes through GB_CUDA_TRY / GB_CUBLAS_TRY (or check_cuda): a failing
// device never aborts the process, it fails the step or the load that hit it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "core/result.h"

namespace gb::cuda {

inline Status check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return make_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")");
}

inline Status check_cublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return make_error(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusName(s) + " (" +
                    cublasGetStatusString(s) + ")");
}

}  // namespace gb::cuda

#define GB_CUDA_TRY(call) GB_TRY(::gb::cuda::check_cuda((call), #call))
#define GB_CUBLAS_TRY(call) GB_TRY(::gb::cuda::check_cublas((call), #call))
