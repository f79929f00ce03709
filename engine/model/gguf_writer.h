// GgufWriter: builds a GGUF v3 (or v2) file from metadata and tensors. Tensor
// bytes are produced by a fill callback at write time, one tensor at a time, so
// a multi-GB model streams to disk without being held in memory. Used by
// `glassbox-cli synth`, by the synthetic-model generator, and by tests that
// build (and then damage) files. Single-threaded: one writer per thread.
//
// The file is written to "<path>.partial" and renamed on success, so a failed or
// interrupted write never leaves a file that looks complete.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "model/dtype.h"
#include "model/gguf_value.h"

namespace gb {

class GgufWriter {
 public:
  // Fills `out` (exactly the tensor's num_bytes) with the tensor's data.
  using FillFn = std::function<void(std::span<std::byte> out)>;
  // Called after each tensor with (bytes of tensor data written, total).
  using ProgressFn = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;

  // alignment: data-section alignment; a value other than 32 is recorded as
  // general.alignment automatically.
  explicit GgufWriter(uint32_t alignment = 32, uint32_t version = 3);

  void add_metadata(std::string key, GgufValue value);
  // dims in GGUF ne order (dims[0] = columns). ggml_type is written as given
  // (tests use unsupported codes); num_bytes is what fill must produce.
  void add_tensor(std::string name, std::vector<uint64_t> dims, uint32_t ggml_type, uint64_t num_bytes, FillFn fill);
  // Convenience: a tensor of a supported type from bytes already in memory.
  void add_tensor(std::string name, std::vector<uint64_t> dims, WeightType dtype, std::vector<std::byte> bytes);

  Status write(const std::string& path, const ProgressFn& progress = {}) const;

  uint64_t total_tensor_bytes() const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t ggml_type;
    uint64_t num_bytes;
    FillFn fill;
  };
  uint32_t alignment_;
  uint32_t version_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace gb
