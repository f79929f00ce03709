// Every kernel level (cpu_info.h: AVX2, AVX-512) that this processor can run,
// called explicitly through matmul_with / matmul_weights_with whatever level
// the process chose, against the scalar reference; a level the processor lacks
// reports a skip. Besides closeness, each level must keep the batching
// invariant the engine relies on: a token's result is the same bits whether it
// is computed alone (decode) or at any position of a prefill batch, and whatever
// row range a thread gets. For quantized weights the integer products are exact,
// so the AVX-512 (VNNI) level must equal the AVX2 level bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/convert.h"
#include "cpu/cpu_info.h"
#include "cpu/decode_prefetch.h"
#include "cpu/kv_type.h"
#include "cpu/matmul.h"
#include "cpu/matmul_quant.h"
#include "cpu/paged_attention.h"
#include "gb_test.h"
#include "kernel_test_data.h"

using namespace gb::kernels;

namespace {


// Weights of a float type (F32, F16, BF16) as stored, plus their float values.
struct FloatWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
FloatWeights float_weights(WeightType t, int64_t n, uint32_t seed) {
  FloatWeights w;
  w.values = gbtest::random_normals(static_cast<size_t>(n), seed);
  const size_t elem = t == WeightType::F32 ? 4 : 2;
  w.bytes.resize(static_cast<size_t>(n) * elem);
  for (int64_t i = 0; i < n; ++i) {
    const float v = w.values[static_cast<size_t>(i)];
    if (t == WeightType::F32) {
      std::memcpy(w.bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = t == WeightType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
      w.values[static_cast<size_t>(i)] = t == WeightType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return w;
}


void check_float_level(Isa isa) {
  for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    for (int64_t cols : {1, 7, 15, 16, 17, 33, 100, 513, 1040}) {
      for (int64_t rows : {1, 3, 4, 5, 17}) {
        for (int64_t tokens : {1, 2, 5, 6, 7, 13}) {
          const FloatWeights w = float_weights(t, rows * cols, static_cast<uint32_t>(rows * 1000 + cols));
          const auto x = gbtest::random_normals(static_cast<size_t>(tokens * cols), static_cast<uint32_t>(tokens + 7 * cols));
          std::vector<float> got(static_cast<size_t>(tokens * rows)), want(got.size());
          matmul_with(isa, got.data(), rows, x.data(), w.bytes.data(), t, tokens, cols, 0, rows);
          matmul_reference(want.data(), rows, x.data(), w.bytes.data(), t, tokens, cols, 0, rows);
          for (int64_t k = 0; k < tokens; ++k)
            for (int64_t r = 0; r < rows; ++r) {
              double mag = 0;
              for (int64_t c = 0; c < cols; ++c)
                mag += std::abs(static_cast<double>(w.values[static_cast<size_t>(r * cols + c)]) *
                                x[static_cast<size_t>(k * cols + c)]);
              const float g = got[static_cast<size_t>(k * rows + r)], e = want[static_cast<size_t>(k * rows + r)];
              QVERIFY2(std::abs(g - e) <= 4e-7 * std::sqrt(static_cast<double>(cols)) * mag + 1e-30,
                       (std::string(isa_name(isa)) + " " + std::string(weight_traits(t).name) + " cols " + std::to_string(cols) +
                        " rows " + std::to_string(rows) + " tokens " + std::to_string(tokens))
                           .c_str());
            }
        }
      }
    }
  }
}

// y(token j alone) == y(token j inside a batch of T at any offset), with rows
// split into ranges the way the thread pool splits them; and across the
// column blocks and row panels of the prefill kernel.
void check_batch_invariance(Isa isa) {
  for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    for (int64_t cols : {48, 1040, 2100}) {
      const int64_t rows = 203;
      const FloatWeights w = float_weights(t, rows * cols, static_cast<uint32_t>(cols));
      const int64_t max_tokens = 13;
      const auto x = gbtest::random_normals(static_cast<size_t>(max_tokens * cols), static_cast<uint32_t>(cols + 1));
      std::vector<float> alone(static_cast<size_t>(max_tokens * rows));
      for (int64_t j = 0; j < max_tokens; ++j)
        matmul_with(isa, alone.data() + j * rows, rows, x.data() + j * cols, w.bytes.data(), t, 1, cols, 0, rows);
      for (int64_t tokens = 2; tokens <= max_tokens; tokens += 3) {
        for (int64_t offset : {int64_t{0}, max_tokens - tokens}) {
          std::vector<float> batch(static_cast<size_t>(tokens * rows));
          // Rows in three uneven ranges, as three threads would get them.
          for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 61}, {61, 62}, {62, rows}})
            matmul_with(isa, batch.data(), rows, x.data() + offset * cols, w.bytes.data(), t, tokens, cols, b, e);
          for (int64_t j = 0; j < tokens; ++j)
            QVERIFY2(std::memcmp(batch.data() + j * rows, alone.data() + (offset + j) * rows,
                                 static_cast<size_t>(rows) * sizeof(float)) == 0,
                     (std::string(isa_name(isa)) + " " + std::string(weight_traits(t).name) + " cols " + std::to_string(cols) +
                      ": token " + std::to_string(offset + j) + " in a batch of " + std::to_string(tokens) +
                      " differs from the token alone")
                         .c_str());
        }
      }
    }
  }
}

