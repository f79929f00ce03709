// Quantized-weight matmuls: the SIMD kernel of every type against the table's
// scalar vec_dot oracle on random blocks (awkward row counts, 1..7 tokens so
// both the 4-token tiles and the tails run, 8..37 tokens for the packed
// prefill with its token blocks, row panels and their tails, rows split as the thread pool
// splits them and run on several threads at once); the oracle against float
// arithmetic on the dequantized weights within the 8-bit activation bound; and
// the activation quantizer against its definition.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/convert.h"
#include "cpu/matmul.h"
#include "cpu/matmul_quant.h"
#include "gb_test.h"
#include "kernel_test_data.h"

using namespace gb::kernels;

namespace {

const WeightType kQuantTypes[] = {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                                  WeightType::Q8_0, WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K,
                                  WeightType::Q5_K, WeightType::Q6_K, WeightType::IQ4_NL, WeightType::IQ4_XS,
                                  WeightType::MXFP4, WeightType::Q4_K_R, WeightType::Q5_K_R, WeightType::Q6_K_R};



struct Case {
  const WeightTypeTraits* tr;
  int64_t rows, cols, tokens;
  std::vector<uint8_t> w;
  std::vector<float> x;
  std::vector<ActBlockQ8> xq;
  int64_t stride() const { return cols / tr->block_elements * tr->block_bytes; }
};

Case make_case(WeightType t, int64_t rows, int64_t cols, int64_t tokens) {
  Case c{&weight_traits(t), rows, cols, tokens, {}, {}, {}};
  const auto seed = static_cast<uint32_t>(rows * 131 + cols * 7 + tokens + static_cast<int>(t) * 1000);
  c.w = gbtest::random_quant_blocks(*c.tr, rows, cols, seed);
  c.x = gbtest::random_normals(static_cast<size_t>(tokens * cols), seed + 1);
  c.xq.resize(static_cast<size_t>(tokens * cols / kActBlock));
  quantize_activations(c.x.data(), cols, 0, tokens, c.xq.data());
  return c;
}

// Sum over i of |w_i * a_i| for (row, token): the scale of the rounding error.
double abs_dot(const Case& c, int64_t r, int64_t t) {
  std::vector<float> wr(static_cast<size_t>(c.cols));
  c.tr->dequantize_row(c.w.data() + r * c.stride(), wr.data(), c.cols);
  double s = 0;
  for (int64_t i = 0; i < c.cols; ++i) {
    const ActBlockQ8& a = c.xq[static_cast<size_t>(t * c.cols / kActBlock + i / kActBlock)];
    s += std::abs(static_cast<double>(wr[static_cast<size_t>(i)]) * a.d * a.qs[i % kActBlock]);
  }
  return s;
}

void check_fast_vs_oracle(WeightType t, int64_t rows, int64_t cols, int64_t tokens, int num_threads) {
  Case c = make_case(t, rows, cols, tokens);
  const MatmulInput in{nullptr, c.xq.data()};
  std::vector<float> ref(static_cast<size_t>(tokens * rows), -1.0f), got(static_cast<size_t>(tokens * rows), -2.0f);
  matmul_weights_reference(ref.data(), rows, in, c.w.data(), c.stride(), *c.tr, tokens, cols, 0, rows);
  // Uneven row ranges, each on its own thread, as the thread pool runs them.
  std::vector<std::thread> threads;
  for (int k = 0; k < num_threads; ++k) {
    const int64_t lo = rows * k / num_threads + (k > 0 ? k % 2 : 0), hi = rows * (k + 1) / num_threads + ((k + 1) % 2);
    const int64_t begin = std::min(lo, rows), end = k + 1 == num_threads ? rows : std::min(hi, rows);
    threads.emplace_back([&, begin, end] {
      if (begin < end) matmul_weights(got.data(), rows, in, c.w.data(), c.stride(), *c.tr, tokens, cols, begin, end);
    });
  }
  for (auto& th : threads) th.join();
  for (int64_t tk = 0; tk < tokens; ++tk)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(tk * rows + r);
      const double tol = 2e-5 * abs_dot(c, r, tk) + 1e-30;
      if (!(std::abs(static_cast<double>(ref[i]) - got[i]) <= tol))
        QFAIL((std::string(c.tr->name) + " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
               " tokens " + std::to_string(tokens) + " threads " + std::to_string(num_threads) + " row " +
               std::to_string(r) + " token " + std::to_string(tk) + ": oracle " + std::to_string(ref[i]) + " fast " +
               std::to_string(got[i]))
                  .c_str());
    }
}

}  // namespace

