#include "cpu/decode_prefetch.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>

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

int64_t default_decode_prefetch(WeightType t) { return t == WeightType::F32 ? 0 : 16384; }

int64_t decode_prefetch(WeightType t) {
  if (t_override != kUnset) return t_override;
  static const int64_t from_environment = environment_distance();
  if (from_environment != kUnset) return from_environment;
  const int32_t set = g_settings[static_cast<size_t>(t)].load(std::memory_order_relaxed);
  return set > 0 ? set - 1 : default_decode_prefetch(t);
}

bool decode_prefetch_applies(WeightType t) {
  if (!is_quantized(t)) return active_isa() >= Isa::Avx512;
  return active_isa() >= Isa::Avx2 && matmul_weights_has_simd(t);
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
