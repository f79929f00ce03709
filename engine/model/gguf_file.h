// GgufFile: a parsed, validated GGUF v2/v3 file (header, metadata, tensor infos)
// over a read-only mapping. Parsing checks every count, length, dimension and
// offset against the file size and sane limits before allocating, so a forged
// header fails with a message instead of a huge allocation or an out-of-range
// read. Immutable after parse; any thread may read it.
//
// Layout (little-endian):
//   "GGUF" | u32 version | u64 num_tensors | u64 num_kv
//   num_kv x (string key | u32 value type | value)
//   num_tensors x (string name | u32 n_dims | n_dims x u64 ne | u32 ggml type | u64 offset)
//   padding to general.alignment (default 32)
//   data section: tensor i at data_offset + offset_i (a multiple of the alignment)
// A string is u64 length + bytes; an array is u32 element type + u64 count + elements.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "model/dtype.h"
#include "model/gguf_value.h"

namespace gb {

class MappedFile;

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMaxDims = 4;

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF ne order: dims[0] = innermost (columns), dims[1] = rows ...
  uint32_t ggml_type = 0;      // as stored
  WeightType dtype = WeightType::F32;    // the supported type it maps to
  uint64_t offset = 0;         // from the start of the data section; a multiple of the alignment
  uint64_t num_bytes = 0;      // checked to lie inside the file

  uint64_t num_elements() const;
};

struct GgufReadOptions {
  // Stop after the metadata: tensor infos are neither read nor validated (tokenizer
  // vocabularies, and quick looks at files whose tensor types we cannot run).
  bool metadata_only = false;
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path, const GgufReadOptions& options = {});
  static Result<GgufFile> parse(std::shared_ptr<const MappedFile> file, const GgufReadOptions& options = {});

  const std::string& path() const;
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute, aligned

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const std::byte* tensor_data(const GgufTensorInfo& tensor) const;
  const std::shared_ptr<const MappedFile>& file() const { return file_; }

 private:
  friend class GgufParser;
  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

// "Q4_0", "F16" ... for a ggml type code, or "type <code>" if unknown to us.
std::string ggml_type_label(uint32_t code);

}  // namespace gb
