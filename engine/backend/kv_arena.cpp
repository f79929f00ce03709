#include "backend/kv_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace gb {

KvArena::~KvArena() { release(); }

KvArena::KvArena(KvArena&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

KvArena& KvArena::operator=(KvArena&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void KvArena::release() {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

Result<KvArena> KvArena::reserve(size_t bytes, const char* what) {
  KvArena arena;
  if (bytes == 0) return arena;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    return make_error(std::string("cannot reserve ") + std::to_string(bytes) + " bytes (" +
                      std::to_string(bytes >> 20) + " MiB) for " + what + ": " + std::strerror(err) +
                      " (a smaller context, --kv-bytes or a smaller KV type needs less)");
  }
  arena.data_ = static_cast<uint8_t*>(p);
  arena.size_ = bytes;
  return arena;
}

void KvArena::release(size_t offset, size_t bytes) {
  if (data_ == nullptr || offset >= size_) return;
  bytes = std::min(bytes, size_ - offset);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto base = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t first = (base + offset + page - 1) / page * page, last = (base + offset + bytes) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

size_t KvArena::resident_bytes() const {
  if (data_ == nullptr) return 0;
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = (size_ + page - 1) / page;
  std::vector<unsigned char> in_core(pages);
  if (mincore(data_, size_, in_core.data()) != 0) return size_;
  size_t resident = 0;
  for (unsigned char c : in_core) resident += c & 1;
  return resident * page;
}

}  // namespace gb
