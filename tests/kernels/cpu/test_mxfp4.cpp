// MXFP4 (gpt-oss's expert weights) against gguf-py, the specification: the
// blocks of tests/data/mxfp4 (tools/make_mxfp4_refs.py; edge exponents 0, 1,
// 254, 255, every code in both nibbles) dequantize to gguf-py's floats bit for
// bit, and gguf-py's quantizer inputs quantize to its blocks byte for byte
// (ties, saturation, log2f rounding at powers of two, subnormal scales).
// Beyond the file: the quantizer's round trip lands on the nearest level of its
// scale, a block too small for gguf-py's exponent takes e = 0, and the SIMD
// kernels at every level this CPU runs give the oracle's bits on blocks whose
// products are exact (every exponent from 0 to 252, subnormal scales included).
// The random-block kernel tests (test_quant_matmul, test_kernel_levels) cover
// MXFP4 with the other types.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "cpu/matmul.h"
#include "cpu/matmul_quant.h"
#include "cpu/weight_type.h"
#include "gb_test.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_mxfp4 {

using namespace gb::kernels;

namespace {

constexpr int kBlockBytes = 17;

// tests/data/mxfp4/mxfp4_gguf_py.bin (layout: tools/make_mxfp4_refs.py).
struct GgufPyRefs {
  std::vector<uint8_t> dequant_blocks;  // (num_dequant, 17)
  std::vector<float> dequant_values;    // (num_dequant, 32)
  std::vector<float> quant_inputs;      // (num_quant, 32)
  std::vector<uint8_t> quant_blocks;    // (num_quant, 17)
  uint32_t num_dequant = 0, num_quant = 0;
};

bool read_refs(GgufPyRefs& r) {
  std::ifstream f(GLASSBOX_MXFP4_REFS, std::ios::binary);
  const std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (raw.size() < 8) return false;
  std::memcpy(&r.num_dequant, raw.data(), 4);
  std::memcpy(&r.num_quant, raw.data() + 4, 4);
  const size_t nd = r.num_dequant, nq = r.num_quant;
  if (raw.size() != 8 + nd * (kBlockBytes + 128) + nq * (128 + kBlockBytes)) return false;
  const char* p = raw.data() + 8;
  const auto take = [&p](auto& v, size_t count) {
    v.resize(count);
    std::memcpy(v.data(), p, count * sizeof(v[0]));
    p += count * sizeof(v[0]);
  };
  take(r.dequant_blocks, nd * kBlockBytes);
  take(r.dequant_values, nd * 32);
  take(r.quant_inputs, nq * 32);
  take(r.quant_blocks, nq * kBlockBytes);
  return true;
}

uint32_t bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}
// Every bit of v shows (subnormals included): "-0x1.8p-125".
std::string hex_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(v));
  return buf;
}

const int kLevels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace

GB_TEST(mxfp4_row_is_gguf_code_39_of_17_byte_blocks) {
  const WeightTypeTraits& tr = weight_traits(WeightType::MXFP4);
  QCOMPARE(std::string(tr.name), std::string("MXFP4"));
  QCOMPARE(tr.gguf_code, 39u);
  QCOMPARE(tr.block_elements, 32);
  QCOMPARE(tr.block_bytes, kBlockBytes);
  QVERIFY(tr.activation == ActivationType::Q8);
  QVERIFY(weight_type_from_gguf(39) == WeightType::MXFP4);
  QVERIFY(weight_type_from_name("mxfp4") == WeightType::MXFP4);
  // The NaN scan reads the exponent byte: 0xFF is E8M0's NaN, 0xFE a finite scale.
  QVERIFY(tr.scale_format == ScaleFormat::E8M0 && tr.scale_offset == 0 && tr.min_offset == -1);
  const uint8_t nan = 0xFF, big = 0xFE, zero = 0;
  QVERIFY(scale_is_nan_or_inf(tr.scale_format, &nan));
  QVERIFY(!scale_is_nan_or_inf(tr.scale_format, &big));
  QVERIFY(!scale_is_nan_or_inf(tr.scale_format, &zero));
}

