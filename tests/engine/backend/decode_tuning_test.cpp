// The decode prefetch tuning (backend/decode_tuning.h): the rule a measurement
// decides by, the cache file's text, and a measurement on matrices small
// enough for a test (min_bytes lowered) that is cached and read back. The
// speeds themselves are not asserted (no timed assertions): only that every
// candidate was measured, that the choice follows the rule from the figures
// it reports, and that the kernels then use it.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "backend/decode_tuning.h"
#include "cpu/cpu_info.h"
#include "cpu/decode_prefetch.h"
#include "cpu/weight_type.h"
#include "gb_test.h"
#include "kernel_test_data.h"

namespace decode_tuning_test {
namespace {

using gb::DecodePrefetchChoice;
using gb::PrefetchSource;
using gb::PrefetchTrial;
using gb::WeightType;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// `count` Q8_0 matrices of 64 x 4096 random blocks (about 278 KB each).
struct Matrices {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<gb::TensorView> views;
  std::vector<const gb::TensorView*> list;
  size_t total = 0;
};
Matrices q8_matrices(int count) {
  Matrices m;
  const auto& tr = gb::kernels::weight_traits(WeightType::Q8_0);
  const int64_t rows = 64, cols = 4096;
  for (int i = 0; i < count; ++i) m.bytes.push_back(gbtest::random_quant_blocks(tr, rows, cols, static_cast<uint32_t>(i + 1)));
  for (int i = 0; i < count; ++i) {
    gb::TensorView v;
    v.name = "m" + std::to_string(i);
    v.dtype = WeightType::Q8_0;
    v.data = m.bytes[static_cast<size_t>(i)].data();
    v.rows = rows;
    v.cols = cols;
    m.total += v.num_bytes();
    m.views.push_back(v);
  }
  for (const auto& v : m.views) m.list.push_back(&v);
  return m;
}

}  // namespace

GB_TEST(the_default_stays_unless_a_candidate_beats_it_clearly) {
  const int64_t def = 16384;
  QCOMPARE(gb::choose_prefetch({}, def), def);
  std::vector<PrefetchTrial> t = {{0, 30.0}, {4096, 35.0}, {8192, 40.0}, {16384, 40.5}, {32768, 39.0}};
  QCOMPARE(gb::choose_prefetch(t, def), def);  // the default is the fastest
  t[2].gb_per_s = 41.0;                        // 1.2% faster: noise
  QCOMPARE(gb::choose_prefetch(t, def), def);
  t[2].gb_per_s = 40.5 * gb::kMinGain + 0.01;  // clearly faster
  QCOMPARE(gb::choose_prefetch(t, def), int64_t{8192});
  t[0].gb_per_s = 60.0;  // none at all, fastest of all
  QCOMPARE(gb::choose_prefetch(t, def), int64_t{0});
  // A default that was not among the candidates has no rate: the fastest wins.
  QCOMPARE(gb::choose_prefetch(t, 12345), int64_t{0});
}

GB_TEST(cache_text_keeps_other_lines_and_drops_malformed_ones) {
  const std::string key = "GenuineIntel 6/143/8 avx512bf16 huge";
  std::string text = gb::with_cached_prefetch("", key, WeightType::F16, 8192);
  QVERIFY(text.starts_with("#"));
  QCOMPARE(gb::cached_prefetch(text, key, WeightType::F16), std::optional<int64_t>(8192));
  QVERIFY(!gb::cached_prefetch(text, key, WeightType::Q8_0));
  QVERIFY(!gb::cached_prefetch(text, "GenuineIntel 6/143/8 avx512bf16 4k", WeightType::F16));
  // Another processor's line, another type, a replaced value, and lines that
  // are not entries (no tabs, a negative or oversized distance, a word, an
  // unknown type, trailing characters, an empty key), and CRLF line ends.
  text += "AuthenticAMD 25/17/1 avx512 4k\tQ8_0\t4096\r\n"
          "garbage line\n"
          "k\tQ8_0\t-1\nk\tQ8_0\t99999999999\nk\tQ8_0\tmany\nk\tQ9_9\t4096\nk\tQ8_0\t4096x\n\tQ8_0\t4096\n";
  text = gb::with_cached_prefetch(text, key, WeightType::Q4_K_R, 32768);
  text = gb::with_cached_prefetch(text, key, WeightType::F16, 0);
  QCOMPARE(gb::cached_prefetch(text, key, WeightType::F16), std::optional<int64_t>(0));
  QCOMPARE(gb::cached_prefetch(text, key, WeightType::Q4_K_R), std::optional<int64_t>(32768));
  QCOMPARE(gb::cached_prefetch(text, "AuthenticAMD 25/17/1 avx512 4k", WeightType::Q8_0), std::optional<int64_t>(4096));
  QVERIFY(!gb::cached_prefetch(text, "k", WeightType::Q8_0));
  QVERIFY(text.find("garbage") == std::string::npos);
  QVERIFY(text.find("many") == std::string::npos);
  size_t f16_lines = 0;
  for (size_t p = text.find("\tF16\t"); p != std::string::npos; p = text.find("\tF16\t", p + 1)) ++f16_lines;
  QCOMPARE(f16_lines, size_t{1});
}

GB_TEST(the_cache_key_names_the_processor_level_and_pages) {
  const std::string sig = gb::kernels::processor_signature();
#if defined(__x86_64__)
  QVERIFY2(std::regex_match(sig, std::regex(R"(\S+ \d+/\d+/\d+)")), sig.c_str());
#endif
  const std::string isa = gb::kernels::isa_name(gb::kernels::active_isa());
  QCOMPARE(gb::prefetch_cache_key(true), sig + " " + isa + " huge");
  QCOMPARE(gb::prefetch_cache_key(false), sig + " " + isa + " 4k");
}

GB_TEST(a_type_is_measured_once_then_read_from_the_cache) {
  if (std::getenv("GLASSBOX_CPU_PREFETCH") != nullptr) QSKIP("GLASSBOX_CPU_PREFETCH is set");
  if (!gb::kernels::decode_prefetch_applies(WeightType::Q8_0)) QSKIP("no Q8_0 decode kernel at this level");
  const Matrices m = q8_matrices(8);
  const std::filesystem::path file = std::filesystem::path(gbtest::temp_dir()) / "tuning" / "decode-prefetch.tsv";
  std::filesystem::remove(file);
  gb::DecodeTuningOptions o;
  o.cache_file = file;
  o.min_bytes = m.total / 2;  // a prefix of the matrices is read
  o.rounds = 1;
  o.huge_pages = false;
  gb::kernels::reset_decode_prefetch();

  // Too few bytes to stream from memory: the default, nothing measured or written.
  o.min_bytes = m.total + 1;
  auto small = gb::tune_decode_prefetch(m.list, o);
  QCOMPARE(small.size(), size_t{1});
  QCOMPARE(small[0].source, PrefetchSource::Default);
  QCOMPARE(small[0].bytes, gb::kernels::default_decode_prefetch(WeightType::Q8_0));
  QVERIFY(small[0].trials.empty());
  QVERIFY(!std::filesystem::exists(file));
  o.min_bytes = m.total / 2;

  const auto first = gb::tune_decode_prefetch(m.list, o);
  QCOMPARE(first.size(), size_t{1});
  const DecodePrefetchChoice& c = first[0];
  QCOMPARE(c.type, WeightType::Q8_0);
  QCOMPARE(c.source, PrefetchSource::Measured);
  QCOMPARE(c.trials.size(), std::size(gb::kernels::kDecodePrefetchCandidates));
  for (size_t i = 0; i < c.trials.size(); ++i) {
    QCOMPARE(c.trials[i].bytes, gb::kernels::kDecodePrefetchCandidates[i]);
    QVERIFY(c.trials[i].gb_per_s > 0.0);
  }
  QCOMPARE(c.bytes, gb::choose_prefetch(c.trials, gb::kernels::default_decode_prefetch(WeightType::Q8_0)));
  QCOMPARE(gb::kernels::decode_prefetch(WeightType::Q8_0), c.bytes);
  const std::string key = gb::prefetch_cache_key(false);
  QCOMPARE(gb::cached_prefetch(read_text(file), key, WeightType::Q8_0), std::optional<int64_t>(c.bytes));

  // The next load reads the cache: no trials. A value the measurement would
  // not give (planted in the file) shows it really came from there.
  const int64_t planted = c.bytes == 4096 ? 8192 : 4096;
  {
    std::ofstream out(file, std::ios::trunc);
    out << gb::with_cached_prefetch(read_text(file), key, WeightType::Q8_0, planted);
  }
  gb::kernels::reset_decode_prefetch();
  const auto second = gb::tune_decode_prefetch(m.list, o);
  QCOMPARE(second.size(), size_t{1});
  QCOMPARE(second[0].source, PrefetchSource::Cached);
  QCOMPARE(second[0].bytes, planted);
  QVERIFY(second[0].trials.empty());
  QCOMPARE(gb::kernels::decode_prefetch(WeightType::Q8_0), planted);

  // Another page kind is another key: measured again, the first line kept.
  o.huge_pages = true;
  const auto huge = gb::tune_decode_prefetch(m.list, o);
  QCOMPARE(huge[0].source, PrefetchSource::Measured);
  const std::string text = read_text(file);
  QCOMPARE(gb::cached_prefetch(text, key, WeightType::Q8_0), std::optional<int64_t>(planted));
  QCOMPARE(gb::cached_prefetch(text, gb::prefetch_cache_key(true), WeightType::Q8_0), std::optional<int64_t>(huge[0].bytes));

  // Measuring off and no cache: the default. A type already chosen: skipped.
  gb::DecodeTuningOptions off = o;
  off.cache_file.clear();
  off.measure = false;
  gb::kernels::reset_decode_prefetch();
  const auto none = gb::tune_decode_prefetch(m.list, off);
  QCOMPARE(none[0].source, PrefetchSource::Default);
  QCOMPARE(gb::kernels::decode_prefetch(WeightType::Q8_0), gb::kernels::default_decode_prefetch(WeightType::Q8_0));
  const WeightType skip[] = {WeightType::Q8_0};
  QVERIFY(gb::tune_decode_prefetch(m.list, o, skip).empty());
  gb::kernels::reset_decode_prefetch();
}

}  // namespace decode_tuning_test