const WeightType kLevelQuantTypes[] = {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0,   WeightType::Q5_1,
                                       WeightType::Q8_0, WeightType::Q2_K, WeightType::Q3_K,   WeightType::Q4_K,
                                       WeightType::Q5_K, WeightType::Q6_K, WeightType::IQ4_NL, WeightType::IQ4_XS,
                                       WeightType::MXFP4, WeightType::Q4_K_R, WeightType::Q5_K_R, WeightType::Q6_K_R};

// A quantized level: equal to the AVX2 level bit for bit (same exact integer
// sums, same float steps), close to the reference, and batch-invariant.
void check_quant_level(Isa isa) {
  for (WeightType type : kLevelQuantTypes) {
    const WeightTypeTraits& tr = weight_traits(type);
    for (int64_t cols : {tr.block_elements, 3 * 256, 11 * 256 + (tr.block_elements == 32 ? 96 : 0)}) {
      const int64_t rows = 37, tokens = 9;
      const auto w = gbtest::random_quant_blocks(tr, rows, cols, static_cast<uint32_t>(cols + static_cast<int>(type)));
      const auto xf = gbtest::random_normals(static_cast<size_t>(tokens * cols), static_cast<uint32_t>(cols));
      std::vector<ActBlockQ8> xq(static_cast<size_t>(tokens * cols / 32));
      quantize_activations(xf.data(), cols, 0, tokens, xq.data());
      MatmulInput in;
      in.q8 = xq.data();
      const int64_t stride = cols / tr.block_elements * tr.block_bytes;
      std::vector<float> got(static_cast<size_t>(tokens * rows)), avx2(got.size()), ref(got.size());
      matmul_weights_with(isa, got.data(), rows, in, w.data(), stride, tr, tokens, cols, 0, rows);
      matmul_weights_with(Isa::Avx2, avx2.data(), rows, in, w.data(), stride, tr, tokens, cols, 0, rows);
      matmul_weights_reference(ref.data(), rows, in, w.data(), stride, tr, tokens, cols, 0, rows);
      const std::string what = std::string(isa_name(isa)) + " " + std::string(tr.name) + " cols " + std::to_string(cols);
      if (isa_supported(Isa::Avx2))
        QVERIFY2(std::memcmp(got.data(), avx2.data(), got.size() * sizeof(float)) == 0, (what + " != avx2").c_str());
      // Rounding scale of each result: sum over i of |w_i * a_i| (the dequantized
      // weights times the quantized activations).
      std::vector<float> wrow(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        tr.dequantize_row(w.data() + r * stride, wrow.data(), cols);
        for (int64_t j = 0; j < tokens; ++j) {
          double mag = 0;
          for (int64_t c = 0; c < cols; ++c) {
            const ActBlockQ8& a = xq[static_cast<size_t>(j * cols / 32 + c / 32)];
            mag += std::abs(static_cast<double>(wrow[static_cast<size_t>(c)]) * a.d * a.qs[c % 32]);
          }
          const size_t i = static_cast<size_t>(j * rows + r);
          QVERIFY2(std::abs(static_cast<double>(got[i]) - ref[i]) <= 2e-5 * mag + 1e-30,
                   (what + " far from reference").c_str());
        }
      }
      for (int64_t j = 0; j < tokens; ++j) {
        std::vector<float> alone(static_cast<size_t>(rows));
        MatmulInput one;
        one.q8 = xq.data() + j * (cols / 32);
        matmul_weights_with(isa, alone.data(), rows, one, w.data(), stride, tr, 1, cols, 0, rows);
        QVERIFY2(std::memcmp(alone.data(), got.data() + j * rows, static_cast<size_t>(rows) * sizeof(float)) == 0,
                 (what + ": a token alone differs from the same token in the batch").c_str());
      }
    }
  }
}