GB_TEST(mxfp4_dequantize_matches_gguf_py_bit_for_bit) {
  GgufPyRefs r;
  QVERIFY2(read_refs(r), "tests/data/mxfp4/mxfp4_gguf_py.bin is missing or truncated");
  QVERIFY(r.num_dequant >= 16);
  const auto& tr = weight_traits(WeightType::MXFP4);
  std::vector<float> got(r.dequant_values.size());
  tr.dequantize_row(r.dequant_blocks.data(), got.data(), static_cast<int64_t>(got.size()));  // one row of every block
  for (size_t i = 0; i < got.size(); ++i)
    QVERIFY2(bits(got[i]) == bits(r.dequant_values[i]),
             ("block " + std::to_string(i / 32) + " (e = " + std::to_string(r.dequant_blocks[i / 32 * kBlockBytes]) +
              ") value " + std::to_string(i % 32) + ": got " + hex_float(got[i]) + " want " + hex_float(r.dequant_values[i]))
                 .c_str());
}

GB_TEST(mxfp4_quantize_matches_gguf_py_byte_for_byte) {
  GgufPyRefs r;
  QVERIFY2(read_refs(r), "tests/data/mxfp4/mxfp4_gguf_py.bin is missing or truncated");
  QVERIFY(r.num_quant >= 16);
  const auto& tr = weight_traits(WeightType::MXFP4);
  std::vector<uint8_t> got(r.quant_blocks.size());
  tr.quantize_row(r.quant_inputs.data(), got.data(), static_cast<int64_t>(r.quant_inputs.size()));
  for (size_t i = 0; i < got.size(); ++i)
    QVERIFY2(got[i] == r.quant_blocks[i], ("block " + std::to_string(i / kBlockBytes) + " byte " +
                                           std::to_string(i % kBlockBytes) + ": got " + std::to_string(got[i]) +
                                           " want " + std::to_string(r.quant_blocks[i]))
                                              .c_str());
}

// Every value comes back as the level of its block's scale nearest to it (no
// closer level exists), and the scale puts the largest |x| at 8 to 16 steps.
GB_TEST(mxfp4_round_trip_lands_on_the_nearest_level) {
  const auto& tr = weight_traits(WeightType::MXFP4);
  std::mt19937 rng(39);
  for (float sigma : {1e-20f, 0.02f, 1.0f, 3e4f}) {
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> x(64 * 32), back(x.size());
    for (auto& v : x) v = dist(rng);
    std::vector<uint8_t> q(64 * kBlockBytes);
    tr.quantize_row(x.data(), q.data(), static_cast<int64_t>(x.size()));
    tr.dequantize_row(q.data(), back.data(), static_cast<int64_t>(x.size()));
    for (size_t b = 0; b < 64; ++b) {
      const double d = std::ldexp(1.0, q[b * kBlockBytes] - 128);
      double amax = 0;
      for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + i])));
      QVERIFY2(amax >= 8 * d && amax < 16 * d, ("sigma " + std::to_string(sigma) + " block " + std::to_string(b)).c_str());
      for (size_t i = 0; i < 32; ++i) {
        const double v = x[b * 32 + i], err = std::fabs(back[b * 32 + i] - v);
        for (int k : kLevels) QVERIFY(err <= std::fabs(k * d - v));
      }
    }
  }
}

// Below 2^-125 gguf-py's exponent wraps (its uint8 cast of a negative value);
// ours stays at the smallest scale, 2^-128, where such values are still levels.
GB_TEST(mxfp4_tiny_block_takes_the_smallest_exponent) {
  const auto& tr = weight_traits(WeightType::MXFP4);
  std::vector<float> x(32, 0.0f), back(32);
  x[0] = std::ldexp(3.0f, -128);
  x[1] = -std::ldexp(1.0f, -127);
  x[2] = std::ldexp(1.0f, -149);  // the smallest subnormal: half a step, a tie that goes to 0
  uint8_t q[kBlockBytes];
  tr.quantize_row(x.data(), q, 32);
  QCOMPARE(static_cast<int>(q[0]), 0);
  tr.dequantize_row(q, back.data(), 32);
  QCOMPARE(back[0], x[0]);
  QCOMPARE(back[1], x[1]);
  QCOMPARE(back[2], 0.0f);
  std::vector<float> zeros(32, 0.0f);
  tr.quantize_row(zeros.data(), q, 32);
  for (uint8_t byte : q) QCOMPARE(static_cast<int>(byte), 0);
}

