// MappedFile: a whole file mapped read-only into memory (mmap), for model
// weights that are read in place. Owns the mapping; the bytes stay valid and
// unchanged for the object's life. Immutable after open(), so any thread may
// read it; share it through std::shared_ptr<const MappedFile>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/result.h"

namespace gb {

class MappedFile {
 public:
  // Maps `path`. Fails with a message naming the file when it is missing, not a
  // regular file, empty, or cannot be read or mapped.
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const std::byte* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }
  std::span<const std::byte> bytes() const { return {data_, size_bytes_}; }
  // Hands the whole pages inside [p, p + n) back to the kernel (madvise
  // MADV_DONTNEED): for bytes a caller has copied elsewhere and will not read
  // again soon. Their content stays valid (a later read faults them in from the
  // file again); ranges outside the mapping are ignored. Any thread.
  void release_pages(const void* p, size_t n) const;
  // The first four bytes as a little-endian u32 (a model file's magic), or an
  // error naming the file when it is shorter than that.
  Result<uint32_t> magic() const;

 private:
  MappedFile(std::string path, const std::byte* data, size_t size_bytes)
      : path_(std::move(path)), data_(data), size_bytes_(size_bytes) {}

  std::string path_;
  const std::byte* data_ = nullptr;  // (size_bytes_) bytes, page-aligned start
  size_t size_bytes_ = 0;
};

}  // namespace gb
