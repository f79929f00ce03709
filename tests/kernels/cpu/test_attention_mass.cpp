// The attention mass (AttentionQuery::weight_sum): at every kernel level this
// processor runs and over a K/V cache in every KV type, a grouped call whose
// queries have different windows, contexts and sinks, some sharing one
// weight_sum array and some with none, must
//  (a) write exactly the bits of `out` that the same call without weight_sum writes,
//  (b) add to each array, per position, the softmax weights of the queries that
//      share it, within 1e-5 of an independent recomputation in double (K read
//      through PagedKvView::k_row, dot, scale, softcap, softmax with the sink),
//  (c) leave every position outside its queries' [first, num_ctx) as it was.
// The entry points of one query (paged_attention_head_ex and its reference)
// fill AttentionShape::weight_sum the same way.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_info.h"
#include "cpu/kv_type.h"
#include "cpu/paged_attention.h"
#include "gb_test.h"
#include "kernel_test_data.h"

using namespace gb::kernels;

namespace {

constexpr float kMassSentinel = 0.25f;  // what every weight_sum array holds before the call
constexpr float kNoSink = -std::numeric_limits<float>::infinity();

// One query of the group: its window [first, num_ctx), its sink, and which
// weight_sum array it adds to (-1: none).
struct MassCase {
  int32_t first;
  int32_t num_ctx;
  float sink;
  int array;
};

// Queries of a prefill-like group over 160 positions: full contexts, sliding
// windows, one key alone, a sink above most scores and one below them.
const MassCase kMassCases[] = {
    {0, 160, kNoSink, 0}, {97, 150, 1.0f, 0},  {0, 1, kNoSink, 1}, {40, 73, 6.0f, -1},   {12, 131, -2.0f, 1},
    {0, 77, kNoSink, 0},  {150, 151, 0.5f, -1}, {64, 160, kNoSink, 2}, {159, 160, 2.0f, 2}, {3, 5, kNoSink, 1},
};
constexpr size_t kMassArrays = 3;

// Rows of kv_dim values stored in a KV type (quantized on write as the pool does).
std::vector<uint8_t> mass_cache_bytes(WeightType t, const std::vector<float>& values, int64_t kv_dim) {
  const WeightTypeTraits& w = weight_traits(t);
  const size_t rows = values.size() / static_cast<size_t>(kv_dim), row_bytes = kv_row_bytes(t, kv_dim);
  std::vector<uint8_t> bytes(rows * row_bytes);
  for (size_t r = 0; r < rows; ++r)
    w.quantize_row(values.data() + r * static_cast<size_t>(kv_dim), bytes.data() + r * row_bytes, kv_dim);
  return bytes;
}

// The weights of one query, in double, from the stored K rows: element t - first
// is the weight of position t.
std::vector<double> mass_weights(const PagedKvView& kv, int32_t kv_head, const float* q, const MassCase& c,
                                 double scale, double cap) {
  const int32_t d = kv.head_dim;
  std::vector<float> k(static_cast<size_t>(d));
  std::vector<double> s;
  double m = c.sink;
  for (int32_t t = c.first; t < c.num_ctx; ++t) {
    kv.k_row(t, kv_head, k.data());
    double dot = 0;
    for (int32_t i = 0; i < d; ++i) dot += double{q[i]} * k[static_cast<size_t>(i)];
    dot *= scale;
    s.push_back(cap > 0 ? cap * std::tanh(dot / cap) : dot);
    m = std::max(m, s.back());
  }
  double z = c.sink > kNoSink ? std::exp(double{c.sink} - m) : 0.0;
  for (double& x : s) z += x = std::exp(x - m);
  for (double& x : s) x /= z;
  return s;
}

void check_attention_mass_level(Isa isa) {
  const int32_t bs = 16, nblocks = 10, pool_blocks = 14, ctx = nblocks * bs;
  const int32_t num_queries = static_cast<int32_t>(std::size(kMassCases));
  int simd_views = 0;
  for (const int32_t d : {24, 32, 64, 128}) {  // 24: the AVX-512 level runs its AVX2 kernel, block types the oracle
    const int32_t kv_heads = d == 24 ? 4 : 2, kv_head = 1;
    const int64_t kv_dim = int64_t{kv_heads} * d;
    const auto kvals = gbtest::random_normals(static_cast<size_t>(pool_blocks * bs * kv_dim), 81u + d, 1.5f);
    const auto vvals = gbtest::random_normals(static_cast<size_t>(pool_blocks * bs * kv_dim), 82u + d);
    const auto q = gbtest::random_normals(static_cast<size_t>(num_queries * d), 83u + d, 1.5f);
    // A random block table over a pool with blocks the sequence does not own.
    std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(84u + static_cast<uint32_t>(d)));
    const std::vector<int32_t> table(ids.begin(), ids.begin() + nblocks);
    for (const KvTypeRow& row : kv_type_rows()) {
      if (!kv_type_unsupported(row.type, kv_dim).empty()) continue;
      const std::vector<uint8_t> kc = mass_cache_bytes(row.type, kvals, kv_dim);
      const std::vector<uint8_t> vc = mass_cache_bytes(row.type, vvals, kv_dim);
      const PagedKvView kv{kc.data(), vc.data(), table.data(), bs, kv_heads, d, row.type, row.type};
      simd_views += attention_has_simd_kernel(isa, kv);
      for (const float scale : {0.0f, 0.2f})
        for (const float cap : {0.0f, 4.0f}) {
          const std::string what = std::string(isa_name(isa)) + " d " + std::to_string(d) + " " +
                                   std::string(row.name) + " scale " + std::to_string(scale) + " cap " +
                                   std::to_string(cap);
          // Arrays one longer than the context: the last slot is never a position.
          std::vector<std::vector<float>> sums(kMassArrays, std::vector<float>(static_cast<size_t>(ctx + 1),
                                                                               kMassSentinel));
          std::vector<float> out_with(static_cast<size_t>(num_queries * d), -1.0f), out_without = out_with;
          std::vector<AttentionQuery> with, without;
          for (int32_t j = 0; j < num_queries; ++j) {
            const MassCase& c = kMassCases[j];
            float* sum = c.array >= 0 ? sums[static_cast<size_t>(c.array)].data() : nullptr;
            with.push_back({q.data() + j * d, out_with.data() + j * d, c.first, c.num_ctx, c.sink, sum});
            without.push_back({q.data() + j * d, out_without.data() + j * d, c.first, c.num_ctx, c.sink});
          }
          std::vector<float> scores(static_cast<size_t>(num_queries * ctx));
          paged_attention_group_with(isa, with.data(), num_queries, kv, kv_head, scale, cap, scores.data(), ctx);
          paged_attention_group_with(isa, without.data(), num_queries, kv, kv_head, scale, cap, scores.data(), ctx);
          QVERIFY2(std::memcmp(out_with.data(), out_without.data(), out_with.size() * sizeof(float)) == 0,
                   (what + ": weight_sum changed the output").c_str());

          // The recomputation, array by array; untouched: no query of the array sees it.
          const double s = scale > 0.0f ? scale : 1.0 / std::sqrt(static_cast<double>(d));
          std::vector<std::vector<double>> want(kMassArrays, std::vector<double>(static_cast<size_t>(ctx + 1),
                                                                                 kMassSentinel));
          std::vector<std::vector<bool>> touched(kMassArrays, std::vector<bool>(static_cast<size_t>(ctx + 1)));
          for (int32_t j = 0; j < num_queries; ++j) {
            const MassCase& c = kMassCases[j];
            if (c.array < 0) continue;
            const std::vector<double> w = mass_weights(kv, kv_head, q.data() + j * d, c, s, cap);
            for (int32_t t = c.first; t < c.num_ctx; ++t) {
              want[static_cast<size_t>(c.array)][static_cast<size_t>(t)] += w[static_cast<size_t>(t - c.first)];
              touched[static_cast<size_t>(c.array)][static_cast<size_t>(t)] = true;
            }
          }
          for (size_t a = 0; a < kMassArrays; ++a)
            for (size_t t = 0; t < sums[a].size(); ++t) {
              const std::string at = what + ": array " + std::to_string(a) + " position " + std::to_string(t);
              if (!touched[a][t])
                QVERIFY2(sums[a][t] == kMassSentinel, (at + " was written outside every window").c_str());
              else
                QVERIFY2(std::abs(sums[a][t] - want[a][t]) <= 1e-5, (at + " far from the recomputed mass").c_str());
            }
        }
    }
  }
  if (isa != Isa::Scalar) QVERIFY2(simd_views > 0, "no view ran a SIMD kernel");
}

}  // namespace

