#include "backend/decode_tuning.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>

#include "core/atomic_file.h"
#include "core/environment.h"
#include "core/result.h"
#include "cpu/cpu_info.h"
#include "cpu/decode_prefetch.h"
#include "cpu/matmul_quant.h"
#include "cpu/weight_type.h"

namespace gb {

namespace {

namespace fs = std::filesystem;

// The largest cache sysfs lists for cpu0 (bytes; 0 if it lists none).
size_t last_level_cache_bytes() {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string s;
    if (!(in >> s) || s.empty()) continue;
    size_t n = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc()) continue;
    const char unit = p < s.data() + s.size() ? *p : ' ';
    const size_t scale = unit == 'K' ? size_t{1} << 10 : unit == 'M' ? size_t{1} << 20 : unit == 'G' ? size_t{1} << 30 : 1;
    best = std::max(best, n * scale);
  }
  return best;
}

size_t default_min_bytes() { return std::max<size_t>(size_t{256} << 20, 8 * last_level_cache_bytes()); }

// The activation of one token for a matrix of `cols` columns, in the form the
// type's kernel takes (kernels/cpu/matmul_quant.h).
struct Activation {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<kernels::ActBlockQ8> q8;
  kernels::MatmulInput input;
};

Activation make_activation(const kernels::WeightTypeTraits& traits, int64_t cols) {
  Activation a;
  a.f32.resize(static_cast<size_t>(cols));
  uint32_t state = 0x9E3779B9u;
  for (float& v : a.f32) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
  if (traits.activation == kernels::ActivationType::Q8) {
    a.q8.resize(static_cast<size_t>(cols / kernels::kActBlock));
    kernels::quantize_activations(a.f32.data(), cols, 0, 1, a.q8.data());
    a.input.q8 = a.q8.data();
  } else if (traits.activation == kernels::ActivationType::BF16) {
    a.bf16.resize(static_cast<size_t>(cols));
    kernels::round_activations_bf16(a.f32.data(), cols, 0, 1, a.bf16.data());
    a.input.bf16 = a.bf16.data();
  } else {
    a.input.f32 = a.f32.data();
  }
  return a;
}

// Reads every matrix of `set` once as a decode step would (one token, this
// thread); the seconds it took.
double timed_pass(std::span<const TensorView* const> set, std::map<int64_t, Activation>& acts, std::vector<float>& y) {
  const auto start = std::chrono::steady_clock::now();
  for (const TensorView* t : set) {
    const auto& traits = kernels::weight_traits(t->dtype);
    kernels::matmul_weights(y.data(), t->rows, acts.at(t->cols).input, t->data, static_cast<int64_t>(t->row_bytes()),
                            traits, 1, t->cols, 0, t->rows);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Each candidate's median rate over `rounds` interleaved rounds.
std::vector<PrefetchTrial> measure(std::span<const TensorView* const> set, int rounds) {
  std::map<int64_t, Activation> acts;
  int64_t max_rows = 0;
  size_t bytes = 0;
  for (const TensorView* t : set) {
    if (!acts.contains(t->cols)) acts.emplace(t->cols, make_activation(kernels::weight_traits(t->dtype), t->cols));
    max_rows = std::max(max_rows, t->rows);
    bytes += t->num_bytes();
  }
  std::vector<float> y(static_cast<size_t>(max_rows));
  timed_pass(set, acts, y);  // every page touched once before the clock counts
  const auto& candidates = kernels::kDecodePrefetchCandidates;
  std::vector<std::vector<double>> rates(std::size(candidates));
  for (int r = 0; r < std::max(1, rounds); ++r) {
    for (size_t c = 0; c < std::size(candidates); ++c) {
      const kernels::ScopedDecodePrefetch distance(candidates[c]);
      const double seconds = timed_pass(set, acts, y);
      rates[c].push_back(seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0);
    }
  }
  std::vector<PrefetchTrial> trials;
  for (size_t c = 0; c < std::size(candidates); ++c) trials.push_back({candidates[c], median(rates[c])});
  return trials;
}

bool is_type_name(std::string_view name) {
  for (int i = 0; i < kernels::kNumWeightTypes; ++i)
    if (kernels::weight_traits(static_cast<WeightType>(i)).name == name) return true;
  return false;
}

// "<key>\t<type>\t<bytes>" split, or nothing when the line is not one.
struct CacheLine {
  std::string_view key, type;
  int64_t bytes = 0;
};
std::optional<CacheLine> parse_line(std::string_view line) {
  if (line.empty() || line.front() == '#') return std::nullopt;
  const size_t a = line.find('\t');
  if (a == std::string_view::npos) return std::nullopt;
  const size_t b = line.find('\t', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  CacheLine out{line.substr(0, a), line.substr(a + 1, b - a - 1)};
  const std::string_view number = line.substr(b + 1);
  const auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), out.bytes);
  if (out.key.empty() || ec != std::errc() || p != number.data() + number.size() || out.bytes < 0 ||
      out.bytes > kernels::kDecodePrefetchMax || !is_type_name(out.type))
    return std::nullopt;
  return out;
}

template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

// The cache file's text; "" when there is none or it cannot be read.
std::string read_cache(const fs::path& p) {
  if (p.empty()) return {};
  Result<std::string> text = read_whole_file(p.string());
  return text ? std::move(*text) : std::string();
}

// Replaced all at once (core/atomic_file.h). A failure is not an error: the
// choice still applies to this process, and the next one measures again.
void write_cache(const fs::path& p, const std::string& text) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  (void)write_file_atomically(p.string(), text);
}

