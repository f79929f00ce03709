// CPU kernels: the SIMD matmul against the scalar reference on awkward sizes and
// every weight type (each SIMD-vs-reference case QSKIPs when cpuid says the fast
// path is off, since the dispatcher would then run the reference itself); conversions against hand-known bit patterns; RoPE and
// attention against direct formulas.
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/convert.h"
#include "cpu/exp_sums.h"
#include "cpu/matmul.h"
#include "cpu/ops.h"
#include "cpu/paged_attention.h"
#include "gb_test.h"
#include "kernel_test_data.h"

using namespace gb::kernels;

namespace {


// Weights of type t holding the values of `w` (rounded to that type).
std::vector<uint16_t> narrow(const std::vector<float>& w, WeightType t) {
  std::vector<uint16_t> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) out[i] = t == WeightType::F16 ? f32_to_f16(w[i]) : f32_to_bf16(w[i]);
  return out;
}

void check_matmul(WeightType t, int64_t rows, int64_t cols, int64_t tokens) {
  const auto wf = gbtest::random_normals(static_cast<size_t>(rows * cols), 1u + static_cast<uint32_t>(rows * 7 + cols));
  const auto x = gbtest::random_normals(static_cast<size_t>(tokens * cols), 99u + static_cast<uint32_t>(tokens));
  const auto w16 = narrow(wf, t);
  const void* w = t == WeightType::F32 ? static_cast<const void*>(wf.data()) : static_cast<const void*>(w16.data());
  std::vector<float> ref(static_cast<size_t>(tokens * rows), -1.0f), got(static_cast<size_t>(tokens * rows), -2.0f);
  matmul_reference(ref.data(), rows, x.data(), w, t, tokens, cols, 0, rows);
  // Split the rows in two uneven ranges, as the thread pool does.
  const int64_t mid = rows / 3;
  matmul(got.data(), rows, x.data(), w, t, tokens, cols, 0, mid);
  matmul(got.data(), rows, x.data(), w, t, tokens, cols, mid, rows);
  for (size_t i = 0; i < ref.size(); ++i) {
    // Sums of `cols` products of N(0,1) values: the summation order changes the
    // result by a few ulps of the partial sums, ~1e-6 * sqrt(cols) relative.
    const double tol = 1e-5 * std::sqrt(static_cast<double>(cols)) * (1.0 + std::abs(ref[i]));
    QVERIFY2(std::abs(ref[i] - got[i]) <= tol,
             ("matmul mismatch rows " + std::to_string(rows) + " cols " + std::to_string(cols) + " tokens " +
              std::to_string(tokens) + " at " + std::to_string(i)).c_str());
  }
}

}  // namespace

GB_TEST(matmul_simd_matches_reference_awkward_sizes) {
  // Without AVX2/FMA/F16C matmul() is the reference: comparing it with itself proves nothing.
  if (!matmul_has_simd())
    QSKIP("SIMD off (no AVX2/FMA/F16C, or GLASSBOX_CPU_ISA=scalar): matmul runs the reference");
  for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16})
    for (int64_t rows : {1, 3, 4, 5, 67, 172})
      for (int64_t cols : {1, 7, 8, 9, 64, 172, 301})
        for (int64_t tokens : {1, 2, 3, 4, 7}) {
          check_matmul(t, rows, cols, tokens);
          if (QTest::currentTestFailed()) return;
        }
}

// The bandwidth probe's read (the widest level this processor runs): every
// element counted once, whatever the length's remainder after the unrolled steps.
GB_TEST(read_sum_counts_every_element) {
  for (int64_t n : {32, 64, 96, 1024, 4096 + 32, 100000}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 7) + 1.0f;  // small integers: exact sums
    double want = 0;
    for (float f : v) want += f;
    QCOMPARE(static_cast<double>(gb::kernels::read_sum(v.data(), n)), want);
  }
}

