#include "cli/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "core/host_region.h"
#include "core/thread_pool.h"
#include "cpu/matmul.h"

namespace gb::cli {

double measure_read_bandwidth(int num_threads, size_t buffer_bytes, int repeats) {
  const int64_t n = static_cast<int64_t>(buffer_bytes / sizeof(float)) & ~int64_t{4095};
  // Distinct contents on every page: identical pages (a constant fill) can be
  // merged by the OS or hypervisor and then read from cache, inflating the figure.
  // In huge pages where the kernel gives them, as the CPU backend holds the
  // weights (core/host_region.h): the figure is what a decode step's stream can
  // be read at, not what 4 KB pages allow.
  const auto region = host_region(static_cast<size_t>(n) * sizeof(float), transparent_huge_pages_available());
  const std::span<float> buffer(reinterpret_cast<float*>(region.get()), static_cast<size_t>(n));
  uint32_t x = 0x9e3779b9u;
  for (float& v : buffer) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v = static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
  }
  ThreadPool pool(num_threads);
  std::vector<float> sinks(static_cast<size_t>(pool.num_threads()), 0.0f);
  double best = 0.0;
  for (int r = 0; r < repeats + 1; ++r) {  // first pass warms up
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, [&](int64_t b, int64_t e, int t) { sinks[static_cast<size_t>(t)] += kernels::read_sum(buffer.data() + b, e - b); }, 4096);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::max(best, static_cast<double>(n) * sizeof(float) / s);
  }
  // Keep the sums observable so the reads cannot be optimised away.
  volatile float sink = 0.0f;
  for (float s : sinks) sink = sink + s;
  return best;
}

}  // namespace gb::cli
