// Paged attention kernels (decode and prefill) against a host reference that
// reads each sequence's keys and values from plain contiguous arrays, so the
// block-table indirection is checked, not shared. Block tables are scrambled
// permutations of the pool; GQA groups, head sizes that are not powers of two,
// ragged batches, contexts longer than one decode partition (512 keys) and
// partially filled last blocks are all covered, as are sliding windows (whose
// released blocks must never be read), a query scale and a soft-cap (Gemma 2).
//
// Tolerance: 2e-5 abs. Inputs are in [-1, 1]; the reference accumulates in
// double; the kernels use float with a different summation order (online
// softmax, partition merge), which costs a few ulp of the O(1) outputs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "cuda/cuda_kernels.h"
#include "cuda_test_support.h"
#include "gb_test.h"

using gbtest::cuda::compare;
using gbtest::cuda::DeviceArray;
using gbtest::cuda::random_floats;

namespace {

struct Shape {
  int32_t num_heads, num_kv_heads, head_dim, block_size;
};

// A batch of sequences with contiguous K/V (kv_len, kv_heads, head_dim) each,
// scattered into a pool through a scrambled block table.
struct PagedFixture {
  Shape shape;
  std::vector<int32_t> kv_lens;
  std::vector<std::vector<float>> k_seq, v_seq;  // per sequence (kv_len, kv_dim)
  std::vector<float> k_pool, v_pool;             // (num_blocks, block_size, kv_dim)
  std::vector<int32_t> block_ids, block_indptr{0};
  int32_t num_blocks = 0;