GB_TEST(attention_mass_scalar_level) { check_attention_mass_level(Isa::Scalar); }

GB_TEST(attention_mass_avx2_level) {
  if (!isa_supported(Isa::Avx2)) QSKIP("this CPU has no AVX2/FMA/F16C");
  check_attention_mass_level(Isa::Avx2);
}

GB_TEST(attention_mass_avx512_level) {
  if (!isa_supported(Isa::Avx512)) QSKIP("this CPU has no AVX-512 F/BW/DQ/VL/VNNI");
  check_attention_mass_level(Isa::Avx512);
}

GB_TEST(attention_mass_single_query_entry_points) {
  // paged_attention_head_ex (the process's level) and its scalar reference pass
  // AttentionShape::weight_sum through: a window with a sink, an F16 cache.
  const int32_t d = 64, kv_heads = 2, bs = 8, nblocks = 7, ctx = nblocks * bs - 3, kv_head = 0;
  const auto kvals = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 91, 1.5f);
  const auto vvals = gbtest::random_normals(static_cast<size_t>(nblocks * bs * kv_heads * d), 92);
  const auto q = gbtest::random_normals(static_cast<size_t>(d), 93, 1.5f);
  const std::vector<int32_t> table = {4, 0, 6, 2, 5, 1, 3};
  const std::vector<uint8_t> kc = mass_cache_bytes(WeightType::F16, kvals, int64_t{kv_heads} * d);
  const std::vector<uint8_t> vc = mass_cache_bytes(WeightType::F16, vvals, int64_t{kv_heads} * d);
  const PagedKvView kv{kc.data(), vc.data(), table.data(), bs, kv_heads, d, WeightType::F16, WeightType::F16};
  const MassCase c{11, ctx, 1.5f, 0};
  const std::vector<double> w = mass_weights(kv, kv_head, q.data(), c, 0.125, 0.0);
  std::vector<float> out(static_cast<size_t>(d)), plain(static_cast<size_t>(d)), scores(static_cast<size_t>(ctx));
  for (const bool reference : {false, true}) {
    std::vector<float> sum(static_cast<size_t>(ctx + 1), kMassSentinel);
    const AttentionShape shape{c.first, 0.125f, 0.0f, c.sink, sum.data()}, no_sum{c.first, 0.125f, 0.0f, c.sink};
    if (reference) {
      paged_attention_head_ex_reference(out.data(), q.data(), kv, kv_head, ctx, shape, scores.data());
      paged_attention_head_ex_reference(plain.data(), q.data(), kv, kv_head, ctx, no_sum, scores.data());
    } else {
      paged_attention_head_ex(out.data(), q.data(), kv, kv_head, ctx, shape, scores.data());
      paged_attention_head_ex(plain.data(), q.data(), kv, kv_head, ctx, no_sum, scores.data());
    }
    QVERIFY2(out == plain, reference ? "reference: weight_sum changed the output" : "weight_sum changed the output");
    for (int32_t t = 0; t <= ctx; ++t) {
      const size_t i = static_cast<size_t>(t);
      if (t < c.first || t >= c.num_ctx)
        QVERIFY2(sum[i] == kMassSentinel, ("position " + std::to_string(t) + " outside the window written").c_str());
      else
        QVERIFY2(std::abs(sum[i] - (kMassSentinel + w[i - static_cast<size_t>(c.first)])) <= 1e-5,
                 ("position " + std::to_string(t) + " far from the recomputed weight").c_str());
    }
  }
}