// BF16 weights with bf16 activations (ActivationType::BF16) at a level: close
// to the table's reference dot product (exact products, float sums in index
// order), and a token alone equals the same token at any place in a batch, with
// rows split as threads get them. The activations are rounded by
// round_activations_bf16, whose bits must equal f32_to_bf16's.
void check_bf16_activation_level(Isa isa) {
  const WeightTypeTraits& tr = weight_traits(WeightType::BF16);
  for (int64_t cols : {1, 31, 32, 33, 100, 1040, 2100}) {
    for (int64_t tokens : {1, 5, 6, 7, 13}) {
      const int64_t rows = 37;
      const FloatWeights w = float_weights(WeightType::BF16, rows * cols, static_cast<uint32_t>(cols * 3 + tokens));
      const auto xf = gbtest::random_normals(static_cast<size_t>(tokens * cols), static_cast<uint32_t>(cols + 5 * tokens));
      std::vector<uint16_t> xb(xf.size());
      round_activations_bf16(xf.data(), cols, 0, tokens, xb.data());
      for (size_t i = 0; i < xf.size(); ++i) QCOMPARE(xb[i], f32_to_bf16(xf[i]));
      MatmulInput in;
      in.bf16 = xb.data();
      const int64_t stride = cols * 2;
      std::vector<float> got(static_cast<size_t>(tokens * rows)), ref(got.size());
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 13}, {13, 14}, {14, rows}})
        matmul_weights_with(isa, got.data(), rows, in, w.bytes.data(), stride, tr, tokens, cols, b, e);
      matmul_weights_reference(ref.data(), rows, in, w.bytes.data(), stride, tr, tokens, cols, 0, rows);
      const std::string what = std::string(isa_name(isa)) + " BF16 x bf16 cols " + std::to_string(cols) + " tokens " +
                               std::to_string(tokens);
      for (int64_t j = 0; j < tokens; ++j) {
        for (int64_t r = 0; r < rows; ++r) {
          double mag = 0;
          for (int64_t c = 0; c < cols; ++c)
            mag += std::abs(static_cast<double>(w.values[static_cast<size_t>(r * cols + c)]) *
                            bf16_to_f32(xb[static_cast<size_t>(j * cols + c)]));
          const size_t i = static_cast<size_t>(j * rows + r);
          QVERIFY2(std::abs(static_cast<double>(got[i]) - ref[i]) <= 4e-7 * std::sqrt(static_cast<double>(cols)) * mag + 1e-30,
                   (what + " far from reference").c_str());
        }
        std::vector<float> alone(static_cast<size_t>(rows));
        MatmulInput one;
        one.bf16 = xb.data() + j * cols;
        matmul_weights_with(isa, alone.data(), rows, one, w.bytes.data(), stride, tr, 1, cols, 0, rows);
        QVERIFY2(std::memcmp(alone.data(), got.data() + j * rows, static_cast<size_t>(rows) * sizeof(float)) == 0,
                 (what + ": a token alone differs from the same token in the batch").c_str());
      }
    }
  }
}

}  // namespace