GB_TEST(f16_conversion_known_values_and_round_trip) {
  QCOMPARE(f16_to_f32(0x3c00), 1.0f);
  QCOMPARE(f16_to_f32(0xc000), -2.0f);
  QCOMPARE(f16_to_f32(0x7bff), 65504.0f);
  QCOMPARE(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  QCOMPARE(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  QVERIFY(std::isinf(f16_to_f32(0x7c00)));
  QVERIFY(std::isnan(f16_to_f32(0x7e00)));
  // Every finite half converts to float and back to the same bits.
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7c00u) == 0x7c00u) continue;  // inf/nan
    QCOMPARE(static_cast<uint32_t>(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h)))), h);
  }
  // Round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  QCOMPARE(static_cast<uint32_t>(f32_to_f16(1.0f + std::ldexp(1.0f, -11))), 0x3c00u);
  QCOMPARE(static_cast<uint32_t>(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11))), 0x3c02u);
  QCOMPARE(static_cast<uint32_t>(f32_to_f16(1e6f)), 0x7c00u);
}

GB_TEST(bf16_conversion_rounds_to_nearest_even) {
  QCOMPARE(bf16_to_f32(0x3f80), 1.0f);
  QCOMPARE(static_cast<uint32_t>(f32_to_bf16(1.0f)), 0x3f80u);
  QCOMPARE(static_cast<uint32_t>(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 0x3f80u);      // tie -> even
  QCOMPARE(static_cast<uint32_t>(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 0x3f82u);  // tie -> even (up)
}

GB_TEST(rmsnorm_matches_formula) {
  const float x[3] = {1.0f, -2.0f, 2.0f};
  const float w[3] = {1.0f, 0.5f, 2.0f};
  float out[3];
  rmsnorm(out, x, w, 3, 0.0f);  // mean(x^2) = 3, so x / sqrt(3)
  const float s = 1.0f / std::sqrt(3.0f);
  QVERIFY(std::abs(out[0] - s) < 1e-6f);
  QVERIFY(std::abs(out[1] + 2.0f * 0.5f * s) < 1e-6f);
  QVERIFY(std::abs(out[2] - 4.0f * s) < 1e-6f);
}

// Angles worked out once (rope_angles / rope_angles_ex) and applied with
// rope_rotate give rope() / rope_ex()'s bits: the CPU backend forms them once
// per step and reuses them for every layer's q and k. Heads of 64 with 48 or 64
// rotated dims, both pairings, frequency factors, linear scaling and the
// attention factor, at positions up to 100000.
GB_TEST(rope_angles_then_rotate_equal_rope_bit_for_bit) {
  const int32_t heads = 3, head_dim = 64;
  const auto factors = gbtest::random_normals(32, 71, 0.3f);
  std::vector<float> f(32);
  for (size_t i = 0; i < 32; ++i) f[i] = 1.0f + std::abs(factors[i]);
  for (const int32_t pos : {0, 1, 7, 511, 4097, 100000}) {
    for (const int32_t rope_dim : {48, 64}) {
      const auto v0 = gbtest::random_normals(static_cast<size_t>(heads * head_dim), 70u + static_cast<uint32_t>(pos));
      std::vector<float> a = v0, b = v0, cs(static_cast<size_t>(rope_dim / 2)), sn(cs.size());
      rope(a.data(), heads, head_dim, rope_dim, pos, 10000.0f);
      rope_angles(pos, 10000.0f, rope_dim, cs.data(), sn.data());
      rope_rotate(b.data(), heads, head_dim, rope_dim, RopeStyle::Adjacent, cs.data(), sn.data());
      QVERIFY2(a == b, ("plain rope, pos " + std::to_string(pos)).c_str());
      for (const RopeStyle style : {RopeStyle::Adjacent, RopeStyle::NeoX}) {
        RopeParams p;
        p.rope_dim = rope_dim;
        p.base = 500000.0f;
        p.style = style;
        p.freq_factors = f.data();
        p.freq_scale = 0.125f;
        p.attn_factor = 1.19f;
        a = v0;
        b = v0;
        rope_ex(a.data(), heads, head_dim, pos, p);
        rope_angles_ex(pos, p, cs.data(), sn.data());
        rope_rotate(b.data(), heads, head_dim, rope_dim, style, cs.data(), sn.data());
        QVERIFY2(a == b, ("rope_ex, pos " + std::to_string(pos)).c_str());
        QVERIFY(a != v0 || pos == 0);
      }
    }
  }
}

GB_TEST(rope_rotates_adjacent_pairs) {
  // One head of 4 dims, position 3, base 10000: pair 0 turns by 3 rad, pair 1 by 3/100 rad.
  float v[4] = {1.0f, 0.0f, 0.0f, 1.0f};
  rope(v, 1, 4, 4, 3, 10000.0f);
  QVERIFY(std::abs(v[0] - std::cos(3.0f)) < 1e-6f && std::abs(v[1] - std::sin(3.0f)) < 1e-6f);
  QVERIFY(std::abs(v[2] + std::sin(0.03f)) < 1e-6f && std::abs(v[3] - std::cos(0.03f)) < 1e-6f);
  // Position 0 is the identity.
  float u[4] = {0.3f, -0.7f, 1.5f, 2.0f};
  rope(u, 1, 4, 4, 0, 10000.0f);
  QCOMPARE(u[0], 0.3f);
  QCOMPARE(u[3], 2.0f);
}

GB_TEST(paged_attention_matches_contiguous_formula) {
  // 2 kv heads of dim 5, 37 positions spread over blocks of 4 in scrambled order.
  const int32_t kv_heads = 2, d = 5, ctx = 37, bs = 4, nblocks = 12;
  const auto k = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 5);
  const auto v = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 6);
  const auto q = gbtest::random_normals(static_cast<size_t>(d), 7);
  const std::vector<int32_t> table = {11, 3, 7, 0, 9, 1, 5, 10, 2, 8};
  PagedKvView kv{k.data(), v.data(), table.data(), bs, kv_heads, d};
  std::vector<float> scores(ctx), out(d);
  paged_attention_head(out.data(), q.data(), kv, 1, ctx, scores.data());
  // Direct formula in double.
  std::vector<double> s(ctx);
  double m = -1e30, z = 0;
  for (int32_t t = 0; t < ctx; ++t) {
    const int64_t base = ((int64_t{table[static_cast<size_t>(t / bs)]} * bs + t % bs) * kv_heads + 1) * d;
    double dot = 0;
    for (int32_t i = 0; i < d; ++i) dot += double{q[static_cast<size_t>(i)]} * k[static_cast<size_t>(base + i)];
    s[static_cast<size_t>(t)] = dot / std::sqrt(double{d});
    m = std::max(m, s[static_cast<size_t>(t)]);
  }
  for (auto& x : s) z += x = std::exp(x - m);
  for (int32_t i = 0; i < d; ++i) {
    double o = 0;
    for (int32_t t = 0; t < ctx; ++t) {
      const int64_t base = ((int64_t{table[static_cast<size_t>(t / bs)]} * bs + t % bs) * kv_heads + 1) * d;
      o += s[static_cast<size_t>(t)] / z * v[static_cast<size_t>(base + i)];
    }
    QVERIFY(std::abs(o - out[static_cast<size_t>(i)]) < 1e-5);
  }
}