// Rows of 8 blocks whose exponents run over 0..252; token t's activations are
// non-zero in block t only, with scale 1, so every result is one block's exact
// integer sum times 2^(e - 128) (or its overflow to infinity), and the kernels
// must give the oracle's bits: decode (the E8M0 lanes of a full unit), the
// few-token tiles and the packed prefill (8 tokens or more). Rows of one block
// (a partial unit) take the masked lanes.
GB_TEST(mxfp4_kernels_exact_at_every_exponent) {
  const auto& tr = weight_traits(WeightType::MXFP4);
  std::mt19937 rng(7);
  for (const int64_t cols : {int64_t{256}, int64_t{32}}) {
    const int64_t blocks_per_row = cols / 32, rows = (253 + blocks_per_row - 1) / blocks_per_row;
    std::vector<uint8_t> w(static_cast<size_t>(rows * blocks_per_row * kBlockBytes));
    for (int64_t b = 0; b < rows * blocks_per_row; ++b) {
      w[static_cast<size_t>(b * kBlockBytes)] = static_cast<uint8_t>(b % 253);
      for (int j = 1; j < kBlockBytes; ++j) w[static_cast<size_t>(b * kBlockBytes + j)] = static_cast<uint8_t>(rng());
    }
    const int64_t tokens = 9;
    std::vector<ActBlockQ8> x(static_cast<size_t>(tokens * blocks_per_row));
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t b = 0; b < blocks_per_row; ++b) {
        ActBlockQ8& a = x[static_cast<size_t>(t * blocks_per_row + b)];
        const bool live = b == t % blocks_per_row;
        a.d = live ? 1.0f : 0.0f;
        int sums[2] = {0, 0};
        for (int i = 0; i < 32; ++i) {
          a.qs[i] = static_cast<int8_t>(live ? static_cast<int>(rng() % 255) - 127 : 0);
          sums[i / 16] += a.qs[i];
        }
        a.sum[0] = static_cast<int16_t>(sums[0]);
        a.sum[1] = static_cast<int16_t>(sums[1]);
      }
    const int64_t stride = blocks_per_row * kBlockBytes;
    std::vector<float> ref(static_cast<size_t>(tokens * rows));
    matmul_weights_reference(ref.data(), rows, {nullptr, x.data()}, w.data(), stride, tr, tokens, cols, 0, rows);
    int levels = 0;
    for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
      if (!isa_supported(isa)) continue;
      ++levels;
      for (int64_t n : {int64_t{1}, int64_t{3}, tokens}) {  // decode, tiles, packed prefill
        for (int64_t t0 = 0; t0 + n <= tokens; t0 += n) {
          std::vector<float> got(static_cast<size_t>(n * rows), -1.0f);
          matmul_weights_with(isa, got.data(), rows, {nullptr, x.data() + t0 * blocks_per_row}, w.data(), stride, tr, n,
                              cols, 0, rows);
          for (int64_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < rows; ++r) {
              const float want = ref[static_cast<size_t>((t0 + t) * rows + r)], have = got[static_cast<size_t>(t * rows + r)];
              QVERIFY2(bits(have) == bits(want),
                       (std::string(isa_name(isa)) + " cols " + std::to_string(cols) + " tokens " + std::to_string(n) +
                        " row " + std::to_string(r) + " token " + std::to_string(t0 + t) + ": " + hex_float(have) +
                        " want " + hex_float(want))
                           .c_str());
            }
        }
      }
    }
    if (levels == 0) QSKIP("no AVX2: the MXFP4 kernels are not built for this CPU");
  }
}

}  // namespace test_mxfp4
