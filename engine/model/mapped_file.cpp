// MappedFile: open + fstat + mmap(PROT_READ, MAP_PRIVATE). The descriptor is
// closed right after mapping; the mapping alone keeps the pages reachable.
#include "model/mapped_file.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gb {

namespace {

Error os_error(const std::string& path, const char* what, int err) {
  return make_error(path + ": " + what + " (" + std::strerror(err) + ")");
}

}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return make_error(path + ": file not found");
    return os_error(path, "cannot access file", err);
  }
  if (!S_ISREG(st.st_mode)) return make_error(path + ": not a regular file");
  if (st.st_size == 0) return make_error(path + ": file is empty");

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return os_error(path, "cannot open file", errno);
  // Re-check on the descriptor: the path may have changed since stat().
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
    ::close(fd);
    return make_error(path + ": file changed while opening (not a non-empty regular file)");
  }
  const size_t size_bytes = static_cast<size_t>(st.st_size);
  void* addr = ::mmap(nullptr, size_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) return os_error(path, "cannot map file into memory", map_err);
  return std::shared_ptr<const MappedFile>(
      new MappedFile(path, static_cast<const std::byte*>(addr), size_bytes));
}

Result<uint32_t> MappedFile::magic() const {
  if (size_bytes_ < 4) return make_error(path_ + ": truncated file: too short to hold a header");
  uint32_t m = 0;
  std::memcpy(&m, data_, sizeof m);
  return m;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_bytes_);
}

void MappedFile::release_pages(const void* p, size_t n) const {
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
  const auto map_begin = reinterpret_cast<uintptr_t>(data_), map_end = map_begin + size_bytes_;
  if (p == nullptr || begin < map_begin || end > map_end) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace gb