// The grouped kernel (a GQA group at several positions reading each K/V row
// once) gives every query exactly what it gets alone, whatever the others in
// the call see (causal ends, sliding-window starts, softcap), and stays close
// to the scalar reference.
GB_TEST(paged_attention_group_equals_each_query_alone) {
  const int32_t kv_heads = 3, d = 16, bs = 4, nblocks = 14, group = 4, positions = 9, base_pos = 40;
  const auto k = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 41, 2.0f);
  const auto v = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 42);
  const auto q = gbtest::random_normals(static_cast<size_t>(positions * group * d), 43, 2.0f);
  const std::vector<int32_t> table = {13, 4, 9, 0, 11, 2, 7, 12, 1, 8, 5, 10, 3, 6};
  PagedKvView kv{k.data(), v.data(), table.data(), bs, kv_heads, d};
  for (const float cap : {0.0f, 2.5f}) {
    for (const int32_t window : {0, 7}) {
      std::vector<AttentionQuery> queries;
      std::vector<float> out(static_cast<size_t>(positions * group * d), -1.0f);
      for (int32_t p = 0; p < positions; ++p)
        for (int32_t g = 0; g < group; ++g) {
          const int32_t pos = base_pos + p, j = p * group + g;
          const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
          queries.push_back({q.data() + j * d, out.data() + j * d, first, pos + 1});
        }
      const int32_t stride = base_pos + positions;
      std::vector<float> scores(queries.size() * static_cast<size_t>(stride));
      paged_attention_group(queries.data(), static_cast<int32_t>(queries.size()), kv, 2, 0.0f, cap, scores.data(),
                            stride);
      std::vector<float> alone(d), ref(d), one_scores(static_cast<size_t>(stride));
      for (const AttentionQuery& qj : queries) {
        const AttentionShape shape{qj.first, 0.0f, cap};
        paged_attention_head_ex(alone.data(), qj.q, kv, 2, qj.num_ctx, shape, one_scores.data());
        QVERIFY2(std::memcmp(alone.data(), qj.out, sizeof(float) * d) == 0, "a query differs from itself alone");
        paged_attention_head_ex_reference(ref.data(), qj.q, kv, 2, qj.num_ctx, shape, one_scores.data());
        for (int32_t i = 0; i < d; ++i) QVERIFY(std::abs(ref[static_cast<size_t>(i)] - qj.out[i]) < 1e-5f);
      }
    }
  }
}