GB_TEST(activation_quantization_follows_definition) {
  auto x = gbtest::random_normals(3 * 96, 5);
  x[7] = 0.0f;
  for (int i = 32; i < 64; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero block
  std::vector<ActBlockQ8> q(9);
  quantize_activations(x.data(), 96, 0, 3, q.data());
  for (size_t b = 0; b < q.size(); ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[b * 32 + static_cast<size_t>(i)]));
    QCOMPARE(q[b].d, amax / 127.0f);
    int sums[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      const float v = x[b * 32 + static_cast<size_t>(i)];
      const int want = amax == 0 ? 0 : static_cast<int>(std::nearbyint(v * (127.0f / amax)));
      QCOMPARE(static_cast<int>(q[b].qs[i]), want);
      sums[i / 16] += want;
    }
    QCOMPARE(static_cast<int>(q[b].sum[0]), sums[0]);
    QCOMPARE(static_cast<int>(q[b].sum[1]), sums[1]);
  }
}

GB_TEST(oracle_matches_float_dot_within_activation_rounding) {
  // |sum w_i (a_i - x_i)| <= sum |w_i| d_i / 2: the only difference from float
  // arithmetic on the dequantized weights is the 8-bit activation rounding.
  for (WeightType t : kQuantTypes) {
    Case c = make_case(t, 3, 512, 2);
    for (int64_t tk = 0; tk < 2; ++tk)
      for (int64_t r = 0; r < 3; ++r) {
        std::vector<float> wr(512);
        c.tr->dequantize_row(c.w.data() + r * c.stride(), wr.data(), 512);
        double exact = 0, bound = 1e-6;
        for (int64_t i = 0; i < 512; ++i) {
          exact += static_cast<double>(wr[static_cast<size_t>(i)]) * c.x[static_cast<size_t>(tk * 512 + i)];
          bound += std::abs(wr[static_cast<size_t>(i)]) * c.xq[static_cast<size_t>(tk * 16 + i / 32)].d * 0.5001;
        }
        const float got = c.tr->vec_dot(512, c.w.data() + r * c.stride(), c.xq.data() + tk * 16);
        QVERIFY2(std::abs(got - exact) <= bound, (std::string(c.tr->name) + " oracle outside the rounding bound").c_str());
      }
  }
}

// Types without a fast kernel run the oracle in matmul_weights (nothing to
// compare); they are skipped one by one, not the whole case.
GB_TEST(fast_quant_kernels_match_oracle_every_type) {
  if (!matmul_has_simd())
    QSKIP("SIMD off (no AVX2/FMA/F16C, or GLASSBOX_CPU_ISA=scalar): the quantized kernels run the oracle");
  int compared = 0;
  for (WeightType t : kQuantTypes) {
    if (!matmul_weights_has_simd(t)) continue;
    ++compared;
    const int64_t be = weight_traits(t).block_elements;
    const int64_t col_counts[] = {be, 2 * be, 3 * 256};
    for (int64_t rows : {1, 3, 7, 17})
      for (int64_t cols : col_counts)
        for (int64_t tokens : {1, 2, 4, 5, 7, 8, 13, 37}) {
          check_fast_vs_oracle(t, rows, cols, tokens, 1);
          if (QTest::currentTestFailed()) return;
        }
  }
  QVERIFY2(compared > 0, "AVX2 is on, yet no quantized type has a fast kernel");
}

// Prefill (packed panels from 8 tokens on) and decode must give the same bits
// for a token: 8-bit activation quantization after every matmul would turn a
// last-bit difference into a different int8 value. Both kernel levels this CPU
// runs are checked, each against itself.
GB_TEST(packed_prefill_equals_token_by_token_decode_bit_for_bit) {
  if (!matmul_has_simd()) QSKIP("SIMD off: no packed prefill to compare");
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!isa_supported(isa)) continue;
    for (WeightType t : kQuantTypes) {
      const int64_t be = weight_traits(t).block_elements;
      // Whole units only, a partial unit only, whole units then a partial one,
      // and rows long enough that prefill's token block is under its 128 most
      // (prefill_packed: as many tokens as fit kActPanelBytes). 137 tokens
      // cross a token block boundary in each case.
      for (int64_t cols : {int64_t{3 * 256}, 5 * be, 11 * be, int64_t{16 * 256}}) {
        const int64_t rows = 7, tokens = 137;
        Case c = make_case(t, rows, cols, tokens);
        std::vector<float> batch(static_cast<size_t>(tokens * rows)), one(static_cast<size_t>(rows));
        matmul_weights_with(isa, batch.data(), rows, {nullptr, c.xq.data()}, c.w.data(), c.stride(), *c.tr, tokens,
                            cols, 0, rows);
        for (int64_t tk = 0; tk < tokens; ++tk) {
          const MatmulInput in{nullptr, c.xq.data() + tk * cols / kActBlock};
          matmul_weights_with(isa, one.data(), rows, in, c.w.data(), c.stride(), *c.tr, 1, cols, 0, rows);
          for (int64_t r = 0; r < rows; ++r)
            QVERIFY2(std::memcmp(&one[static_cast<size_t>(r)], &batch[static_cast<size_t>(tk * rows + r)], 4) == 0,
                     (std::string(c.tr->name) + " " + isa_name(isa) + " cols " + std::to_string(cols) + " token " +
                      std::to_string(tk) + " row " + std::to_string(r) + ": decode " + std::to_string(one[static_cast<size_t>(r)]) +
                      " prefill " + std::to_string(batch[static_cast<size_t>(tk * rows + r)]))
                         .c_str());
        }
      }
    }
  }
}

