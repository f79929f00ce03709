// Element-wise and per-row CUDA kernels against scalar host references written
// here from the formulas (double accumulation where it matters), on seeded random
// inputs with awkward sizes (odd widths, widths above one block, one-row cases).
//
// Tolerances (inputs are O(1)):
//   embedding gather, F16/BF16 cast .......... exact (both are exact conversions / RNE)
//   rmsnorm .................................. 2e-6 abs
//   rope (positions < 512) ................... 2e-4 abs: the angle pos * freq is a
//       float32 product as in run.c, and device powf/cosf may differ from the
//       host's by a few ulp, i.e. up to ~1e-4 rad at position 500
//   kv write ................................. exact
//   swiglu ................................... 1e-6 abs
//   head rmsnorm ............................. 2e-6 abs (kernels/cpu rmsnorm per head as oracle)
//   bias add, scale .......................... exact (one float add / multiply)
//   logits summary ........................... top ids/logits exact; normaliser and
//       entropy 1e-5 relative to a double-precision reference
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cpu/convert.h"
#include "cpu/ops.h"
#include "cuda/cuda_kernels.h"
#include "cuda_test_support.h"
#include "gb_test.h"

using gbtest::cuda::compare;
using gbtest::cuda::DeviceArray;
using gbtest::cuda::random_floats;