GB_TEST(paged_attention_window_scale_and_softcap_match_formula) {
  // Positions first..ctx-1 only, scores x scale, then cap * tanh(s / cap), in double.
  const int32_t kv_heads = 2, d = 8, ctx = 29, bs = 4, nblocks = 9, first = 17;
  const float scale = 0.3f, cap = 1.5f;
  const auto k = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 31, 3.0f);
  const auto v = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 32);
  const auto q = gbtest::random_normals(static_cast<size_t>(d), 33, 3.0f);
  const std::vector<int32_t> table = {8, 3, 7, 0, 6, 1, 5, 2};
  PagedKvView kv{k.data(), v.data(), table.data(), bs, kv_heads, d};
  std::vector<float> scores(ctx), out(d);
  paged_attention_head_ex(out.data(), q.data(), kv, 0, ctx, AttentionShape{first, scale, cap}, scores.data());
  const auto at = [&](int32_t t) { return ((int64_t{table[static_cast<size_t>(t / bs)]} * bs + t % bs) * kv_heads) * d; };
  std::vector<double> s;
  double m = -1e30, z = 0;
  for (int32_t t = first; t < ctx; ++t) {
    double dot = 0;
    for (int32_t i = 0; i < d; ++i) dot += double{q[static_cast<size_t>(i)]} * k[static_cast<size_t>(at(t) + i)];
    s.push_back(cap * std::tanh(dot * scale / cap));
    m = std::max(m, s.back());
  }
  for (auto& x : s) z += x = std::exp(x - m);
  for (int32_t i = 0; i < d; ++i) {
    double o = 0;
    for (int32_t t = first; t < ctx; ++t) o += s[static_cast<size_t>(t - first)] / z * v[static_cast<size_t>(at(t) + i)];
    QVERIFY(std::abs(o - out[static_cast<size_t>(i)]) < 1e-5);
  }
  // With the defaults it is the plain kernel, bit for bit.
  std::vector<float> a(d), b(d);
  paged_attention_head_ex(a.data(), q.data(), kv, 1, ctx, AttentionShape{}, scores.data());
  paged_attention_head(b.data(), q.data(), kv, 1, ctx, scores.data());
  QVERIFY(a == b);
}

GB_TEST(paged_attention_sink_matches_formula) {
  // gpt-oss's attention sink: the weights are e^(s_t - m) / (sum e^(s - m) + e^(sink - m)),
  // in double, at every kernel level this CPU runs (head_dim 32: the SIMD kernels).
  const int32_t kv_heads = 1, d = 32, ctx = 23, bs = 4, nblocks = 6, first = 5;
  const auto k = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 41, 0.5f);
  const auto v = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 42);
  const auto q = gbtest::random_normals(static_cast<size_t>(d), 43, 0.5f);
  const std::vector<int32_t> table = {5, 2, 4, 0, 3, 1};
  PagedKvView kv{k.data(), v.data(), table.data(), bs, kv_heads, d};
  const auto at = [&](int32_t t) { return (int64_t{table[static_cast<size_t>(t / bs)]} * bs + t % bs) * d; };
  for (const float sink : {-3.0f, 0.7f, 9.0f}) {
    std::vector<double> s;
    double m = sink, z = 0;
    for (int32_t t = first; t < ctx; ++t) {
      double dot = 0;
      for (int32_t i = 0; i < d; ++i) dot += double{q[static_cast<size_t>(i)]} * k[static_cast<size_t>(at(t) + i)];
      s.push_back(dot / std::sqrt(double{d}));
      m = std::max(m, s.back());
    }
    for (auto& x : s) z += x = std::exp(x - m);
    z += std::exp(sink - m);
    std::vector<double> want(d, 0.0);
    for (int32_t i = 0; i < d; ++i)
      for (int32_t t = first; t < ctx; ++t) want[static_cast<size_t>(i)] += s[static_cast<size_t>(t - first)] / z * v[static_cast<size_t>(at(t) + i)];
    for (const Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (!isa_supported(isa)) continue;
      std::vector<float> scores(ctx), out(d);
      const AttentionQuery one{q.data(), out.data(), first, ctx, sink};
      paged_attention_group_with(isa, &one, 1, kv, 0, 0.0f, 0.0f, scores.data(), ctx);
      for (int32_t i = 0; i < d; ++i)
        QVERIFY2(std::abs(want[static_cast<size_t>(i)] - out[static_cast<size_t>(i)]) < 1e-5,
                 ("sink " + std::to_string(sink) + " level " + std::to_string(static_cast<int>(isa))).c_str());
    }
  }
}

