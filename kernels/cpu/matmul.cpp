#include "cpu/matmul.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu/cpu_info.h"

namespace gb::kernels {

namespace avx2 {
void matmul(float* y, int64_t ldy, const float* x, const void* w, WeightType wtype, int64_t num_tokens, int64_t cols,
            int64_t row_begin, int64_t row_end);
float read_sum(const float* p, int64_t n);
double fma_probe(int64_t iterations);
}  // namespace avx2
namespace avx512bf16 {
double dot_probe(int64_t iterations);
}  // namespace avx512bf16
namespace avx512 {
void matmul(float* y, int64_t ldy, const float* x, const void* w, WeightType wtype, int64_t num_tokens, int64_t cols,
            int64_t row_begin, int64_t row_end);
double fma_probe(int64_t iterations);
float read_sum(const float* p, int64_t n);
}  // namespace avx512

namespace {
using MatmulFn = void (*)(float* y, int64_t ldy, const float* x, const void* w, WeightType wtype, int64_t num_tokens,
                          int64_t cols, int64_t row_begin, int64_t row_end);

// The float matmul of each kernel level (index = Isa).
#if defined(__x86_64__)
constexpr MatmulFn kMatmul[kIsaCount] = {&matmul_reference, &avx2::matmul, &avx512::matmul, &avx512::matmul};
#else
constexpr MatmulFn kMatmul[kIsaCount] = {&matmul_reference, &matmul_reference, &matmul_reference, &matmul_reference};
#endif
}  // namespace

bool matmul_has_simd() { return active_isa() != Isa::Scalar; }

void matmul_with(Isa isa, float* y, int64_t ldy, const float* x, const void* w, WeightType wtype, int64_t num_tokens,
                 int64_t cols, int64_t row_begin, int64_t row_end) {
  if (!isa_supported(isa)) isa = Isa::Scalar;
  kMatmul[static_cast<int>(isa)](y, ldy, x, w, wtype, num_tokens, cols, row_begin, row_end);
}

void matmul(float* y, int64_t ldy, const float* x, const void* w, WeightType wtype, int64_t num_tokens,
            int64_t cols, int64_t row_begin, int64_t row_end) {
  static const MatmulFn fn = kMatmul[static_cast<int>(active_isa())];
  fn(y, ldy, x, w, wtype, num_tokens, cols, row_begin, row_end);
}

float read_sum(const float* p, int64_t n) {
#if defined(__x86_64__)
  if (active_isa() >= Isa::Avx512) return avx512::read_sum(p, n);
  if (matmul_has_simd()) return avx2::read_sum(p, n);
#endif
  float acc[8] = {};
  for (int64_t i = 0; i < n; ++i) acc[i & 7] += p[i];
  return acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
}

#if defined(__x86_64__)
namespace {
// Best of a few short runs (about 20 ms each at 100 GFLOP/s): the peak, not
// the average. With threads > 1 every run starts on all threads at once (a
// barrier) and counts all their flops over the slowest thread's time: what the
// processor sustains with every core busy, which can be less than threads x
// the one-thread figure (shared cores, a lower all-core clock).
double probe_peak(double (*probe)(int64_t), int threads) {
  constexpr int kRuns = 5;
  constexpr int64_t kIterations = 10'000'000;
  threads = std::max(1, threads);
  std::vector<double> flops(static_cast<size_t>(threads)), seconds(static_cast<size_t>(threads));
  std::barrier start(threads), done(threads);
  double best = 0.0;
  const auto one_thread = [&](int t) {
    for (int run = 0; run < kRuns; ++run) {
      start.arrive_and_wait();
      const auto t0 = std::chrono::steady_clock::now();
      flops[static_cast<size_t>(t)] = probe(kIterations);
      seconds[static_cast<size_t>(t)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      done.arrive_and_wait();
      if (t == 0) {
        double total = 0.0, slowest = 0.0;
        for (int i = 0; i < threads; ++i) {
          total += flops[static_cast<size_t>(i)];
          slowest = std::max(slowest, seconds[static_cast<size_t>(i)]);
        }
        if (slowest > 0 && total / slowest > best) best = total / slowest;
      }
    }
  };
  std::vector<std::thread> others;
  for (int t = 1; t < threads; ++t) others.emplace_back(one_thread, t);
  one_thread(0);
  for (auto& th : others) th.join();
  return best / 1e9;
}
}  // namespace
#endif

double fma_peak_gflops(int threads) {
#if defined(__x86_64__)
  if (active_isa() >= Isa::Avx512) return probe_peak(&avx512::fma_probe, threads);
  if (active_isa() == Isa::Avx2) return probe_peak(&avx2::fma_probe, threads);
#endif
  return 0.0;
}

double bf16_dot_peak_gflops(int threads) {
#if defined(__x86_64__)
  if (active_isa() >= Isa::Avx512Bf16) return probe_peak(&avx512bf16::dot_probe, threads);
#endif
  return 0.0;
}

}  // namespace gb::kernels