constexpr std::string_view kCacheHeader =
    "# Glassbox: decode prefetch distances measured on this machine (bytes; backend/decode_tuning.h).\n"
    "# Delete this file to measure again.\n";

}  // namespace

std::string_view prefetch_source_name(PrefetchSource s) {
  switch (s) {
    case PrefetchSource::Default: return "default";
    case PrefetchSource::Environment: return "environment";
    case PrefetchSource::Cached: return "cached";
    case PrefetchSource::Measured: return "measured";
  }
  return "default";
}

DecodeTuningOptions decode_tuning_options_from_environment() {
  DecodeTuningOptions o;
  o.measure = env_or_empty("GLASSBOX_CPU_TUNING") != "0";
  if (const std::string m = env_or_empty("GLASSBOX_CPU_TUNING_MIN_BYTES"); !m.empty()) {
    size_t n = 0;
    const auto [p, ec] = std::from_chars(m.data(), m.data() + m.size(), n);
    if (ec == std::errc() && p == m.data() + m.size()) o.min_bytes = n;
  }
  if (std::string f = env_or_empty("GLASSBOX_CPU_TUNING_FILE"); !f.empty()) {
    o.cache_file = f;
  } else if (std::string d = env_or_empty("XDG_CACHE_HOME"); !d.empty()) {
    o.cache_file = fs::path(d) / "glassbox" / "decode-prefetch.tsv";
  } else if (std::string h = env_or_empty("HOME"); !h.empty()) {
    o.cache_file = fs::path(h) / ".cache" / "glassbox" / "decode-prefetch.tsv";
  }
  return o;
}

int64_t choose_prefetch(std::span<const PrefetchTrial> trials, int64_t default_bytes) {
  const PrefetchTrial* best = nullptr;
  double default_rate = 0.0;
  for (const PrefetchTrial& t : trials) {
    if (best == nullptr || t.gb_per_s > best->gb_per_s) best = &t;
    if (t.bytes == default_bytes) default_rate = t.gb_per_s;
  }
  if (best == nullptr || best->gb_per_s < default_rate * kMinGain) return default_bytes;
  return best->bytes;
}

std::string prefetch_cache_key(bool huge_pages) {
  return kernels::processor_signature() + " " + kernels::isa_name(kernels::active_isa()) + (huge_pages ? " huge" : " 4k");
}

std::optional<int64_t> cached_prefetch(std::string_view text, std::string_view key, WeightType type) {
  std::optional<int64_t> found;
  const std::string_view name = kernels::weight_traits(type).name;
  for_each_line(text, [&](std::string_view line) {
    if (const auto l = parse_line(line); l && l->key == key && l->type == name) found = l->bytes;
  });
  return found;
}