namespace {

// Grouped paged attention at one level: a GQA group of 4 query heads at 21
// positions (causal ends, sliding-window starts, softcap on and off, a
// scrambled block table) gives every query the bits it gets alone at that
// level, and stays within 2e-5 of the scalar reference (outputs are convex
// combinations of N(0, 1) values). The value pass keeps the 8-lane kernel's
// products and order, so the AVX-512 level's outputs differ from the AVX2
// level's only through its 16-lane score sums: close, not equal.
void check_attention_level(Isa isa) {
  for (const int32_t d : {16, 24, 64, 128}) {  // 24: the AVX-512 level runs its AVX2 kernel
    const int32_t kv_heads = 2, bs = 16, group = 4, positions = 21, base_pos = 263, nblocks = 19;
    const auto k = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 61u + static_cast<uint32_t>(d), 2.0f);
    const auto v = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 62u + static_cast<uint32_t>(d));
    const auto q = gbtest::random_normals(static_cast<size_t>(positions * group * d), 63, 2.0f);
    std::vector<int32_t> table(static_cast<size_t>(nblocks));
    for (int32_t i = 0; i < nblocks; ++i) table[static_cast<size_t>(i)] = (i * 7 + 3) % nblocks;
    const PagedKvView kv{k.data(), v.data(), table.data(), bs, kv_heads, d};
    for (const float cap : {0.0f, 3.0f}) {
      for (const int32_t window : {0, 29, 200}) {
       for (const bool sinks : {false, true}) {  // gpt-oss's per-head sink logits, some above every score
        std::vector<AttentionQuery> queries;
        std::vector<float> out(static_cast<size_t>(positions * group * d), -1.0f);
        for (int32_t p = 0; p < positions; ++p)
          for (int32_t g = 0; g < group; ++g) {
            // Positions spread over the context: some queries see 1 key, some 280.
            const int32_t pos = p == 0 ? 0 : base_pos - 13 * (positions - 1 - p) + p, j = p * group + g;
            const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
            const float sink = sinks ? 3.0f * static_cast<float>(g) - 2.5f : -std::numeric_limits<float>::infinity();
            queries.push_back({q.data() + j * d, out.data() + j * d, first, pos + 1, sink});
          }
        const int32_t stride = nblocks * bs;
        std::vector<float> scores(queries.size() * static_cast<size_t>(stride));
        paged_attention_group_with(isa, queries.data(), static_cast<int32_t>(queries.size()), kv, 1, 0.0f, cap,
                                   scores.data(), stride);
        std::vector<float> alone(static_cast<size_t>(d)), ref(static_cast<size_t>(d)), one(static_cast<size_t>(stride));
        for (const AttentionQuery& qj : queries) {
          const AttentionQuery self{qj.q, alone.data(), qj.first, qj.num_ctx, qj.sink};
          paged_attention_group_with(isa, &self, 1, kv, 1, 0.0f, cap, one.data(), stride);
          QVERIFY2(std::memcmp(alone.data(), qj.out, sizeof(float) * static_cast<size_t>(d)) == 0,
                   ("d " + std::to_string(d) + ": a query differs from itself alone").c_str());
          paged_attention_head_ex_reference(ref.data(), qj.q, kv, 1, qj.num_ctx, AttentionShape{qj.first, 0.0f, cap, qj.sink},
                                            one.data());
          for (int32_t i = 0; i < d; ++i)
            QVERIFY2(std::abs(ref[static_cast<size_t>(i)] - qj.out[i]) <= 2e-5f,
                     ("d " + std::to_string(d) + " ctx " + std::to_string(qj.num_ctx) + ": far from the reference").c_str());
        }
       }
      }
    }
  }
}

// A KV cache of rows of kv_dim values stored in a KV type, and the same values
// as float32 (the type's scalar dequantization of what was stored).
struct TypedCache {
  std::vector<uint8_t> bytes;
  std::vector<float> dequantized;
};
TypedCache typed_cache(WeightType t, const std::vector<float>& values, int64_t kv_dim) {
  const WeightTypeTraits& w = weight_traits(t);
  const size_t rows = values.size() / static_cast<size_t>(kv_dim), row_bytes = kv_row_bytes(t, kv_dim);
  TypedCache c;
  c.bytes.resize(rows * row_bytes);
  c.dequantized.resize(values.size());
  for (size_t r = 0; r < rows; ++r) {
    w.quantize_row(values.data() + r * static_cast<size_t>(kv_dim), c.bytes.data() + r * row_bytes, kv_dim);
    w.dequantize_row(c.bytes.data() + r * row_bytes, c.dequantized.data() + r * static_cast<size_t>(kv_dim), kv_dim);
  }
  return c;
}

