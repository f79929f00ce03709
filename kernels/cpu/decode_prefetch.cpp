#include "cpu/decode_prefetch.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "cpu/cpu_info.h"
#include "cpu/matmul_quant.h"

namespace gb::kernels {

namespace {

constexpr int32_t kUnset = -1;

int64_t clamp_distance(int64_t bytes) { return std::clamp<int64_t>(bytes, 0, kDecodePrefetchMax); }

// GLASSBOX_CPU_PREFETCH as a distance, or kUnset when absent or not a number.
int64_t environment_distance() {
  const char* v = std::getenv("GLASSBOX_CPU_PREFETCH");
  if (v == nullptr || *v == '\0') return kUnset;
  int64_t bytes = 0;
  const char* end = v + std::strlen(v);
  const auto [p, ec] = std::from_chars(v, end, bytes);
  if (ec != std::errc() || p != end || bytes < 0) return kUnset;
  return clamp_distance(bytes);
}

// The process-wide setting of each type plus one (0: not set), so that the
// array starts zeroed at load, before any thread runs.
std::atomic<int32_t> g_settings[kNumWeightTypes];

thread_local int64_t t_override = kUnset;

}  // namespace

namespace {

// The starting distance per kernel level (index = Isa) and kind of type,
// measured on Zen 5 with the weights in huge pages, TinyLlama shape, one
// thread (docs/performance.md): F32 reads four rows side by side at both
// levels and the hardware prefetcher keeps up (software prefetch cost 5-28%);
// F16 / BF16 read one row at the AVX-512 level (16 KB ahead) and four at the
// AVX2 level, where 64-128 KB ahead matched the former rows-ahead scheme
// (17.2-17.7 tok/s against 16.9-17.5; 16 KB 14.2-14.5); quantized types 16 KB.
struct DefaultDistance {
  int64_t f32, half, quantized;
};
constexpr DefaultDistance kDefaultDistance[kIsaCount] = {
    {0, 0, 0},              // scalar: no loop prefetches
    {0, 65536, 16384},      // avx2
    {0, 16384, 16384},      // avx512
    {0, 16384, 16384},      // avx512bf16
};

}  // namespace

int64_t default_decode_prefetch(WeightType t) {
  const DefaultDistance& d = kDefaultDistance[static_cast<int>(active_isa())];
  return t == WeightType::F32 ? d.f32 : is_quantized(t) ? d.quantized : d.half;
}

std::optional<int64_t> decode_prefetch_from_environment() {
  static const int64_t from_environment = environment_distance();
  return from_environment != kUnset ? std::optional<int64_t>(from_environment) : std::nullopt;
}

int64_t decode_prefetch(WeightType t) {
  if (t_override != kUnset) return t_override;
  if (const auto fixed = decode_prefetch_from_environment()) return *fixed;
  const int32_t set = g_settings[static_cast<size_t>(t)].load(std::memory_order_relaxed);
  return set > 0 ? set - 1 : default_decode_prefetch(t);
}

bool decode_prefetch_applies(WeightType t) {
  return active_isa() >= Isa::Avx2 && (!is_quantized(t) || matmul_weights_has_simd(t));
}

void set_decode_prefetch(WeightType t, int64_t bytes) {
  g_settings[static_cast<size_t>(t)].store(static_cast<int32_t>(clamp_distance(bytes) + 1), std::memory_order_relaxed);
}

void reset_decode_prefetch() {
  for (auto& x : g_settings) x.store(0, std::memory_order_relaxed);
}

ScopedDecodePrefetch::ScopedDecodePrefetch(int64_t bytes) : previous_(t_override) { t_override = clamp_distance(bytes); }
ScopedDecodePrefetch::~ScopedDecodePrefetch() { t_override = previous_; }

}  // namespace gb::kernels
