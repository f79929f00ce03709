#include "backend/cpu_weights.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/weight_type.h"
#include "model/mapped_file.h"

namespace gb {

namespace {

std::shared_ptr<std::byte[]> aligned_buffer(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
}

// Every matrix a CPU matmul reads (not the token embedding: one row is looked up
// per token, in whatever type it has).
std::vector<TensorView*> matrices(ModelWeights& w) {
  std::vector<TensorView*> out;
  for (LayerWeights& l : w.layers)
    for (TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wqkv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) out.push_back(t);
  out.push_back(&w.classifier);
  return out;
}

// Rewrites matrix t row by row into a buffer of type `to` with `rewrite_row`
// (src row, dst row, values), and points t at it; false (t as it was) when a
// row of `to` would not be whole blocks.
template <class RewriteRow>
bool rewrite_into(CpuWeights& cw, TensorView& t, kernels::WeightType to, const MappedFile* file, const void* keep,
                  ThreadPool& pool, const RewriteRow& rewrite_row) {
  const size_t src_row = t.row_bytes();
  const auto dst_row_opt = kernels::weight_bytes(to, static_cast<uint64_t>(t.cols));
  if (!dst_row_opt) return false;  // not whole blocks: the loader has refused such a file already
  const size_t dst_row = *dst_row_opt;
  auto buffer = aligned_buffer(dst_row * static_cast<size_t>(t.rows));
  const auto* src = static_cast<const std::byte*>(t.data);
  std::byte* dst = buffer.get();
  const int64_t cols = t.cols;
  pool.parallel_for(t.rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r)
      rewrite_row(src + static_cast<size_t>(r) * src_row, dst + static_cast<size_t>(r) * dst_row, cols);
  }, 16);
  // The file's pages of this matrix are not needed any more (unless the same
  // bytes are also the token embedding, which is read from the file).
  if (file != nullptr && t.data != keep) {
    file->release_pages(t.data, src_row * static_cast<size_t>(t.rows));
    cw.released_bytes += src_row * static_cast<size_t>(t.rows);
  }
  t.data = dst;
  t.dtype = to;
  cw.repacked_bytes += dst_row * static_cast<size_t>(t.rows);
  cw.buffers.push_back(std::move(buffer));
  return true;
}

// A float matrix taking float32 activations (F32, F16) as BF16: each value
// rounded to nearest even from its float32 value (exact for F16's and F32's
// values alike), what a BF16 file made from this one would hold.
bool round_to_bf16(CpuWeights& cw, TensorView& t, const MappedFile* file, const void* keep, ThreadPool& pool) {
  const kernels::WeightTypeTraits& from = kernels::weight_traits(t.dtype);
  if (t.data == nullptr || t.rows <= 0 || from.block_elements != 1 || from.activation != kernels::ActivationType::F32)
    return false;
  const kernels::WeightTypeTraits& bf16 = kernels::weight_traits(kernels::WeightType::BF16);
  const bool done = rewrite_into(cw, t, kernels::WeightType::BF16, file, keep, pool,
                                 [&](const std::byte* src, std::byte* dst, int64_t cols) {
                                   thread_local std::vector<float> row;
                                   row.resize(static_cast<size_t>(cols));
                                   from.dequantize_row(src, row.data(), cols);
                                   bf16.quantize_row(row.data(), dst, cols);
                                 });
  cw.bf16_tensors += done ? 1 : 0;
  return done;
}

bool repack(CpuWeights& cw, TensorView& t, const MappedFile* file, const void* keep, ThreadPool& pool) {
  const kernels::WeightTypeTraits& from = kernels::weight_traits(t.dtype);
  if (t.data == nullptr || from.repack_row == nullptr || t.rows <= 0) return false;
  const bool done = rewrite_into(cw, t, from.cpu_layout, file, keep, pool,
                                 [&](const std::byte* src, std::byte* dst, int64_t cols) { from.repack_row(src, dst, cols); });
  cw.repacked_tensors += done ? 1 : 0;
  return done;
}

std::shared_ptr<const CpuWeights> make_cpu_weights(const std::shared_ptr<const Model>& model,
                                                   const CpuWeightsOptions& options, ThreadPool& pool) {
  auto cw = std::make_shared<CpuWeights>();
  cw->model = model;
  cw->weights = model->weights;
  const void* embedding = model->weights.token_embedding.data;
  for (TensorView* t : matrices(cw->weights)) {
    if (options.bf16_matmuls && round_to_bf16(*cw, *t, model->file.get(), embedding, pool)) continue;
    if (options.repack) repack(*cw, *t, model->file.get(), embedding, pool);
  }
  return cw;
}

}  // namespace

std::shared_ptr<const CpuWeights> cpu_weights(const std::shared_ptr<const Model>& model, const CpuWeightsOptions& asked,
                                              ThreadPool& pool) {
  CpuWeightsOptions options = asked;
  // GLASSBOX_CPU_REPACK=0: read every type in place (to compare speed and memory).
  if (const char* env = std::getenv("GLASSBOX_CPU_REPACK"); env != nullptr && std::string_view(env) == "0")
    options.repack = false;
  if (!options.repack && !options.bf16_matmuls) {
    auto cw = std::make_shared<CpuWeights>();
    cw->model = model;
    cw->weights = model->weights;
    return cw;
  }
  static std::mutex mutex;
  static std::map<std::pair<const Model*, bool>, std::weak_ptr<const CpuWeights>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  for (auto it = cache.begin(); it != cache.end();) it = it->second.expired() ? cache.erase(it) : std::next(it);
  // GLASSBOX_CPU_REPACK is read once per process in practice; the key names
  // what differs between backends of one process.
  const std::pair<const Model*, bool> key{model.get(), options.bf16_matmuls};
  if (auto found = cache.find(key); found != cache.end())
    if (auto cw = found->second.lock()) return cw;
  auto cw = make_cpu_weights(model, options, pool);
  cache[key] = cw;
  return cw;
}

}  // namespace gb