// Grouped attention over a K/V cache in every KV type (K and V types apart) at
// one level: where the level has a SIMD kernel for the view (attention_has_simd_kernel)
// it reads the stored type and must give exactly the bits of the same level
// over an F32 cache holding the dequantized values (the conversion is the
// scalar dequantization's arithmetic); every query, grouped or alone, stays
// within 2e-5 of the scalar oracle reading the stored type. At the scalar level
// the oracle must equal itself over the dequantized cache bit for bit.
void check_typed_attention_level(Isa isa) {
  int simd_views = 0;
  std::vector<std::pair<WeightType, WeightType>> pairs;
  for (const KvTypeRow& k : kv_type_rows())
    for (const KvTypeRow& v : kv_type_rows())
      if (k.type == v.type || k.type == WeightType::F16 || v.type == WeightType::F16) pairs.push_back({k.type, v.type});
  for (const int32_t d : {8, 16, 32, 64, 128, 256}) {
    const int32_t kv_heads = d < 32 ? 4 : 2, bs = 16, group = 3, positions = 9, nblocks = 12;
    const int64_t kv_dim = int64_t{kv_heads} * d;
    const auto kvals = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_dim), 71u + static_cast<uint32_t>(d), 2.0f);
    const auto vvals = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_dim), 72u + static_cast<uint32_t>(d));
    const auto q = gbtest::random_normals(static_cast<size_t>(positions * group * d), 73, 2.0f);
    std::vector<int32_t> table(static_cast<size_t>(nblocks));
    for (int32_t i = 0; i < nblocks; ++i) table[static_cast<size_t>(i)] = (i * 5 + 2) % nblocks;
    for (const auto& [kt, vt] : pairs) {
      if (!kv_type_unsupported(kt, kv_dim).empty() || !kv_type_unsupported(vt, kv_dim).empty()) continue;
      const TypedCache kc = typed_cache(kt, kvals, kv_dim), vc = typed_cache(vt, vvals, kv_dim);
      PagedKvView typed{kc.bytes.data(), vc.bytes.data(), table.data(), bs, kv_heads, d, kt, vt};
      const PagedKvView plain{kc.dequantized.data(), vc.dequantized.data(), table.data(), bs, kv_heads, d};
      const bool simd = attention_has_simd_kernel(isa, typed);
      simd_views += simd;
      const std::string what = "d " + std::to_string(d) + " K " + std::string(kv_type_name(kt)) + " V " +
                               std::string(kv_type_name(vt));
      for (const float cap : {0.0f, 5.0f})
        for (const int32_t window : {0, 37}) {
          std::vector<AttentionQuery> a, b;
          std::vector<float> out_a(static_cast<size_t>(positions * group * d), -1.0f), out_b = out_a;
          for (int32_t p = 0; p < positions; ++p)
            for (int32_t g = 0; g < group; ++g) {
              const int32_t pos = p == 0 ? 3 : nblocks * bs - 1 - 17 * (positions - 1 - p), j = p * group + g;
              const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
              a.push_back({q.data() + j * d, out_a.data() + j * d, first, pos + 1});
              b.push_back({q.data() + j * d, out_b.data() + j * d, first, pos + 1});
            }
          const int32_t stride = nblocks * bs;
          std::vector<float> scores(a.size() * static_cast<size_t>(stride));
          const int32_t kv_head = kv_heads - 1;
          paged_attention_group_with(isa, a.data(), static_cast<int32_t>(a.size()), typed, kv_head, 0.0f, cap,
                                     scores.data(), stride);
          paged_attention_group_with(simd ? isa : Isa::Scalar, b.data(), static_cast<int32_t>(b.size()), plain, kv_head,
                                     0.0f, cap, scores.data(), stride);
          QVERIFY2(out_a == out_b, (what + ": the stored type and its dequantized values give other bits").c_str());
          std::vector<float> ref(static_cast<size_t>(d)), alone(static_cast<size_t>(d)), one(static_cast<size_t>(stride));
          for (const AttentionQuery& qj : a) {
            paged_attention_head_ex_reference(ref.data(), qj.q, typed, kv_head, qj.num_ctx,
                                              AttentionShape{qj.first, 0.0f, cap}, one.data());
            const AttentionQuery self{qj.q, alone.data(), qj.first, qj.num_ctx, qj.sink};
            paged_attention_group_with(isa, &self, 1, typed, kv_head, 0.0f, cap, one.data(), stride);
            QVERIFY2(std::memcmp(alone.data(), qj.out, sizeof(float) * static_cast<size_t>(d)) == 0,
                     (what + ": a query differs from itself alone").c_str());
            for (int32_t i = 0; i < d; ++i)
              QVERIFY2(std::abs(ref[static_cast<size_t>(i)] - qj.out[i]) <= 2e-5f,
                       (what + ": far from the scalar oracle").c_str());
          }
        }
    }
  }
  if (isa != Isa::Scalar) QVERIFY2(simd_views > 0, "no view ran a SIMD kernel");
}

}  // namespace

