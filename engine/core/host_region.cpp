#include "core/host_region.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <new>
#include <string>

namespace gb {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

bool transparent_huge_pages_available() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);
  return mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
}

std::shared_ptr<std::byte[]> host_region(size_t bytes, bool huge) {
  const size_t used = round_up(std::max<size_t>(bytes, 1), kHugePage);
  const size_t length = used + kHugePage;  // room to move the start to a 2 MiB boundary
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* start = reinterpret_cast<std::byte*>(round_up(reinterpret_cast<uintptr_t>(p), kHugePage));
  if (huge) ::madvise(start, used, MADV_HUGEPAGE);  // a kernel without THP ignores it: 4 KB pages
  return std::shared_ptr<std::byte[]>(start, [p, length](std::byte*) { ::munmap(p, length); });
}

}  // namespace gb