  PagedFixture(Shape s, std::vector<int32_t> lens, uint32_t seed) : shape(s), kv_lens(std::move(lens)) {
    const int32_t kv_dim = s.num_kv_heads * s.head_dim;
    for (int32_t len : kv_lens) num_blocks += (len + s.block_size - 1) / s.block_size;
    num_blocks += 3;  // unused blocks that must never be read
    std::vector<int32_t> perm(static_cast<size_t>(num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(perm.begin(), perm.end(), rng);
    // Unused pool slots hold huge values: reading one would show up as garbage.
    k_pool.assign(static_cast<size_t>(num_blocks) * s.block_size * kv_dim, 1e6f);
    v_pool = k_pool;
    size_t next = 0;
    for (size_t i = 0; i < kv_lens.size(); ++i) {
      const int32_t len = kv_lens[i];
      k_seq.push_back(random_floats(static_cast<size_t>(len) * kv_dim, seed + 100 + uint32_t(i)));
      v_seq.push_back(random_floats(static_cast<size_t>(len) * kv_dim, seed + 200 + uint32_t(i)));
      const int32_t nb = (len + s.block_size - 1) / s.block_size;
      for (int32_t b = 0; b < nb; ++b) block_ids.push_back(perm[next++]);
      block_indptr.push_back(static_cast<int32_t>(block_ids.size()));
      for (int32_t p = 0; p < len; ++p) {
        const int32_t blk = block_ids[static_cast<size_t>(block_indptr[i] + p / s.block_size)];
        const size_t slot = static_cast<size_t>(blk) * s.block_size + static_cast<size_t>(p % s.block_size);
        std::copy_n(k_seq[i].begin() + int64_t{p} * kv_dim, kv_dim, k_pool.begin() + int64_t(slot) * kv_dim);
        std::copy_n(v_seq[i].begin() + int64_t{p} * kv_dim, kv_dim, v_pool.begin() + int64_t(slot) * kv_dim);
      }
    }
  }

  // Poisons the pool blocks wholly before each sequence's window (as if
  // released): a kernel that reads one produces garbage.
  void poison_before_window(int32_t window) {
    const int32_t kv_dim = shape.num_kv_heads * shape.head_dim;
    for (size_t i = 0; i < kv_lens.size(); ++i) {
      const int32_t first = std::max(0, kv_lens[i] - window - 16);  // generous: every query's window starts later
      for (int32_t b = 0; (b + 1) * shape.block_size <= first; ++b) {
        const int32_t blk = block_ids[static_cast<size_t>(block_indptr[i] + b)];
        std::fill_n(k_pool.begin() + int64_t{blk} * shape.block_size * kv_dim, shape.block_size * kv_dim, NAN);
        std::fill_n(v_pool.begin() + int64_t{blk} * shape.block_size * kv_dim, shape.block_size * kv_dim, NAN);
      }
    }
  }

  // Output of head h for a query q (head_dim) of sequence s at position pos:
  // scores q.k * scale (0: 1/sqrt(head_dim)), soft-capped when softcap > 0, over
  // positions pos - window + 1 .. pos (window 0: all).
  void reference(size_t s, int32_t pos, int32_t h, const float* q, float* out, float scale = 0.0f,
                 float softcap = 0.0f, int32_t window = 0) const {
    const int32_t hd = shape.head_dim, kv_dim = shape.num_kv_heads * hd;
    const int32_t kvh = h / (shape.num_heads / shape.num_kv_heads);
    const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
    const double sc = scale > 0.0f ? double{scale} : 1.0 / std::sqrt(double(hd));
    std::vector<double> scores(static_cast<size_t>(pos - first) + 1);
    double mx = -INFINITY;
    for (int32_t p = first; p <= pos; ++p) {
      double dot = 0.0;
      for (int32_t d = 0; d < hd; ++d) dot += double{q[d]} * k_seq[s][static_cast<size_t>(p * kv_dim + kvh * hd + d)];
      double x = dot * sc;
      if (softcap > 0.0f) x = softcap * std::tanh(x / softcap);
      scores[static_cast<size_t>(p - first)] = x;
      mx = std::max(mx, x);
    }
    double z = 0.0;
    for (double& x : scores) z += (x = std::exp(x - mx));
    for (int32_t d = 0; d < hd; ++d) {
      double acc = 0.0;
      for (int32_t p = first; p <= pos; ++p)
        acc += scores[static_cast<size_t>(p - first)] * v_seq[s][static_cast<size_t>(p * kv_dim + kvh * hd + d)];
      out[d] = static_cast<float>(acc / z);
    }
  }
};

// Scores shape of the windowed / capped cases (defaults: plain causal attention).
struct ScoreShape {
  float scale = 0.0f, softcap = 0.0f;
  int32_t window = 0;
};

void check_decode(Shape s, std::vector<int32_t> lens, uint32_t seed, ScoreShape sh = {}) {
  PagedFixture f(s, lens, seed);
  if (sh.window > 0) f.poison_before_window(sh.window);
  const int32_t num_seqs = static_cast<int32_t>(lens.size());
  const int32_t q_dim = s.num_heads * s.head_dim;
  const int64_t q_stride = q_dim + 7;  // q rows inside a wider fused row
  const std::vector<float> q = random_floats(static_cast<size_t>(num_seqs * q_stride), seed + 1);
  std::vector<int32_t> token_indptr(static_cast<size_t>(num_seqs) + 1);
  std::iota(token_indptr.begin(), token_indptr.end(), 0);
  DeviceArray<float> d_q(q), d_k(f.k_pool), d_v(f.v_pool), d_out(static_cast<size_t>(num_seqs) * q_dim);
  DeviceArray<int32_t> d_blocks(f.block_ids), d_indptr(f.block_indptr), d_lens(lens), d_tok(token_indptr);
  const int32_t max_len = *std::max_element(lens.begin(), lens.end());
  DeviceArray<float> d_ws(gb::cuda::decode_attention_workspace_floats(num_seqs, s.num_heads, s.head_dim, max_len));
  const gb::cuda::AttentionIo io{d_q.get(), q_stride, d_out.get(), s.num_heads, sh.scale, sh.softcap, sh.window};
  const gb::cuda::PagedKv kv{d_k.get(), d_v.get(), d_blocks.get(), d_indptr.get(), s.block_size, s.num_kv_heads,
                             s.head_dim};
  GB_CUDA_OK(gb::cuda::launch_paged_attention_decode(io, kv, d_lens.get(), d_tok.get(), num_seqs, max_len, d_ws.get(),
                                                     nullptr));
  std::vector<float> ref(static_cast<size_t>(num_seqs) * q_dim);
  for (int32_t i = 0; i < num_seqs; ++i)
    for (int32_t h = 0; h < s.num_heads; ++h)
      f.reference(static_cast<size_t>(i), lens[static_cast<size_t>(i)] - 1, h, q.data() + i * q_stride + h * s.head_dim,
                  ref.data() + static_cast<size_t>(i) * q_dim + static_cast<size_t>(h) * s.head_dim, sh.scale,
                  sh.softcap, sh.window);
  const auto d = compare(ref, d_out.download());
  QVERIFY2(d.max_abs <= 2e-5, d.describe().c_str());
}

// Every sequence gets n_new[i] new tokens at the end of its context (the rest
// is "already cached"), tiled as the backend tiles them.
void check_prefill(Shape s, std::vector<int32_t> lens, std::vector<int32_t> n_new, uint32_t seed, ScoreShape sh = {}) {
  PagedFixture f(s, lens, seed);
  // Only blocks before every new token's window (the first new token's) are poisoned.
  if (sh.window > 0) {
    std::vector<int32_t> firsts = lens;
    for (size_t i = 0; i < lens.size(); ++i) firsts[i] = lens[i] - n_new[i] + 1;
    PagedFixture probe = f;
    probe.kv_lens = firsts;
    probe.poison_before_window(sh.window);
    f.k_pool = probe.k_pool;
    f.v_pool = probe.v_pool;
  }
  const int32_t q_dim = s.num_heads * s.head_dim;
  const int64_t q_stride = q_dim + 3;
  std::vector<int32_t> positions, seq_of;
  std::vector<gb::cuda::PrefillTile> tiles;
  for (size_t i = 0; i < lens.size(); ++i) {
    const int32_t first = static_cast<int32_t>(positions.size());
    for (int32_t p = lens[i] - n_new[i]; p < lens[i]; ++p) {
      positions.push_back(p);
      seq_of.push_back(static_cast<int32_t>(i));
    }
    for (int32_t t = 0; t < n_new[i]; t += gb::cuda::kPrefillTileTokens)
      tiles.push_back({static_cast<int32_t>(i), first + t, std::min(gb::cuda::kPrefillTileTokens, n_new[i] - t)});
  }
  const int32_t num_tokens = static_cast<int32_t>(positions.size());
  const std::vector<float> q = random_floats(static_cast<size_t>(num_tokens * q_stride), seed + 1);
  DeviceArray<float> d_q(q), d_k(f.k_pool), d_v(f.v_pool), d_out(static_cast<size_t>(num_tokens) * q_dim);
  DeviceArray<int32_t> d_blocks(f.block_ids), d_indptr(f.block_indptr), d_pos(positions);
  DeviceArray<int32_t> d_tiles(static_cast<size_t>(tiles.size()) * 3);
  std::vector<int32_t> tile_words(tiles.size() * 3);
  std::memcpy(tile_words.data(), tiles.data(), tile_words.size() * sizeof(int32_t));
  d_tiles.upload(tile_words);
  const gb::cuda::AttentionIo io{d_q.get(), q_stride, d_out.get(), s.num_heads, sh.scale, sh.softcap, sh.window};
  const gb::cuda::PagedKv kv{d_k.get(), d_v.get(), d_blocks.get(), d_indptr.get(), s.block_size, s.num_kv_heads,
                             s.head_dim};
  GB_CUDA_OK(gb::cuda::launch_paged_attention_prefill(io, kv, d_pos.get(),
                                                      reinterpret_cast<const gb::cuda::PrefillTile*>(d_tiles.get()),
                                                      static_cast<int32_t>(tiles.size()), nullptr));
  std::vector<float> ref(static_cast<size_t>(num_tokens) * q_dim);
  for (int32_t t = 0; t < num_tokens; ++t)
    for (int32_t h = 0; h < s.num_heads; ++h)
      f.reference(static_cast<size_t>(seq_of[static_cast<size_t>(t)]), positions[static_cast<size_t>(t)], h, q.data() + t * q_stride + h * s.head_dim,
                  ref.data() + static_cast<size_t>(t) * q_dim + static_cast<size_t>(h) * s.head_dim, sh.scale,
                  sh.softcap, sh.window);
  const auto d = compare(ref, d_out.download());
  QVERIFY2(d.max_abs <= 2e-5, d.describe().c_str());
}

}  // namespace

// stories260K's attention shape: 8 heads over 4 kv heads of 8 dims.
GB_TEST(decode_small_heads_gqa) { check_decode({8, 4, 8, 16}, {1, 5, 16, 17, 40}, 1); }
// Contexts over one and over two partitions, odd block size, head_dim 72.
GB_TEST(decode_long_context_split_and_merged) { check_decode({6, 2, 72, 7}, {1300, 3, 513, 512, 1025}, 2); }
// Largest supported head (256) and multi-query attention (one kv head).
GB_TEST(decode_head_dim_256_mqa) { check_decode({4, 1, 256, 16}, {700, 33}, 3); }

GB_TEST(prefill_ragged_batch_from_empty_cache) {
  check_prefill({8, 4, 8, 16}, {5, 17, 40, 1}, {5, 17, 40, 1}, 4);
}
GB_TEST(prefill_chunk_after_cached_prefix) {
  // New tokens continue contexts that are partly cached (chunked prefill, mixed steps).
  check_prefill({6, 2, 72, 7}, {300, 45, 19}, {37, 1, 19}, 5);
}
GB_TEST(prefill_head_dim_256_needs_large_shared_memory) { check_prefill({4, 2, 256, 16}, {70, 9}, {70, 4}, 6); }
GB_TEST(prefill_head_dim_128_llama_shape) { check_prefill({32, 8, 128, 16}, {600}, {250}, 7); }

// Sliding windows (blocks wholly before every window hold NaN, as if released),
// Gemma's query scale and soft-cap, in both kernels; windows longer than a
// decode partition and shorter than a key chunk.
GB_TEST(decode_sliding_window_scale_softcap) {
  check_decode({8, 4, 8, 16}, {1, 5, 16, 17, 40, 300}, 8, {0.0f, 0.0f, 6});
  check_decode({6, 2, 72, 7}, {1300, 3, 700}, 9, {0.1f, 5.0f, 600});
  check_decode({4, 2, 256, 16}, {90, 33}, 10, {0.0625f, 50.0f, 0});
}
GB_TEST(prefill_sliding_window_scale_softcap) {
  check_prefill({8, 4, 8, 16}, {5, 17, 40, 1}, {5, 17, 40, 1}, 11, {0.0f, 0.0f, 6});
  check_prefill({6, 2, 72, 7}, {300, 45, 19}, {37, 1, 19}, 12, {0.1f, 5.0f, 20});
  check_prefill({4, 2, 128, 16}, {200}, {120}, 13, {0.0625f, 30.0f, 50});
}