namespace {

std::vector<int32_t> random_ids(size_t n, int32_t bound, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, bound - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

void check_embedding(gb::cuda::WeightType dtype) {
  const int32_t vocab = 111, dim = 259, num_tokens = 13;
  const std::vector<float> table_f32 = random_floats(size_t{vocab} * dim, 7);
  // Storage as the model file would hold it, and its exact float value.
  std::vector<uint16_t> table16(table_f32.size());
  std::vector<float> exact(table_f32.size());
  for (size_t i = 0; i < table_f32.size(); ++i) {
    if (dtype == gb::cuda::WeightType::F16) {
      table16[i] = gb::kernels::f32_to_f16(table_f32[i]);
      exact[i] = gb::kernels::f16_to_f32(table16[i]);
    } else if (dtype == gb::cuda::WeightType::BF16) {
      table16[i] = gb::kernels::f32_to_bf16(table_f32[i]);
      exact[i] = gb::kernels::bf16_to_f32(table16[i]);
    } else {
      exact[i] = table_f32[i];
    }
  }
  const std::vector<int32_t> ids = random_ids(num_tokens, vocab, 3);
  DeviceArray<int32_t> d_ids(ids);
  DeviceArray<float> d_f32(table_f32);
  DeviceArray<uint16_t> d_16(table16);
  DeviceArray<float> d_out(size_t{num_tokens} * dim);
  const void* table = dtype == gb::cuda::WeightType::F32 ? static_cast<const void*>(d_f32.get()) : d_16.get();
  GB_CUDA_OK(gb::cuda::launch_embedding(d_ids.get(), num_tokens, table, dtype, dim, d_out.get(), nullptr));
  std::vector<float> ref(size_t{num_tokens} * dim);
  for (int32_t t = 0; t < num_tokens; ++t)
    std::copy_n(exact.begin() + int64_t{ids[t]} * dim, dim, ref.begin() + int64_t{t} * dim);
  const auto d = compare(ref, d_out.download());
  QVERIFY2(d.max_abs == 0.0, d.describe().c_str());
}

}  // namespace

GB_TEST(embedding_gathers_rows_exactly_f32) { check_embedding(gb::cuda::WeightType::F32); }
GB_TEST(embedding_gathers_rows_exactly_f16) { check_embedding(gb::cuda::WeightType::F16); }
GB_TEST(embedding_gathers_rows_exactly_bf16) { check_embedding(gb::cuda::WeightType::BF16); }

GB_TEST(cast_rounds_to_nearest_even_like_the_host) {
  const size_t n = 100003;
  std::vector<float> x = random_floats(n, 11, -70000.0f, 70000.0f);  // includes F16 overflow to inf
  for (size_t i = 0; i < 1000; ++i) x[i] *= 1e-6f;                    // and F16 subnormals
  DeviceArray<float> d_x(x);
  DeviceArray<uint16_t> d_h(n), d_b(n);
  GB_CUDA_OK(gb::cuda::launch_cast(d_x.get(), static_cast<int64_t>(n), d_h.get(), gb::cuda::WeightType::F16, nullptr));
  GB_CUDA_OK(gb::cuda::launch_cast(d_x.get(), static_cast<int64_t>(n), d_b.get(), gb::cuda::WeightType::BF16, nullptr));
  const auto h = d_h.download(), b = d_b.download();
  for (size_t i = 0; i < n; ++i) {
    QCOMPARE(h[i], gb::kernels::f32_to_f16(x[i]));
    QCOMPARE(b[i], gb::kernels::f32_to_bf16(x[i]));
  }
}

GB_TEST(rmsnorm_matches_formula_with_row_gather) {
  const int32_t dim = 1031, num_in = 9;
  const std::vector<float> x = random_floats(size_t{num_in} * dim, 5, -3.0f, 3.0f);
  const std::vector<float> w = random_floats(dim, 6, 0.5f, 1.5f);
  const std::vector<int32_t> rows = {8, 0, 3, 3};
  const float eps = 1e-5f;
  DeviceArray<float> d_x(x), d_w(w), d_out(rows.size() * dim), d_all(size_t{num_in} * dim);
  DeviceArray<int32_t> d_rows(rows);
  GB_CUDA_OK(gb::cuda::launch_rmsnorm(d_x.get(), d_rows.get(), static_cast<int32_t>(rows.size()), dim, d_w.get(), eps,
                                      d_out.get(), nullptr));
  GB_CUDA_OK(gb::cuda::launch_rmsnorm(d_x.get(), nullptr, num_in, dim, d_w.get(), eps, d_all.get(), nullptr));
  auto reference = [&](const std::vector<int32_t>& which) {
    std::vector<float> ref;
    for (int32_t r : which) {
      double ss = 0.0;
      for (int32_t i = 0; i < dim; ++i) ss += double{x[static_cast<size_t>(r) * dim + i]} * x[static_cast<size_t>(r) * dim + i];
      const double scale = 1.0 / std::sqrt(ss / dim + eps);
      for (int32_t i = 0; i < dim; ++i) ref.push_back(static_cast<float>(w[i] * x[static_cast<size_t>(r) * dim + i] * scale));
    }
    return ref;
  };
  std::vector<int32_t> all(num_in);
  std::iota(all.begin(), all.end(), 0);
  const auto d1 = compare(reference(rows), d_out.download());
  QVERIFY2(d1.max_abs <= 2e-6, d1.describe().c_str());
  const auto d2 = compare(reference(all), d_all.download());
  QVERIFY2(d2.max_abs <= 2e-6, d2.describe().c_str());
}

GB_TEST(rope_rotates_adjacent_pairs_of_the_first_rope_dims) {
  // q part and k part of a fused row, as the backend lays them out; partial rope.
  const int32_t num_tokens = 7, num_heads = 3, head_dim = 12, rope_dim = 8;
  const int64_t stride = int64_t{num_heads} * head_dim + 5;  // padding after the heads stays untouched
  const float base = 10000.0f;
  const std::vector<float> x = random_floats(static_cast<size_t>(num_tokens * stride), 9);
  const std::vector<int32_t> pos = {0, 1, 2, 17, 100, 255, 511};
  DeviceArray<float> d_x(x);
  DeviceArray<int32_t> d_pos(pos);
  GB_CUDA_OK(gb::cuda::launch_rope(d_x.get(), num_tokens, stride, num_heads, head_dim, rope_dim, base, d_pos.get(),
                                   nullptr));
  std::vector<float> ref = x;
  for (int32_t t = 0; t < num_tokens; ++t)
    for (int32_t h = 0; h < num_heads; ++h)
      for (int32_t i = 0; i < rope_dim / 2; ++i) {
        const double angle = double{static_cast<float>(pos[t]) * (1.0f / std::pow(base, 2.0f * i / rope_dim))};
        float* p = ref.data() + t * stride + h * head_dim + 2 * i;
        const double x0 = p[0], x1 = p[1];
        p[0] = static_cast<float>(x0 * std::cos(angle) - x1 * std::sin(angle));
        p[1] = static_cast<float>(x0 * std::sin(angle) + x1 * std::cos(angle));
      }
  const auto got = d_x.download();
  const auto d = compare(ref, got);
  QVERIFY2(d.max_abs <= 2e-4, d.describe().c_str());
  // Position 0 is the identity and the dims past rope_dim and the padding are untouched.
  for (int64_t i = 0; i < stride; ++i) QCOMPARE(got[static_cast<size_t>(i)], x[static_cast<size_t>(i)]);
  for (int32_t t = 0; t < num_tokens; ++t) {
    for (int32_t h = 0; h < num_heads; ++h)
      for (int32_t i = rope_dim; i < head_dim; ++i)
        QCOMPARE(got[static_cast<size_t>(t * stride + h * head_dim + i)], x[static_cast<size_t>(t * stride + h * head_dim + i)]);
    for (int64_t i = int64_t{num_heads} * head_dim; i < stride; ++i)
      QCOMPARE(got[static_cast<size_t>(t * stride + i)], x[static_cast<size_t>(t * stride + i)]);
  }
}

GB_TEST(kv_write_puts_rows_in_their_slots_and_nowhere_else) {
  const int32_t num_tokens = 5, kv_dim = 24, num_slots = 64;
  const int64_t stride = 3 * kv_dim;
  const std::vector<float> qkv = random_floats(static_cast<size_t>(num_tokens * stride), 13);
  const std::vector<int32_t> slot_ids = {63, 0, 17, 18, 40};
  DeviceArray<float> d_qkv(qkv), d_k(size_t{num_slots} * kv_dim), d_v(size_t{num_slots} * kv_dim);
  DeviceArray<int32_t> d_slot_ids(slot_ids);
  GB_CUDA_OK(gb::cuda::launch_kv_write(d_qkv.get() + kv_dim, d_qkv.get() + 2 * kv_dim, stride, num_tokens, kv_dim,
                                       d_slot_ids.get(), d_k.get(), d_v.get(), nullptr));
  std::vector<float> ref_k(size_t{num_slots} * kv_dim, 0.0f), ref_v = ref_k;
  for (int32_t t = 0; t < num_tokens; ++t)
    for (int32_t i = 0; i < kv_dim; ++i) {
      ref_k[static_cast<size_t>(slot_ids[t] * kv_dim + i)] = qkv[static_cast<size_t>(t * stride + kv_dim + i)];
      ref_v[static_cast<size_t>(slot_ids[t] * kv_dim + i)] = qkv[static_cast<size_t>(t * stride + 2 * kv_dim + i)];
    }
  QCOMPARE(compare(ref_k, d_k.download()).max_abs, 0.0);
  QCOMPARE(compare(ref_v, d_v.download()).max_abs, 0.0);
}

// Per-head RMSNorm in place on the q and k parts of fused q|k|v rows (strided
// views), against the CPU kernel applied head by head; the v part and the
// padding must stay untouched.
GB_TEST(head_rmsnorm_normalises_each_head_of_a_strided_view) {
  const int32_t tokens = 5, heads = 3, head_dim = 72, stride = heads * head_dim + 40;
  const std::vector<float> x = random_floats(size_t{tokens} * stride, 31, -3.0f, 3.0f);
  const std::vector<float> w = random_floats(head_dim, 32, 0.5f, 1.5f);
  const int32_t offset = 17;  // the view starts inside the row, like k after q
  DeviceArray<float> d_x(x), d_w(w);
  GB_CUDA_OK(gb::cuda::launch_head_rmsnorm(d_x.get() + offset, tokens, stride, heads, head_dim, d_w.get(), 1e-6f,
                                           nullptr));
  std::vector<float> ref = x;
  for (int32_t t = 0; t < tokens; ++t)
    for (int32_t h = 0; h < heads; ++h) {
      float* head = ref.data() + size_t(t) * stride + offset + size_t(h) * head_dim;
      gb::kernels::rmsnorm(head, head, w.data(), head_dim, 1e-6f);
    }
  const auto d = compare(ref, d_x.download());
  QVERIFY2(d.max_abs <= 2e-6, d.describe().c_str());
}

GB_TEST(rmsnorm_in_place_equals_out_of_place) {
  const int32_t dim = 300, rows = 4;
  const std::vector<float> x = random_floats(size_t{rows} * dim, 33, -2.0f, 2.0f);
  const std::vector<float> w = random_floats(dim, 34, 0.5f, 1.5f);
  DeviceArray<float> d_x(x), d_w(w), d_out(x.size());
  GB_CUDA_OK(gb::cuda::launch_rmsnorm(d_x.get(), nullptr, rows, dim, d_w.get(), 1e-5f, d_out.get(), nullptr));
  GB_CUDA_OK(gb::cuda::launch_rmsnorm(d_x.get(), nullptr, rows, dim, d_w.get(), 1e-5f, d_x.get(), nullptr));
  QVERIFY(d_x.download() == d_out.download());
}

GB_TEST(bias_add_on_strided_rows_and_scale_are_exact) {
  const int32_t rows = 6, width = 50, stride = 130;
  const std::vector<float> x = random_floats(size_t{rows} * stride, 35);
  const std::vector<float> b = random_floats(width, 36);
  DeviceArray<float> d_x(x), d_b(b);
  GB_CUDA_OK(gb::cuda::launch_add_bias(d_x.get() + 20, rows, stride, width, d_b.get(), nullptr));
  std::vector<float> ref = x;
  for (int32_t r = 0; r < rows; ++r)
    for (int32_t i = 0; i < width; ++i) ref[size_t(r) * stride + 20 + size_t(i)] += b[size_t(i)];
  QVERIFY(d_x.download() == ref);
  GB_CUDA_OK(gb::cuda::launch_scale(d_x.get(), static_cast<int64_t>(x.size()), 8.0f, nullptr));
  for (float& v : ref) v *= 8.0f;
  QVERIFY(d_x.download() == ref);
}

GB_TEST(swiglu_matches_formula) {
  const int32_t num_tokens = 3, hidden = 1377;
  const std::vector<float> gu = random_floats(size_t{num_tokens} * 2 * hidden, 17, -8.0f, 8.0f);
  DeviceArray<float> d_gu(gu), d_out(size_t{num_tokens} * hidden);
  GB_CUDA_OK(gb::cuda::launch_swiglu(d_gu.get(), num_tokens, hidden, d_out.get(), nullptr));
  std::vector<float> ref;
  for (int32_t t = 0; t < num_tokens; ++t)
    for (int32_t i = 0; i < hidden; ++i) {
      const double g = gu[static_cast<size_t>(t * 2 * hidden + i)], u = gu[static_cast<size_t>(t * 2 * hidden + hidden + i)];
      ref.push_back(static_cast<float>(g / (1.0 + std::exp(-g)) * u));
    }
  const auto d = compare(ref, d_out.download());
  QVERIFY2(d.max_abs <= 1e-5, d.describe().c_str());  // |out| reaches ~64: 1e-5 abs is ~2e-7 relative
}

namespace {

void check_summary(int32_t num_rows, int32_t vocab, int32_t top_n, uint32_t seed) {
  std::vector<float> logits = random_floats(static_cast<size_t>(num_rows) * vocab, seed, -12.0f, 12.0f);
  // Ties across ids: the lower id must come first.
  logits[5] = logits[3] = 30.0f;
  DeviceArray<float> d_logits(logits), d_top(static_cast<size_t>(num_rows) * top_n), d_lse(static_cast<size_t>(num_rows)),
      d_ent(static_cast<size_t>(num_rows));
  DeviceArray<int32_t> d_ids(static_cast<size_t>(num_rows) * top_n);
  GB_CUDA_OK(gb::cuda::launch_logits_summary(d_logits.get(), num_rows, vocab, top_n, d_ids.get(), d_top.get(),
                                             d_lse.get(), d_ent.get(), nullptr));
  const std::vector<int32_t> ids = d_ids.download();
  const std::vector<float> top = d_top.download(), lse = d_lse.download(), ent = d_ent.download();
  for (int32_t r = 0; r < num_rows; ++r) {
    const float* row = logits.data() + static_cast<size_t>(r) * vocab;
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    for (int32_t k = 0; k < top_n; ++k) {
      const size_t at = static_cast<size_t>(r) * top_n + k;
      if (k < vocab) {
        QCOMPARE(ids[at], order[static_cast<size_t>(k)]);
        QCOMPARE(top[at], row[order[static_cast<size_t>(k)]]);
      } else {
        QCOMPARE(ids[at], -1);
      }
    }
    double mx = -INFINITY, z = 0.0, el = 0.0;
    for (int32_t i = 0; i < vocab; ++i) mx = std::max(mx, double{row[i]});
    for (int32_t i = 0; i < vocab; ++i) {
      z += std::exp(row[i] - mx);
      el += std::exp(row[i] - mx) * (row[i] - mx);
    }
    const double ref_lse = mx + std::log(z), ref_ent = std::log(z) - el / z;
    QVERIFY2(std::fabs(lse[static_cast<size_t>(r)] - ref_lse) <= 1e-5 * std::fabs(ref_lse) + 1e-6,
             ("log normaliser " + std::to_string(lse[static_cast<size_t>(r)]) + " vs " + std::to_string(ref_lse)).c_str());
    QVERIFY2(std::fabs(ent[static_cast<size_t>(r)] - ref_ent) <= 1e-5 * std::fabs(ref_ent) + 1e-6,
             ("entropy " + std::to_string(ent[static_cast<size_t>(r)]) + " vs " + std::to_string(ref_ent)).c_str());
  }
}

}  // namespace

GB_TEST(logits_summary_small_vocab_and_ties) { check_summary(3, 111, 10, 21); }
GB_TEST(logits_summary_top_n_beyond_vocab_pads_with_minus_one) { check_summary(2, 7, 12, 22); }
GB_TEST(logits_summary_large_vocab) { check_summary(5, 32003, 40, 23); }