GB_TEST(paged_attention_ex_simd_matches_reference) {
  if (!matmul_has_simd())
    QSKIP("SIMD off (no AVX2/FMA/F16C, or GLASSBOX_CPU_ISA=scalar): paged attention runs the reference");
  for (int32_t d : {8, 32, 128}) {
    for (int32_t ctx : {1, 9, 40, 300}) {
      const int32_t kv_heads = 2, bs = 16, nblocks = (ctx + bs - 1) / bs + 1;
      const auto k = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 51u + static_cast<uint32_t>(d), 2.0f);
      const auto v = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 52u + static_cast<uint32_t>(ctx));
      const auto q = gbtest::random_normals(static_cast<size_t>(d), 53, 2.0f);
      std::vector<int32_t> table(static_cast<size_t>(nblocks));
      for (int32_t i = 0; i < nblocks; ++i) table[static_cast<size_t>(i)] = (i * 3 + 2) % nblocks;
      PagedKvView kv{k.data(), v.data(), table.data(), bs, kv_heads, d};
      const AttentionShape shape{std::max(0, ctx - 7), 0.0625f, 5.0f};
      std::vector<float> s1(static_cast<size_t>(ctx)), s2(static_cast<size_t>(ctx)), o1(static_cast<size_t>(d)),
          o2(static_cast<size_t>(d));
      paged_attention_head_ex(o1.data(), q.data(), kv, 1, ctx, shape, s1.data());
      paged_attention_head_ex_reference(o2.data(), q.data(), kv, 1, ctx, shape, s2.data());
      for (int32_t i = 0; i < d; ++i)
        QVERIFY2(std::abs(o1[static_cast<size_t>(i)] - o2[static_cast<size_t>(i)]) <= 2e-5f,
                 ("windowed attention d " + std::to_string(d) + " ctx " + std::to_string(ctx)).c_str());
    }
  }
}

GB_TEST(gelu_tanh_gated_and_softcap_match_formula) {
  const auto g = gbtest::random_normals(64, 41, 4.0f), u = gbtest::random_normals(64, 42);
  std::vector<float> out(64);
  gelu_tanh_gated(out.data(), g.data(), u.data(), 64);
  for (size_t i = 0; i < 64; ++i) {
    const double x = g[i];
    const double want = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
    QVERIFY(std::abs(want - out[i]) < 1e-5 * (1.0 + std::abs(want)));
  }
  std::vector<float> x = {-100.0f, -1.0f, 0.0f, 2.0f, 1e4f};
  softcap_inplace(x.data(), 5, 30.0f);
  QVERIFY(std::abs(x[0] + 30.0f * std::tanh(100.0f / 30.0f)) < 1e-4f && x[2] == 0.0f && std::abs(x[4] - 30.0f) < 1e-4f);
}

