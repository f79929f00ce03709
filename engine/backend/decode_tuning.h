// The decode prefetch distance measured on the processor it runs on (#44).
// How far ahead of the weights a decode loop should ask for them depends on
// the processor's hardware prefetchers and memory (kernels/cpu/decode_prefetch.h):
// Zen 5 wants 8-32 KB for F16 and Q8_0 and nothing for four F32 rows side by
// side; a family never seen here may want another. So the first time a weight
// type with enough bytes to stream from memory loads on a processor, the CPU
// backend reads its matrices once per candidate distance, on one thread,
// interleaved over a few rounds, keeps the fastest (when it beats the default
// by kMinGain; noise must not move it), and caches the choice per processor
// (kernels::processor_signature(), the kernel level and whether the weights
// sit in huge pages) in a small text file; later loads read it from there.
// The distance never changes a result, only the speed.
//
// Settings: GLASSBOX_CPU_PREFETCH=<bytes> fixes every distance (nothing is
// measured or cached); GLASSBOX_CPU_TUNING=0 measures nothing (the cache and
// the defaults only); GLASSBOX_CPU_TUNING_FILE names the cache file (default
// $XDG_CACHE_HOME/glassbox/decode-prefetch.tsv, else ~/.cache/glassbox/...);
// GLASSBOX_CPU_TUNING_MIN_BYTES overrides DecodeTuningOptions::min_bytes.
// Private to engine/backend: DeviceInfo::decode_prefetch reports the choices.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/tensor_view.h"

namespace gb {

enum class PrefetchSource { Default, Environment, Cached, Measured };
std::string_view prefetch_source_name(PrefetchSource s);  // "default", "environment", "cached", "measured"

// One candidate distance and the median read rate of the type's matrices with it.
struct PrefetchTrial {
  int64_t bytes = 0;
  double gb_per_s = 0.0;
};

struct DecodePrefetchChoice {
  WeightType type = WeightType::F32;
  int64_t bytes = 0;
  PrefetchSource source = PrefetchSource::Default;
  std::vector<PrefetchTrial> trials;  // Measured only, one per candidate in kDecodePrefetchCandidates' order
};

// A candidate replaces the default only when its median rate is at least this
// much higher (a 2-core VM's rounds move by a few percent).
inline constexpr double kMinGain = 1.03;

struct DecodeTuningOptions {
  std::filesystem::path cache_file;  // empty: nothing read or written
  bool measure = true;               // measure types the cache does not hold
  // A type is measured only when its matrices hold at least this many bytes
  // (and one pass reads about this much): enough to stream from memory, not
  // from the caches. 0: max(256 MiB, 8 x the last-level cache).
  size_t min_bytes = 0;
  int rounds = 5;
  bool huge_pages = false;  // the weights sit in huge pages (part of the cache key)
};

// The options the environment gives (see above).
DecodeTuningOptions decode_tuning_options_from_environment();

// Chooses, applies (kernels::set_decode_prefetch) and returns the distance of
// every type among `matrices` whose decode reads one
// (kernels::decode_prefetch_applies), skipping those in `skip`: the
// environment's, else the cache's, else measured and cached when the type
// holds min_bytes, else the default. The measurement runs on the calling thread.
std::vector<DecodePrefetchChoice> tune_decode_prefetch(std::span<const TensorView* const> matrices,
                                                       const DecodeTuningOptions& options,
                                                       std::span<const WeightType> skip = {});

// The choices of this process, each type tuned once (the first time a model
// holding enough of it loads) with the environment's options: tunes the types
// of `matrices` not chosen yet and returns the choice of every type among them
// whose decode reads a distance, in type order. Any thread.
std::vector<DecodePrefetchChoice> process_decode_prefetch(std::span<const TensorView* const> matrices, bool huge_pages);

// The rule a measurement decides by: the fastest candidate when it beats the
// default's rate by kMinGain, else the default.
int64_t choose_prefetch(std::span<const PrefetchTrial> trials, int64_t default_bytes);

// The cache file's lines: "<key>\t<type name>\t<bytes>", '#' comments. The key
// of this processor, kernel level and page kind, e.g.
// "AuthenticAMD 26/2/1 avx512bf16 huge".
std::string prefetch_cache_key(bool huge_pages);
// The distance `text` holds for (key, type), if a well-formed line does.
std::optional<int64_t> cached_prefetch(std::string_view text, std::string_view key, WeightType type);
// `text` with the line of (key, type) replaced by `bytes` (appended when new);
// other lines kept as they are, malformed ones dropped.
std::string with_cached_prefetch(std::string_view text, std::string_view key, WeightType type, int64_t bytes);

}  // namespace gb
