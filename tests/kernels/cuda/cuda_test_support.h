// Helpers for the CUDA tests: device arrays that upload/download host vectors,
// seeded random inputs, error measures, and a reference-vs-candidate compare
// that reports the worst element. The test binary's gb_test_setup() (in
// cuda_test_support.cpp) skips every case with exit code 77 when no device is
// present, so CTest reports these tests as skipped on CPU-only machines.
// Single-threaded test code.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "cpu/weight_type.h"

namespace gbtest::cuda {

// The quantized file types the CUDA backend has no kernels for: it refuses a
// model holding one (cuda::check_weight_types; --device auto runs it on the
// CPU). The tests expect exactly these to be unsupported and every other
// quantized file type to run.
inline bool lacks_cuda_kernels(gb::kernels::WeightType t) { return t == gb::kernels::WeightType::MXFP4; }

// Every byte of a new DeviceArray: a float reads as NaN, an F16/BF16 value as
// NaN, an int32 as -1. A kernel that reads an element nobody wrote makes NaN
// (or an out-of-range id) that the comparison catches, where zeros would pass.
inline constexpr int kPoisonByte = 0xFF;

// Owns a cudaMalloc'd array of T filled with kPoisonByte; aborts the test
// binary (with the CUDA message) if the device refuses, which only a broken
// machine does for these sizes.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    const cudaError_t e = cudaMalloc(&ptr_, std::max<size_t>(n, 1) * sizeof(T));
    GB_CHECK_MSG(e == cudaSuccess, cudaGetErrorString(e));
    GB_CHECK(cudaMemset(ptr_, kPoisonByte, std::max<size_t>(n, 1) * sizeof(T)) == cudaSuccess);
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void upload(const std::vector<T>& host) {
    GB_CHECK(host.size() <= n_);
    const cudaError_t e = cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    GB_CHECK_MSG(e == cudaSuccess, cudaGetErrorString(e));
  }
  // Waits for the device, then copies the whole array back.
  std::vector<T> download() const {
    std::vector<T> host(n_);
    const cudaError_t e = cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    GB_CHECK_MSG(e == cudaSuccess, cudaGetErrorString(e));
    return host;
  }
  T* get() const { return static_cast<T*>(ptr_); }
  size_t size() const { return n_; }

 private:
  void* ptr_ = nullptr;
  size_t n_ = 0;
};

// n floats uniform in [lo, hi) from a fixed seed.
std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// Worst absolute difference, and where it happened; sizes must match.
struct Diff {
  double max_abs = 0.0;
  size_t where = 0;
  double ref_at = 0.0, got_at = 0.0;
  std::string describe() const;
};
Diff compare(const std::vector<float>& reference, const std::vector<float>& got);

// Waits for the device and returns "" or the pending CUDA error's text.
std::string device_error();

// "EXPR: the error's text", for GB_CUDA_OK. Out of line: GCC 12 inlines a
// string concatenation in every test function and then warns about it
// (-Warray-bounds, a known false positive), which -Werror turns into an error.
std::string cuda_failure(const char* expr, cudaError_t error);

}  // namespace gbtest::cuda

// Fails the test when a CUDA call (or launcher) returned an error.
#define GB_CUDA_OK(expr)                                                                             \
  do {                                                                                               \
    const cudaError_t gb_cuda_ok_e_ = (expr);                                                        \
    QVERIFY2(gb_cuda_ok_e_ == cudaSuccess, gbtest::cuda::cuda_failure(#expr, gb_cuda_ok_e_).c_str()); \
  } while (0)