std::string with_cached_prefetch(std::string_view text, std::string_view key, WeightType type, int64_t bytes) {
  const std::string_view name = kernels::weight_traits(type).name;
  std::string out(kCacheHeader);
  for_each_line(text, [&](std::string_view line) {
    const auto l = parse_line(line);
    if (!l) return;
    if (l->key == key && l->type == name) return;  // the new value goes last
    out.append(line).push_back('\n');
  });
  out.append(key).append("\t").append(name).append("\t").append(std::to_string(bytes)).push_back('\n');
  return out;
}

std::vector<DecodePrefetchChoice> tune_decode_prefetch(std::span<const TensorView* const> matrices,
                                                       const DecodeTuningOptions& options,
                                                       std::span<const WeightType> skip) {
  // The matrices of each type, in model order.
  std::map<WeightType, std::vector<const TensorView*>> by_type;
  for (const TensorView* t : matrices)
    if (t != nullptr && t->data != nullptr && t->rows > 0 && kernels::decode_prefetch_applies(t->dtype) &&
        std::find(skip.begin(), skip.end(), t->dtype) == skip.end())
      by_type[t->dtype].push_back(t);
  std::vector<DecodePrefetchChoice> out;
  if (by_type.empty()) return out;
  const std::optional<int64_t> fixed = kernels::decode_prefetch_from_environment();
  const std::string key = prefetch_cache_key(options.huge_pages);
  std::string cache = read_cache(options.cache_file);
  const size_t min_bytes = options.min_bytes > 0 ? options.min_bytes : default_min_bytes();
  for (auto& [type, list] : by_type) {
    DecodePrefetchChoice c{type, kernels::default_decode_prefetch(type), PrefetchSource::Default, {}};
    if (fixed) {
      c = {type, *fixed, PrefetchSource::Environment, {}};
      out.push_back(c);
      continue;
    }
    if (const auto cached = cached_prefetch(cache, key, type)) {
      c.bytes = *cached;
      c.source = PrefetchSource::Cached;
    } else if (options.measure) {
      // A prefix of the type's matrices holding min_bytes, read in full each pass.
      size_t bytes = 0;
      size_t n = 0;
      while (n < list.size() && bytes < min_bytes) bytes += list[n++]->num_bytes();
      if (bytes >= min_bytes) {
        c.trials = measure(std::span(list).first(n), options.rounds);
        c.bytes = choose_prefetch(c.trials, c.bytes);
        c.source = PrefetchSource::Measured;
        if (!options.cache_file.empty()) {
          cache = with_cached_prefetch(cache, key, type, c.bytes);
          write_cache(options.cache_file, cache);
        }
      }
    }
    kernels::set_decode_prefetch(type, c.bytes);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<DecodePrefetchChoice> process_decode_prefetch(std::span<const TensorView* const> matrices, bool huge_pages) {
  static std::mutex mutex;
  static std::map<WeightType, DecodePrefetchChoice> decided;
  const std::lock_guard<std::mutex> lock(mutex);
  std::vector<WeightType> skip;
  for (const auto& [type, choice] : decided) skip.push_back(type);
  DecodeTuningOptions options = decode_tuning_options_from_environment();
  options.huge_pages = huge_pages;
  // The types tuned now, then those these matrices hold that were decided before.
  std::map<WeightType, DecodePrefetchChoice> by_type;
  for (DecodePrefetchChoice& c : tune_decode_prefetch(matrices, options, skip)) {
    if (c.source != PrefetchSource::Default) decided[c.type] = c;
    by_type[c.type] = std::move(c);
  }
  for (const TensorView* t : matrices)
    if (const auto found = t != nullptr ? decided.find(t->dtype) : decided.end(); found != decided.end())
      by_type.try_emplace(t->dtype, found->second);
  std::vector<DecodePrefetchChoice> out;
  for (auto& [type, choice] : by_type) out.push_back(std::move(choice));
  return out;
}

}  // namespace gb