// Decode (one token) of every type at a level with every prefetch distance a
// measurement tries, odd ones and none (kernels/cpu/decode_prefetch.h): the
// same bits as with the default distance, set process-wide or as this thread's
// override. Rows past a multiple of four and columns past a multiple of 16 /
// a unit, so the F32 four-row loop, its one-row tail and the tail columns run
// with a prefetch too.
void check_prefetch_distances(Isa isa) {
  std::vector<WeightType> types = {WeightType::F32, WeightType::F16, WeightType::BF16};
  types.insert(types.end(), std::begin(kLevelQuantTypes), std::end(kLevelQuantTypes));
  std::vector<int64_t> distances(std::begin(kDecodePrefetchCandidates), std::end(kDecodePrefetchCandidates));
  distances.insert(distances.end(), {64, 100, 40000, kDecodePrefetchMax});
  for (WeightType type : types) {
    const WeightTypeTraits& tr = weight_traits(type);
    const bool quant = is_quantized(type);
    const int64_t cols = quant ? 11 * 256 + (tr.block_elements == 32 ? 96 : 0) : 1040 + 7;
    const int64_t rows = 23;
    std::vector<uint8_t> w;
    if (quant) {
      w = gbtest::random_quant_blocks(tr, rows, cols, static_cast<uint32_t>(cols + static_cast<int>(type)));
    } else {
      w = float_weights(type, rows * cols, static_cast<uint32_t>(cols)).bytes;
    }
    const auto xf = gbtest::random_normals(static_cast<size_t>(cols), static_cast<uint32_t>(cols + 3));
    std::vector<ActBlockQ8> xq(static_cast<size_t>(cols / 32));
    std::vector<uint16_t> xb(static_cast<size_t>(cols));
    MatmulInput in;
    if (tr.activation == ActivationType::Q8) {
      quantize_activations(xf.data(), cols, 0, 1, xq.data());
      in.q8 = xq.data();
    } else if (tr.activation == ActivationType::BF16) {
      round_activations_bf16(xf.data(), cols, 0, 1, xb.data());
      in.bf16 = xb.data();
    } else {
      in.f32 = xf.data();
    }
    const int64_t stride = cols / tr.block_elements * tr.block_bytes;
    const auto run = [&] {
      std::vector<float> y(static_cast<size_t>(rows));
      matmul_weights_with(isa, y.data(), rows, in, w.data(), stride, tr, 1, cols, 0, rows);
      return y;
    };
    const auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    reset_decode_prefetch();
    const std::vector<float> want = run();
    for (const int64_t d : distances) {
      const std::string what = std::string(isa_name(isa)) + " " + std::string(tr.name) + " " + std::to_string(d) + " B ahead";
      {
        const ScopedDecodePrefetch ahead(d);
        QCOMPARE(decode_prefetch(type), d);
        QVERIFY2(same(run(), want), (what + " (this thread) differs from the default distance").c_str());
      }
      set_decode_prefetch(type, d);
      QVERIFY2(same(run(), want), (what + " (process-wide) differs from the default distance").c_str());
    }
    reset_decode_prefetch();
  }
}

