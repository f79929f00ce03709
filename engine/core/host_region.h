// Large host buffers in transparent huge pages: anonymous memory whose start is
// on a 2 MiB boundary, advised into huge pages (MADV_HUGEPAGE) where the kernel
// allows it, so a kernel streaming through it crosses a page (a TLB miss, and
// a stop for the hardware prefetchers, which do not cross 4 KB pages) once per
// 2 MiB instead of once per 4 KB. For the CPU backend's weights
// (backend/cpu_weights.h) and the bandwidth probe that measures what they can
// be read at. Pages are committed when first written. Thread: any.
#pragma once

#include <cstddef>
#include <memory>

namespace gb {

// Whether the kernel gives transparent huge pages to memory advised for them:
// /sys/kernel/mm/transparent_hugepage/enabled says "always" or "madvise".
bool transparent_huge_pages_available();

// `bytes` (at least 1) of zeroed anonymous memory starting on a 2 MiB boundary,
// advised into huge pages when `huge` is set; released when the last owner
// goes. Throws std::bad_alloc when the address space cannot be had.
std::shared_ptr<std::byte[]> host_region(size_t bytes, bool huge);

}  // namespace gb