GB_TEST(paged_attention_simd_matches_reference) {
  if (!matmul_has_simd())
    QSKIP("SIMD off (no AVX2/FMA/F16C, or GLASSBOX_CPU_ISA=scalar): paged attention runs the reference");
  for (int32_t d : {8, 16, 64, 128}) {
    for (int32_t ctx : {1, 7, 16, 33, 300}) {
      const int32_t kv_heads = 3, bs = 16, nblocks = (ctx + bs - 1) / bs + 2;
      const auto k = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 11u + static_cast<uint32_t>(d));
      const auto v = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 12u + static_cast<uint32_t>(ctx));
      const auto q = gbtest::random_normals(static_cast<size_t>(d), 13);
      std::vector<int32_t> table(static_cast<size_t>(nblocks));
      for (int32_t i = 0; i < nblocks; ++i) table[static_cast<size_t>(i)] = (i * 5 + 1) % nblocks;  // scrambled
      PagedKvView kv{k.data(), v.data(), table.data(), bs, kv_heads, d};
      std::vector<float> s1(static_cast<size_t>(ctx)), s2(static_cast<size_t>(ctx)), o1(static_cast<size_t>(d)),
          o2(static_cast<size_t>(d));
      paged_attention_head(o1.data(), q.data(), kv, 2, ctx, s1.data());
      paged_attention_head_reference(o2.data(), q.data(), kv, 2, ctx, s2.data());
      for (int32_t i = 0; i < d; ++i)  // outputs are convex combinations of N(0,1) values
        QVERIFY2(std::abs(o1[static_cast<size_t>(i)] - o2[static_cast<size_t>(i)]) <= 2e-5f,
                 ("attention d " + std::to_string(d) + " ctx " + std::to_string(ctx)).c_str());
    }
  }
}

GB_TEST(swiglu_simd_matches_reference) {
  if (!matmul_has_simd())
    QSKIP("SIMD off (no AVX2/FMA/F16C, or GLASSBOX_CPU_ISA=scalar): swiglu runs the reference");
  for (int64_t n : {1, 7, 8, 9, 172, 2048, 5632}) {
    auto g = gbtest::random_normals(static_cast<size_t>(n), 21u + static_cast<uint32_t>(n), 6.0f);
    const auto u = gbtest::random_normals(static_cast<size_t>(n), 22u + static_cast<uint32_t>(n));
    if (n > 8) {  // extremes: saturation on both sides must stay finite and exact in the limit
      g[0] = -100.0f;
      g[1] = 100.0f;
      g[2] = 0.0f;
    }
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    swiglu(a.data(), g.data(), u.data(), n);
    swiglu_reference(b.data(), g.data(), u.data(), n);
    for (size_t i = 0; i < a.size(); ++i) {
      QVERIFY(std::isfinite(a[i]));
      QVERIFY2(std::abs(a[i] - b[i]) <= 2e-6f * std::abs(b[i]) + 1e-30f,
               ("swiglu n " + std::to_string(n) + " at " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " +
                std::to_string(b[i])).c_str());
    }
  }
}

// The sampler record's softmax sums (exp_sums.h): the AVX2 path against the
// double-exp oracle on awkward lengths, both strides ({id, logit} pairs), -inf
// entries and terms far below the maximum; max_strided and skip_below exactly.
// The sampler's input check: the first NaN or +inf (not below +inf), at every
// position of the vector loops and their tails, with -inf (which is below)
// around it; and limits other than +inf.
GB_TEST(find_not_below_matches_reference) {
  if (!exp_sums_has_simd(1)) QSKIP("SIMD off (no AVX2/FMA, or GLASSBOX_CPU_ISA=scalar): only the reference runs");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {0, 1, 7, 8, 31, 32, 33, 100, 32000}) {
    auto x = gbtest::random_normals(static_cast<size_t>(n), 7u + static_cast<uint32_t>(n), 4.0f);
    for (int64_t i = 0; i < n; i += 5) x[static_cast<size_t>(i)] = -INFINITY;
    QCOMPARE(find_not_below(x.data(), n, INFINITY), n);
    QCOMPARE(find_not_below(x.data(), n, 1.0f), find_not_below_reference(x.data(), n, 1.0f));
    for (int64_t at = 0; at < n; at += n > 100 ? 997 : 1) {
      for (float bad : {nan, INFINITY}) {
        auto y = x;
        y[static_cast<size_t>(at)] = bad;
        if (at + 3 < n) y[static_cast<size_t>(at + 3)] = nan;  // a later one does not matter
        QCOMPARE(find_not_below(y.data(), n, INFINITY), at);
        QCOMPARE(find_not_below_reference(y.data(), n, INFINITY), at);
      }
    }
  }
}