GB_TEST(fast_quant_kernels_match_oracle_many_threads) {
  if (!matmul_has_simd())
    QSKIP("SIMD off (no AVX2/FMA/F16C, or GLASSBOX_CPU_ISA=scalar): the quantized kernels run the oracle");
  for (WeightType t : kQuantTypes) {
    if (!matmul_weights_has_simd(t)) continue;
    check_fast_vs_oracle(t, 67, 512, 6, 4);
    if (QTest::currentTestFailed()) return;
    check_fast_vs_oracle(t, 67, 11 * weight_traits(t).block_elements, 1, 3);  // decode, rows split across threads
    if (QTest::currentTestFailed()) return;
    check_fast_vs_oracle(t, 67, 512, 41, 3);
    if (QTest::currentTestFailed()) return;
  }
}

// A CPU layout holds the same values as its file type and its kernels give the
// same bits: Q4_K rows repacked to Q4_K_R (what the CPU backend does at load)
// dequantize to the same floats, and decode, the few-token tiles and the packed
// prefill give the same results as Q4_K's at every kernel level this CPU runs.
GB_TEST(cpu_layouts_equal_their_file_type_bit_for_bit) {
  for (int t = 0; t < kNumWeightTypes; ++t) {
    const WeightTypeTraits& file = weight_traits(static_cast<WeightType>(t));
    if (file.repack_row == nullptr) continue;
    const WeightTypeTraits& cpu = weight_traits(file.cpu_layout);
    QVERIFY(!is_file_type(cpu.type) && cpu.file_type == file.type && cpu.block_elements == file.block_elements);
    const int64_t rows = 9, cols = 3 * 256;
    // Valid blocks (6-bit scales), as a file holds them, from the file type's quantizer.
    const auto wf = gbtest::random_normals(static_cast<size_t>(rows * cols), 77);
    std::vector<uint8_t> wfile(static_cast<size_t>(rows) * *weight_bytes(file.type, cols));
    std::vector<uint8_t> wcpu(static_cast<size_t>(rows) * *weight_bytes(cpu.type, cols));
    const int64_t sf = cols / file.block_elements * file.block_bytes, sc = cols / cpu.block_elements * cpu.block_bytes;
    for (int64_t r = 0; r < rows; ++r) {
      file.quantize_row(wf.data() + r * cols, wfile.data() + r * sf, cols);
      file.repack_row(wfile.data() + r * sf, wcpu.data() + r * sc, cols);
      std::vector<uint8_t> direct(static_cast<size_t>(sc));
      cpu.quantize_row(wf.data() + r * cols, direct.data(), cols);
      QVERIFY2(std::memcmp(direct.data(), wcpu.data() + r * sc, static_cast<size_t>(sc)) == 0,
               "the CPU layout's quantize_row differs from quantize then repack");
      std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols));
      file.dequantize_row(wfile.data() + r * sf, a.data(), cols);
      cpu.dequantize_row(wcpu.data() + r * sc, b.data(), cols);
      QVERIFY2(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0, cpu.name.data());
    }
    for (int64_t tokens : {int64_t{1}, int64_t{3}, int64_t{37}}) {
      const auto x = gbtest::random_normals(static_cast<size_t>(tokens * cols), 78 + static_cast<uint32_t>(tokens));
      std::vector<ActBlockQ8> xq(static_cast<size_t>(tokens * cols / kActBlock));
      quantize_activations(x.data(), cols, 0, tokens, xq.data());
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        if (!isa_supported(isa)) continue;
        std::vector<float> yf(static_cast<size_t>(tokens * rows)), yc(yf.size(), -1.0f);
        matmul_weights_with(isa, yf.data(), rows, {nullptr, xq.data()}, wfile.data(), sf, file, tokens, cols, 0, rows);
        matmul_weights_with(isa, yc.data(), rows, {nullptr, xq.data()}, wcpu.data(), sc, cpu, tokens, cols, 0, rows);
        if (isa == Isa::Scalar) {  // the oracles: the same values, summed in double
          for (size_t i = 0; i < yf.size(); ++i) QCOMPARE(yc[i], yf[i]);
          continue;
        }
        QVERIFY2(std::memcmp(yf.data(), yc.data(), yf.size() * sizeof(float)) == 0,
                 (std::string(cpu.name) + " " + isa_name(isa) + " tokens " + std::to_string(tokens)).c_str());
      }
    }
  }
}
