// ByteCursor: a bounds-checked little-endian reader over a byte span (a mapped
// model file). Every read checks the remaining length first and fails with a
// Status naming the file, the field and the offset, so parsers never read past
// the end and never trust a length they have not checked. Single-threaded use;
// the span must outlive the cursor.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "core/result.h"

namespace gb {

static_assert(std::endian::native == std::endian::little,
              "model files are little-endian and are read in place");

class ByteCursor {
 public:
  ByteCursor(std::span<const std::byte> bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }
  size_t size_bytes() const { return bytes_.size(); }
  const std::string& path() const { return path_; }

  // Fails unless `n` more bytes are available for `what`.
  Status need(uint64_t n, const char* what) const {
    if (n <= remaining()) return Status::success();
    return make_error(path_ + ": truncated file: " + what + " at offset " + std::to_string(offset_) +
                      " needs " + std::to_string(n) + " bytes but only " + std::to_string(remaining()) +
                      " remain");
  }

  template <class T>
  Status read(T& out, const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    GB_TRY(need(sizeof(T), what));
    std::memcpy(&out, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return Status::success();
  }

  // Reads `n` bytes as a string; `n` is checked against the remaining bytes
  // before anything is allocated.
  Status read_string(uint64_t n, std::string& out, const char* what) {
    GB_TRY(need(n, what));
    out.assign(reinterpret_cast<const char*>(bytes_.data() + offset_), static_cast<size_t>(n));
    offset_ += static_cast<size_t>(n);
    return Status::success();
  }

  Status skip(uint64_t n, const char* what) {
    GB_TRY(need(n, what));
    offset_ += static_cast<size_t>(n);
    return Status::success();
  }

  // Moves to an absolute offset (<= size).
  Status seek(uint64_t offset, const char* what) {
    if (offset > bytes_.size())
      return make_error(path_ + ": truncated file: " + what + " starts at offset " + std::to_string(offset) +
                        " past the end of the file (" + std::to_string(bytes_.size()) + " bytes)");
    offset_ = static_cast<size_t>(offset);
    return Status::success();
  }

  const std::byte* current() const { return bytes_.data() + offset_; }

 private:
  std::span<const std::byte> bytes_;
  const std::string& path_;
  size_t offset_ = 0;
};

}  // namespace gb