GB_TEST(kv_types_attention_scalar_level) { check_typed_attention_level(Isa::Scalar); }

GB_TEST(kv_types_attention_avx2_level) {
  if (!isa_supported(Isa::Avx2)) QSKIP("this CPU has no AVX2/FMA/F16C");
  check_typed_attention_level(Isa::Avx2);
}

GB_TEST(kv_types_attention_avx512_level) {
  if (!isa_supported(Isa::Avx512)) QSKIP("this CPU has no AVX-512 F/BW/DQ/VL/VNNI");
  check_typed_attention_level(Isa::Avx512);
}

GB_TEST(bf16_rounding_of_activations_matches_scalar_bits) {
  // Ties to even both ways, the largest finite values, infinities, NaNs (quieted,
  // sign kept), denormals, zeros: the SIMD rounding must give f32_to_bf16's bits.
  std::vector<float> v;
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
                        0x7fc00001u, 0x7f800001u, 0xff800001u, 0x00000001u, 0x80007fffu, 0x00008000u, 0x0u, 0x80000000u}) {
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
  }
  const auto more = gbtest::random_normals(77, 3u);
  v.insert(v.end(), more.begin(), more.end());
  for (int64_t cols : {static_cast<int64_t>(v.size()), int64_t{1}}) {
    const int64_t tokens = static_cast<int64_t>(v.size()) / cols;
    std::vector<uint16_t> out(v.size(), 0);
    round_activations_bf16(v.data(), cols, 0, tokens, out.data());
    for (size_t i = 0; i < v.size(); ++i) QCOMPARE(out[i], f32_to_bf16(v[i]));
  }
}

GB_TEST(bf16_activations_scalar_level_matches_reference) { check_bf16_activation_level(Isa::Scalar); }

GB_TEST(bf16_activations_avx2_level) {
  if (!isa_supported(Isa::Avx2)) QSKIP("this CPU has no AVX2/FMA/F16C");
  check_bf16_activation_level(Isa::Avx2);
}

GB_TEST(bf16_activations_avx512_level) {
  if (!isa_supported(Isa::Avx512)) QSKIP("this CPU has no AVX-512 F/BW/DQ/VL/VNNI");
  check_bf16_activation_level(Isa::Avx512);
}

GB_TEST(bf16_activations_avx512bf16_level) {
  if (!isa_supported(Isa::Avx512Bf16)) QSKIP("this CPU has no AVX512-BF16");
  check_bf16_activation_level(Isa::Avx512Bf16);
}

GB_TEST(isa_table_is_ordered_and_active_level_supported) {
  QVERIFY(isa_supported(Isa::Scalar));
  QVERIFY(isa_supported(active_isa()));
  // Each level includes the one before it.
  for (int i = 1; i < kIsaCount; ++i)
    if (isa_supported(static_cast<Isa>(i))) QVERIFY(isa_supported(static_cast<Isa>(i - 1)));
  QCOMPARE(instruction_sets(), std::string(isa_extensions(active_isa())));
  QCOMPARE(std::string(isa_name(Isa::Avx512)), std::string("avx512"));
}

GB_TEST(float_avx2_matches_reference) {
  if (!isa_supported(Isa::Avx2)) QSKIP("this CPU has no AVX2/FMA/F16C");
  check_float_level(Isa::Avx2);
}

GB_TEST(float_avx512_matches_reference) {
  if (!isa_supported(Isa::Avx512)) QSKIP("this CPU has no AVX-512 F/BW/DQ/VL/VNNI");
  check_float_level(Isa::Avx512);
}

GB_TEST(float_avx2_batch_invariant) {
  if (!isa_supported(Isa::Avx2)) QSKIP("this CPU has no AVX2/FMA/F16C");
  check_batch_invariance(Isa::Avx2);
}

GB_TEST(float_avx512_batch_invariant) {
  if (!isa_supported(Isa::Avx512)) QSKIP("this CPU has no AVX-512 F/BW/DQ/VL/VNNI");
  check_batch_invariance(Isa::Avx512);
}

GB_TEST(quant_avx2_batch_invariant_and_close) {
  if (!isa_supported(Isa::Avx2)) QSKIP("this CPU has no AVX2/FMA/F16C");
  check_quant_level(Isa::Avx2);
}