// The sampler's candidate array: every logit but -inf, in order, with its id;
// -inf anywhere in a vector chunk, in the tail, everywhere or nowhere.
GB_TEST(fill_id_logit_pairs_matches_reference) {
  if (!exp_sums_has_simd(1)) QSKIP("SIMD off (no AVX2/FMA, or GLASSBOX_CPU_ISA=scalar): only the reference runs");
  std::mt19937 rng(20261202);
  for (int64_t n : {0, 1, 7, 8, 9, 16, 31, 32000, 32003}) {
    for (int masking : {0, 1, 2, 3}) {  // none, sparse, dense, all
      auto x = gbtest::random_normals(static_cast<size_t>(n), 11u + static_cast<uint32_t>(n), 4.0f);
      for (int64_t i = 0; i < n; ++i) {
        const bool masked = masking == 3 || (masking == 1 && rng() % 97 == 0) || (masking == 2 && rng() % 3 == 0);
        if (masked) x[static_cast<size_t>(i)] = -INFINITY;
      }
      std::vector<float> a(static_cast<size_t>(2 * n + 2), 7.0f), b(a);
      const int64_t ka = fill_id_logit_pairs(x.data(), n, a.data());
      const int64_t kb = fill_id_logit_pairs_reference(x.data(), n, b.data());
      const std::string where = "n " + std::to_string(n) + " masking " + std::to_string(masking);
      QVERIFY2(ka == kb, where.c_str());
      QVERIFY2(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0, where.c_str());  // nothing past the count
      if (masking == 0) QCOMPARE(ka, n);
      if (masking == 3) QCOMPARE(ka, int64_t{0});
      for (int64_t j = 0; j < kb; ++j) {
        int32_t id = 0;
        std::memcpy(&id, b.data() + 2 * j, sizeof id);
        QVERIFY2(id >= 0 && id < n && b[static_cast<size_t>(2 * j + 1)] == x[static_cast<size_t>(id)], where.c_str());
      }
    }
  }
}

GB_TEST(exp_sums_simd_matches_reference) {
  if (!exp_sums_has_simd(1) || !exp_sums_has_simd(2))
    QSKIP("SIMD off (no AVX2/FMA, or GLASSBOX_CPU_ISA=scalar): exp_sums runs the reference");
  for (int64_t n : {1, 7, 8, 9, 17, 255, 32000, 32003}) {
    for (int64_t stride : {1, 2}) {
      auto x = gbtest::random_normals(static_cast<size_t>(n * stride), 31u + static_cast<uint32_t>(n + stride), 4.0f);
      for (int64_t i = 0; i < n; i += 13) x[static_cast<size_t>(i * stride + stride - 1)] = -INFINITY;
      if (n > 20) x[static_cast<size_t>(5 * stride + stride - 1)] = -120.0f;  // e^-120: below the floor in both
      const float* first = stride == 2 ? x.data() + 1 : x.data();  // pairs: the logit after the "id"
      const int64_t count = stride == 2 ? n - 1 : n;  // pairs keep an id before each logit
      const float m = max_strided(first, count, stride);
      QCOMPARE(m, max_strided_reference(first, count, stride));
      const ExpSums a = exp_sums(first, count, stride, m), b = exp_sums_reference(first, count, stride, m);
      const std::string where = "n " + std::to_string(n) + " stride " + std::to_string(stride);
      QVERIFY2(std::abs(a.z - b.z) <= 1e-6 * b.z, (where + ": z " + std::to_string(a.z) + " vs " + std::to_string(b.z)).c_str());
      QVERIFY2(std::abs(a.weighted - b.weighted) <= 1e-6 * std::abs(b.weighted) + 1e-9 * b.z,
               (where + ": weighted " + std::to_string(a.weighted) + " vs " + std::to_string(b.weighted)).c_str());
      for (const float t : {m, m - 1.0f, 0.0f, m + 1.0f})
        for (int64_t from : {int64_t{0}, count / 3, count}) {
          const int64_t r = skip_below(first, count, stride, std::min(from, count), t);
          const int64_t exact = skip_below_reference(first, count, stride, std::min(from, count), t);
          QVERIFY2(r <= exact && (r == count || exact < r + 8), (where + ": skip_below").c_str());
        }
    }
  }
}
