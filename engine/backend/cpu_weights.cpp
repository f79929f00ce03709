#include "backend/cpu_weights.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string_view>

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

void repack_into(CpuWeights& cw, TensorView& t, const MappedFile* file, const void* keep, ThreadPool& pool) {
  const kernels::WeightTypeTraits& from = kernels::weight_traits(t.dtype);
  if (t.data == nullptr || from.repack_row == nullptr || t.rows <= 0) return;
  const kernels::WeightType to = from.cpu_layout;
  const size_t src_row = t.row_bytes();
  const auto dst_row_opt = kernels::weight_bytes(to, static_cast<uint64_t>(t.cols));
  if (!dst_row_opt) return;  // not whole blocks: the loader has refused such a file already
  const size_t dst_row = *dst_row_opt;
  auto buffer = aligned_buffer(dst_row * static_cast<size_t>(t.rows));
  const auto* src = static_cast<const std::byte*>(t.data);
  std::byte* dst = buffer.get();
  const int64_t cols = t.cols;
  pool.parallel_for(t.rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r)
      from.repack_row(src + static_cast<size_t>(r) * src_row, dst + static_cast<size_t>(r) * dst_row, cols);
  }, 16);
  // The file's pages of this matrix are not needed any more (unless the same
  // bytes are also the token embedding, which is read from the file).
  if (file != nullptr && t.data != keep) file->release_pages(t.data, src_row * static_cast<size_t>(t.rows));
  t.data = dst;
  t.dtype = to;
  cw.repacked_bytes += dst_row * static_cast<size_t>(t.rows);
  cw.repacked_tensors += 1;
  cw.buffers.push_back(std::move(buffer));
}

std::shared_ptr<const CpuWeights> make_repacked(const std::shared_ptr<const Model>& model, ThreadPool& pool) {
  auto cw = std::make_shared<CpuWeights>();
  cw->model = model;
  cw->weights = model->weights;
  const void* embedding = model->weights.token_embedding.data;
  for (TensorView* t : matrices(cw->weights)) repack_into(*cw, *t, model->file.get(), embedding, pool);
  return cw;
}

}  // namespace

std::shared_ptr<const CpuWeights> cpu_weights(const std::shared_ptr<const Model>& model, bool repack, ThreadPool& pool) {
  // GLASSBOX_CPU_REPACK=0: read every type in place (to compare speed and memory).
  if (const char* env = std::getenv("GLASSBOX_CPU_REPACK"); env != nullptr && std::string_view(env) == "0") repack = false;
  if (!repack) {
    auto cw = std::make_shared<CpuWeights>();
    cw->model = model;
    cw->weights = model->weights;
    return cw;
  }
  static std::mutex mutex;
  static std::map<const Model*, std::weak_ptr<const CpuWeights>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  for (auto it = cache.begin(); it != cache.end();) it = it->second.expired() ? cache.erase(it) : std::next(it);
  if (auto found = cache.find(model.get()); found != cache.end())
    if (auto cw = found->second.lock()) return cw;
  auto cw = make_repacked(model, pool);
  cache[model.get()] = cw;
  return cw;
}

}  // namespace gb
