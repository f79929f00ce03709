// Turns CUDA runtime and cuBLAS status codes into gb::Status values with a
// message naming the call and the error. Every CUDA and cuBLAS call in the
// backend goes through GB_CUDA_TRY / GB_CUBLAS_TRY / GB_CUDA_KERNEL (or check_cuda): a failing
// device never aborts the process, it fails the step or the load that hit it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <string_view>

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

// The kernel a launcher call names: "cuda::launch_rmsnorm(x, ...)" -> "rmsnorm".
inline std::string kernel_name(std::string_view call) {
  call = call.substr(0, call.find('('));
  if (const size_t colon = call.rfind(':'); colon != std::string_view::npos) call.remove_prefix(colon + 1);
  while (!call.empty() && (call.front() == ' ' || call.front() == '\n')) call.remove_prefix(1);
  if (call.substr(0, 7) == "launch_") call.remove_prefix(7);
  return std::string(call);
}

// The debug mode GLASSBOX_CUDA_SYNC_EACH_KERNEL=1 (the CUDA tests and the
// device check set it): every kernel's stream is drained and checked right
// after its launch, so a fault is reported by the kernel that caused it, not
// at the end of the step. Read once per process.
inline bool sync_each_kernel() {
  static const bool on = [] {
    const char* v = std::getenv("GLASSBOX_CUDA_SYNC_EACH_KERNEL");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return on;
}

// A launcher's status (the launch itself), then in the debug mode the kernel's
// completion, each naming the kernel.
inline Status check_kernel(cudaError_t launched, const char* call, cudaStream_t stream) {
  cudaError_t e = launched;
  if (e == cudaSuccess && sync_each_kernel()) {
    e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) e = cudaGetLastError();
  }
  if (e == cudaSuccess) return {};
  return make_error(std::string("CUDA kernel ") + kernel_name(call) + (launched != cudaSuccess ? " did not launch: " : " failed: ") +
                    cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

}  // namespace gb::cuda

#define GB_CUDA_TRY(call) GB_TRY(::gb::cuda::check_cuda((call), #call))
#define GB_CUBLAS_TRY(call) GB_TRY(::gb::cuda::check_cublas((call), #call))
// A kernel launch on `stream` (check_kernel): GB_CUDA_KERNEL(stream_, cuda::launch_add(...)).
#define GB_CUDA_KERNEL(stream, ...) GB_TRY(::gb::cuda::check_kernel((__VA_ARGS__), #__VA_ARGS__, (stream)))
