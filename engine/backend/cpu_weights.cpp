#include "backend/cpu_weights.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/decode_tuning.h"
#include "backend/kv_pool_sizing.h"
#include "core/host_region.h"
#include "core/thread_pool.h"
#include "cpu/weight_type.h"
#include "model/mapped_file.h"

namespace gb {

namespace {

// Every matrix a CPU matmul reads (not the token embedding: one row is looked up
// per token, in whatever type it has).
std::vector<TensorView*> matrices(ModelWeights& w) {
  std::vector<TensorView*> out;
  for (LayerWeights& l : w.layers)
    for (TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wqkv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) out.push_back(t);
  out.push_back(&w.classifier);
  return out;
}

constexpr size_t kMatrixAlign = 64;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// How a matrix is held by the CPU backend.
enum class Held { File, Layout, Bf16, Copy };

struct Placement {
  TensorView* t = nullptr;
  Held how = Held::File;
  kernels::WeightType to = kernels::WeightType::F32;
  size_t bytes = 0;   // of the held matrix
  size_t offset = 0;  // in the region
};

// What `options` make of matrix t: a CPU layout (same values, same bits), BF16
// (float matrices taking float32 activations, when bf16_matmuls asks), an
// unchanged copy (huge_pages), or the file's bytes in place. A type whose rows
// would not be whole blocks stays in the file (the loader refuses such files).
Placement place(TensorView& t, const CpuWeightsOptions& options) {
  Placement p;
  p.t = &t;
  if (t.data == nullptr || t.rows <= 0) return p;
  const kernels::WeightTypeTraits& from = kernels::weight_traits(t.dtype);
  if (options.bf16_matmuls && from.block_elements == 1 && from.activation == kernels::ActivationType::F32) {
    p.how = Held::Bf16;
    p.to = kernels::WeightType::BF16;
  } else if (options.repack && from.repack_row != nullptr) {
    p.how = Held::Layout;
    p.to = from.cpu_layout;
  } else if (options.huge_pages) {
    p.how = Held::Copy;
    p.to = t.dtype;
  } else {
    return p;
  }
  const auto row = kernels::weight_bytes(p.to, static_cast<uint64_t>(t.cols));
  if (!row) return Placement{&t};
  p.bytes = *row * static_cast<size_t>(t.rows);
  return p;
}

// Writes matrix p.t into dst as p says, 8 MiB of the file's rows at a time
// split over `pool`, each slice's file pages handed back once written, so the
// file's pages and the copy are not both resident for more than a slice.
constexpr size_t kSliceBytes = size_t{8} << 20;
void rewrite(const Placement& p, std::byte* dst, const MappedFile* file, ThreadPool& pool) {
  const TensorView& t = *p.t;
  const kernels::WeightTypeTraits& from = kernels::weight_traits(t.dtype);
  const kernels::WeightTypeTraits& to = kernels::weight_traits(p.to);
  const size_t src_row = t.row_bytes(), dst_row = p.bytes / static_cast<size_t>(t.rows);
  const auto* src = static_cast<const std::byte*>(t.data);
  const int64_t cols = t.cols;
  const auto slice_rows = static_cast<int64_t>(std::max<size_t>(1, kSliceBytes / std::max<size_t>(1, src_row)));
  for (int64_t first = 0; first < t.rows; first += slice_rows) {
    const int64_t rows = std::min(slice_rows, t.rows - first);
    pool.parallel_for(rows, [&](int64_t begin, int64_t end, int) {
      std::vector<float> values(p.how == Held::Bf16 ? static_cast<size_t>(cols) : 0);
      for (int64_t r = first + begin; r < first + end; ++r) {
        const std::byte* s = src + static_cast<size_t>(r) * src_row;
        std::byte* d = dst + static_cast<size_t>(r) * dst_row;
        switch (p.how) {
          case Held::Layout: from.repack_row(s, d, cols); break;
          case Held::Bf16:  // rounded to nearest even from the float32 value (exact for F16's and F32's values)
            from.dequantize_row(s, values.data(), cols);
            to.quantize_row(values.data(), d, cols);
            break;
          case Held::Copy: std::memcpy(d, s, src_row); break;
          case Held::File: break;
        }
      }
    }, 16);
    // Whole pages inside the slice only; the pages it shares with its
    // neighbours go with the whole matrix below.
    if (file != nullptr) file->release_pages(src + static_cast<size_t>(first) * src_row, static_cast<size_t>(rows) * src_row);
  }
  if (file != nullptr) file->release_pages(src, t.num_bytes());
}

// Places the held matrices one after another, each 64-byte aligned; the
// region's size.
size_t assign_offsets(std::vector<Placement>& held) {
  size_t total = 0;
  for (Placement& p : held) {
    p.offset = total;
    total += align_up(p.bytes, kMatrixAlign);
  }
  return total;
}

bool has_copies(const std::vector<Placement>& held) {
  return std::any_of(held.begin(), held.end(), [](const Placement& p) { return p.how == Held::Copy; });
}

// The decode prefetch distance of every type the matrices hold, measured on
// this processor the first time (backend/decode_tuning.h), in the matrices'
// final memory.
void choose_decode_prefetch(CpuWeights& cw) {
  const std::vector<TensorView*> list = matrices(cw.weights);
  const std::vector<const TensorView*> views(list.begin(), list.end());
  cw.decode_prefetch = process_decode_prefetch(views, cw.huge_pages);
}

std::shared_ptr<CpuWeights> make_cpu_weights(const std::shared_ptr<const Model>& model,
                                             const CpuWeightsOptions& options, ThreadPool& pool) {
  auto cw = std::make_shared<CpuWeights>();
  cw->model = model;
  cw->weights = model->weights;
  std::vector<Placement> held;
  int read_matrices = 0;  // matrices a step reads (the model's, not empty)
  for (TensorView* t : matrices(cw->weights)) {
    read_matrices += t->data != nullptr && t->rows > 0 ? 1 : 0;
    if (Placement p = place(*t, options); p.how != Held::File) held.push_back(p);
  }
  // Unchanged copies only speed reading up: where they would not fit in the
  // memory there is (a model near the machine's size), or the address space
  // cannot hold them (RLIMIT_AS), the file is read in place.
  const auto drop_copies = [&] {
    std::erase_if(held, [](const Placement& p) { return p.how == Held::Copy; });
    return assign_offsets(held);
  };
  size_t total = assign_offsets(held);
  if (has_copies(held)) {
    const size_t available = available_host_memory();
    const size_t margin = std::max<size_t>(size_t{512} << 20, available / 20);
    if (available > 0 && total + margin > available) total = drop_copies();
  }
  if (held.empty()) return cw;
  std::shared_ptr<std::byte[]> region;
  try {
    region = host_region(total, options.huge_pages);
  } catch (const std::bad_alloc&) {
    if (!has_copies(held)) throw;
    total = drop_copies();
    if (held.empty()) return cw;
    region = host_region(total, options.huge_pages);
  }
  cw->huge_pages = options.huge_pages && static_cast<int>(held.size()) == read_matrices;
  const MappedFile* file = model->file.get();
  for (const Placement& p : held) {
    TensorView& t = *p.t;
    std::byte* dst = region.get() + p.offset;
    // The file's pages of this matrix go back as it is written. A classifier
    // tied to the token embedding's too: the copy read every page in, and
    // lookups fault back only the rows of the tokens they read (page cache).
    rewrite(p, dst, file, pool);
    if (file != nullptr) cw->released_bytes += t.num_bytes();
    t.data = dst;
    t.dtype = p.to;
    cw->owned_bytes += p.bytes;
    cw->repacked_tensors += p.how == Held::Layout ? 1 : 0;
    cw->bf16_tensors += p.how == Held::Bf16 ? 1 : 0;
    cw->copied_tensors += p.how == Held::Copy ? 1 : 0;
  }
  cw->buffers.push_back(std::move(region));
  return cw;
}

}  // namespace

std::shared_ptr<const CpuWeights> cpu_weights(const std::shared_ptr<const Model>& model, const CpuWeightsOptions& asked,
                                              ThreadPool& pool) {
  CpuWeightsOptions options = asked;
  // GLASSBOX_CPU_REPACK=0: read every type in place (to compare speed and memory).
  if (const char* env = std::getenv("GLASSBOX_CPU_REPACK"); env != nullptr && std::string_view(env) == "0")
    options.repack = false;
  // GLASSBOX_CPU_HUGE_PAGES=0: no unchanged copies (to compare speed and memory).
  if (const char* env = std::getenv("GLASSBOX_CPU_HUGE_PAGES"); env != nullptr && std::string_view(env) == "0")
    options.huge_pages = false;
  options.huge_pages = options.huge_pages && transparent_huge_pages_available();
  if (!options.repack && !options.bf16_matmuls && !options.huge_pages) {
    auto cw = std::make_shared<CpuWeights>();
    cw->model = model;
    cw->weights = model->weights;
    choose_decode_prefetch(*cw);
    return cw;
  }
  static std::mutex mutex;
  static std::map<std::tuple<const Model*, bool, bool>, std::weak_ptr<const CpuWeights>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  for (auto it = cache.begin(); it != cache.end();) it = it->second.expired() ? cache.erase(it) : std::next(it);
  // GLASSBOX_CPU_REPACK is read once per process in practice; the key names
  // what differs between backends of one process.
  const std::tuple<const Model*, bool, bool> key{model.get(), options.bf16_matmuls, options.huge_pages};
  if (auto found = cache.find(key); found != cache.end())
    if (auto cw = found->second.lock()) return cw;
  auto cw = make_cpu_weights(model, options, pool);
  choose_decode_prefetch(*cw);
  cache[key] = cw;
  return cw;
}

}  // namespace gb
