// DeviceBuffer: one plain cudaMalloc allocation (never managed memory) owned
// RAII-style; PinnedHostBuffer: page-locked host staging memory for async copies.
// Both are move-only and free their memory in the destructor, so a backend that
// is destroyed returns every byte it took (the leak test checks cudaMemGetInfo).
// Thread: whoever owns the object.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/result.h"

namespace gb::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  // Frees any previous allocation and allocates `bytes` (contents undefined).
  Status allocate(size_t bytes, const char* what) {
    release();
    if (bytes == 0) return {};
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e != cudaSuccess) {
      ptr_ = nullptr;
      return make_error(std::string("cannot allocate ") + std::to_string(bytes) + " bytes of device memory for " +
                        what + ": " + cudaGetErrorString(e));
    }
    bytes_ = bytes;
    return {};
  }
  // Ensures at least `bytes`; contents are lost when it grows. Rounds up to 1 MiB
  // so small per-step growth does not reallocate every step.
  Status reserve(size_t bytes, const char* what) {
    if (bytes <= bytes_) return {};
    constexpr size_t kGranule = size_t{1} << 20;
    return allocate((bytes + kGranule - 1) / kGranule * kGranule, what);
  }
  void release() {
    if (ptr_) cudaFree(ptr_);  // cannot fail for a valid pointer; nothing to report in a destructor
    ptr_ = nullptr;
    bytes_ = 0;
  }

  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  ~PinnedHostBuffer() { release(); }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  Status reserve(size_t bytes, const char* what) {
    if (bytes <= bytes_) return {};
    release();
    const cudaError_t e = cudaMallocHost(&ptr_, bytes);
    if (e != cudaSuccess) {
      ptr_ = nullptr;
      return make_error(std::string("cannot allocate ") + std::to_string(bytes) + " bytes of pinned host memory for " +
                        what + ": " + cudaGetErrorString(e));
    }
    bytes_ = bytes;
    return {};
  }
  void release() {
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace gb::cuda