GB_TEST(quant_avx512_equals_avx2_bitwise) {
  if (!isa_supported(Isa::Avx512)) QSKIP("this CPU has no AVX-512 F/BW/DQ/VL/VNNI");
  check_quant_level(Isa::Avx512);
}

GB_TEST(attention_avx2_level) {
  if (!isa_supported(Isa::Avx2)) QSKIP("this CPU has no AVX2/FMA/F16C");
  check_attention_level(Isa::Avx2);
}

GB_TEST(attention_avx512_level) {
  if (!isa_supported(Isa::Avx512)) QSKIP("this CPU has no AVX-512 F/BW/DQ/VL/VNNI");
  check_attention_level(Isa::Avx512);
}

GB_TEST(prefetch_distance_never_changes_a_decode_avx2) {
  if (!isa_supported(Isa::Avx2)) QSKIP("this CPU has no AVX2/FMA/F16C");
  check_prefetch_distances(Isa::Avx2);
}

GB_TEST(prefetch_distance_never_changes_a_decode_avx512) {
  if (!isa_supported(Isa::Avx512)) QSKIP("this CPU has no AVX-512 F/BW/DQ/VL/VNNI");
  check_prefetch_distances(Isa::Avx512);
}

GB_TEST(prefetch_distance_never_changes_a_decode_avx512bf16) {
  if (!isa_supported(Isa::Avx512Bf16)) QSKIP("this CPU has no AVX512-BF16");
  check_prefetch_distances(Isa::Avx512Bf16);
}

// The setting's order: this thread's override, then GLASSBOX_CPU_PREFETCH (not
// set in this test), then the process-wide value, then the default; values
// clamped to [0, kDecodePrefetchMax].
GB_TEST(prefetch_distance_setting) {
  if (std::getenv("GLASSBOX_CPU_PREFETCH") != nullptr) QSKIP("GLASSBOX_CPU_PREFETCH is set");
  reset_decode_prefetch();
  // The defaults of the active level (the table in decode_prefetch.cpp).
  const Isa level = active_isa();
  QCOMPARE(decode_prefetch(WeightType::F32), int64_t{0});
  QCOMPARE(decode_prefetch(WeightType::F16), level == Isa::Scalar ? int64_t{0}
                                             : level == Isa::Avx2 ? int64_t{65536}
                                                                  : int64_t{16384});
  QCOMPARE(decode_prefetch(WeightType::BF16), decode_prefetch(WeightType::F16));
  QCOMPARE(decode_prefetch(WeightType::Q8_0), default_decode_prefetch(WeightType::Q8_0));
  set_decode_prefetch(WeightType::Q8_0, 8192);
  QCOMPARE(decode_prefetch(WeightType::Q8_0), int64_t{8192});
  QCOMPARE(decode_prefetch(WeightType::Q4_0), default_decode_prefetch(WeightType::Q4_0));  // one type only
  {
    const ScopedDecodePrefetch outer(4096);
    QCOMPARE(decode_prefetch(WeightType::Q8_0), int64_t{4096});
    QCOMPARE(decode_prefetch(WeightType::F32), int64_t{4096});
    {
      const ScopedDecodePrefetch inner(-5);
      QCOMPARE(decode_prefetch(WeightType::Q8_0), int64_t{0});
    }
    QCOMPARE(decode_prefetch(WeightType::Q8_0), int64_t{4096});
  }
  QCOMPARE(decode_prefetch(WeightType::Q8_0), int64_t{8192});
  set_decode_prefetch(WeightType::Q8_0, int64_t{1} << 40);
  QCOMPARE(decode_prefetch(WeightType::Q8_0), kDecodePrefetchMax);
  reset_decode_prefetch();
  QCOMPARE(decode_prefetch(WeightType::Q8_0), default_decode_prefetch(WeightType::Q8_0));
  // Which loops read it: every SIMD level's float and quantized decode loops.
  QCOMPARE(decode_prefetch_applies(WeightType::F16), level >= Isa::Avx2);
  QCOMPARE(decode_prefetch_applies(WeightType::Q8_0), level >= Isa::Avx2);
}
