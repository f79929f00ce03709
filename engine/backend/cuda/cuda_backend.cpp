// CudaBackendImpl: the CUDA implementation of gb::Backend (see cuda_backend.h).
//
// One step, for T new tokens and L logit rows, all on stream_, is the model's
// layer recipe (backend/layer_recipe.h) run through this class's LayerOps:
//   x (T, dim) = embedding rows (x scale)
//   per layer: xb = rmsnorm(x) * attn_norm
//              qkv (T, q_dim + 2 kv_dim) = xb wqkv^T (q, k, v are strided views
//              of it); biases, per-head q/k norms, rope on the q and k parts
//              k, v -> KV pool slots; att (T, q_dim) = paged attention
//              x += att wo^T                    (residual fused: GEMM beta = 1)
//                or proj = att wo^T, post-norm, x += proj (Gemma)
//              xb = rmsnorm(x) * ffn_norm
//              gate_up (T, 2 hidden) = xb w_gate_up^T; h (T, hidden) = act(gate) * up
//              x += h w_down^T                  (or via proj and a post-norm)
//   xl (L, dim) = rmsnorm(x[logit rows]) * output_norm; logits (L, vocab) = xl classifier^T
//   (soft-capped where the model says so)
// The host waits for the stream once, at the end of the step.
#include "backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_weights.h"
#include "backend/cuda/step_metadata.h"
#include "backend/layer_recipe.h"
#include "cpu/weight_type.h"
#include "cuda/cuda_kernels.h"
#include "model/model.h"

namespace gb {
namespace {

using cuda::DeviceBuffer;
using cuda::DeviceMatrix;
using cuda::DeviceProjection;

// Bound on the float32 tile a quantized prefill GEMM dequantizes into (32 MiB).
constexpr size_t kQuantTileFloats = size_t{8} << 20;

Status reserve_floats(DeviceBuffer& buffer, size_t count, const char* what) {
  return buffer.reserve(count * sizeof(float), what);
}

class CudaBackendImpl final : public CudaBackend, private LayerOps {
 public:
  CudaBackendImpl(std::shared_ptr<const Model> model, const CudaBackendOptions& options)
      : model_(std::move(model)), config_(model_->config), options_(options), recipe_(model_recipe(config_)) {}

  ~CudaBackendImpl() override {
    // Errors cannot be reported from a destructor; a failed sync only means the
    // context is already broken, and the frees below are still correct.
    if (stream_) cudaStreamSynchronize(stream_);
    if (cublas_) cublasDestroy(cublas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status init() {
    GB_CUDA_TRY(cudaSetDevice(options_.device_index));
    cudaDeviceProp prop{};
    GB_CUDA_TRY(cudaGetDeviceProperties(&prop, options_.device_index));
    device_name_ = prop.name;
    GB_CUDA_TRY(cudaStreamCreate(&stream_));
    GB_CUBLAS_TRY(cublasCreate(&cublas_));
    GB_CUBLAS_TRY(cublasSetStream(cublas_, stream_));
    GB_CUBLAS_TRY(cublasSetMathMode(cublas_, options_.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    GB_TRY(weights_.upload(*model_));
    return plan_matrix_workspaces();
  }

  Status init_kv_pool(const KvPoolSpec& spec) override {
    GB_CUDA_TRY(cudaSetDevice(options_.device_index));
    if (spec.num_blocks <= 0 || spec.block_size <= 0)
      return make_error("CUDA backend: KV pool needs a positive block count and block size");
    // Sliding layers share the one table here (supports_window_group() is false).
    if (spec.num_window_blocks > 0) return make_error("CUDA backend: the KV pool keeps no window group");
    // The CUDA attention kernels read F32, F16 and BF16 K/V (kv_types()).
    if (!cuda::kv_type_supported(spec.k_type) || !cuda::kv_type_supported(spec.v_type))
      return make_error(std::string("CUDA backend: KV types K ") + std::string(dtype_info(spec.k_type).name) + " / V " +
                        std::string(dtype_info(spec.v_type).name) +
                        ": its attention kernels read F32, F16 and BF16 K/V (or use --device cpu for the block types)");
    pool_ = spec;
    layer_floats_ = static_cast<size_t>(spec.num_blocks) * static_cast<size_t>(spec.block_size) *
                    static_cast<size_t>(config_.kv_dim());
    k_elem_bytes_ = dtype_info(spec.k_type).block_bytes;
    v_elem_bytes_ = dtype_info(spec.v_type).block_bytes;
    const size_t bytes = layer_floats_ * (k_elem_bytes_ + v_elem_bytes_) * static_cast<size_t>(config_.num_layers);
    kv_pool_.release();
    GB_TRY(kv_pool_.allocate(bytes, "the KV pool"));
    // Zeroed so that inspection of never-written slots reads zeros, not garbage.
    GB_CUDA_TRY(cudaMemsetAsync(kv_pool_.get(), 0, bytes, stream_));
    GB_CUDA_TRY(cudaStreamSynchronize(stream_));
    return {};
  }

  // Which projections need an F16/BF16 copy of their input (needs_cast_), and
  // the tile workspace of the quantized ones: up to kQuantTileFloats, at least
  // one row of the widest quantized matrix, no more than its whole matrix.
  Status plan_matrix_workspaces() {
    size_t tile_floats = 0;
    auto visit = [&](const DeviceProjection& p) {
      for (int32_t i = 0; i < p.num_parts; ++i) {
        const DeviceMatrix& m = p.parts[static_cast<size_t>(i)];
        if (kernels::is_quantized(m.dtype)) {
          const auto cols = static_cast<size_t>(m.cols), all = static_cast<size_t>(m.rows) * cols;
          tile_floats = std::max(tile_floats, std::max(cols, std::min(all, kQuantTileFloats)));
        } else {
          needs_cast_ |= m.dtype != WeightType::F32;
        }
      }
    };
    visit(weights_.classifier());
    for (const cuda::DeviceLayer& l : weights_.layers())
      for (const DeviceProjection* p : {&l.wqkv, &l.wo, &l.w_gate_up, &l.w_down}) visit(*p);
    if (tile_floats > 0) GB_TRY(reserve_floats(quant_tile_, tile_floats, "dequantized weight tiles"));
    return {};
  }

  // Every step buffer at its size for the largest step; run_step still grows
  // one for a step beyond the limits (longer drafts than reserved for).
  Status reserve_work(const StepLimits& limits) override {
    GB_CUDA_TRY(cudaSetDevice(options_.device_index));
    const auto tokens = static_cast<size_t>(std::max(1, limits.max_tokens));
    const auto rows = static_cast<size_t>(std::max(1, limits.max_logits));
    GB_TRY(ensure_workspace(tokens, rows));
    const int32_t seqs = std::max(1, limits.max_seqs), context = std::max(1, limits.max_context);
    GB_TRY(reserve_floats(attn_ws_, cuda::decode_attention_workspace_floats(seqs, config_.num_heads, config_.head_dim, context),
                          "attention partials"));
    const int32_t block_size = std::max(1, limits.block_size);
    const int32_t blocks_per_seq = (context + block_size - 1) / block_size + 1;
    GB_TRY(metadata_.reserve(limits.max_tokens, seqs, limits.max_logits, blocks_per_seq));
    work_reserved_ = work_bytes();
    return {};
  }
  size_t work_bytes_reserved() const override { return work_reserved_; }

  size_t kv_pool_bytes() const override { return kv_pool_.bytes(); }
  std::vector<WeightType> kv_types() const override { return {WeightType::F32, WeightType::F16, WeightType::BF16}; }

  Status forward(const BatchLayout& batch, std::span<float> logits) override {
    return forward_inspect(batch, 0, {}, logits);
  }

  // The epilogue over given rows: they are uploaded as the X rows of a step of
  // n one-token sequences (each at position 0 of pool block 0, which the
  // epilogue never reads) whose logit rows are all of them.
  Status epilogue_rows(std::span<const float> x, int32_t n, std::span<float> logits) override {
    const ModelConfig& c = config_;
    if (n <= 0) return {};
    if (x.size() < static_cast<size_t>(n) * static_cast<size_t>(c.dim) ||
        logits.size() < static_cast<size_t>(n) * static_cast<size_t>(c.vocab_size))
      return make_error("CUDA backend: epilogue_rows given fewer values than n rows need");
    GB_TRY(require_pool());
    GB_CUDA_TRY(cudaSetDevice(options_.device_index));
    GB_CUDA_TRY(cudaStreamSynchronize(stream_));
    BatchLayout rows;
    const int32_t block0 = 0;
    for (int32_t i = 0; i < n; ++i) {
      const TokenId token = 0;
      rows.add_sequence_rows(&token, 1, 0, &block0, 1, 1);
    }
    GB_TRY(metadata_.plan(rows, c.vocab_size, pool_.num_blocks, pool_.block_size, c.kv_release_window(), stream_));
    num_seqs_ = n;
    num_tokens_ = n;
    num_logits_ = n;
    GB_TRY(ensure_workspace(static_cast<size_t>(n), static_cast<size_t>(n)));
    GB_CUDA_TRY(cudaMemcpyAsync(x_.as<float>(), x.data(), static_cast<size_t>(n) * static_cast<size_t>(c.dim) * sizeof(float),
                                cudaMemcpyHostToDevice, stream_));
    GB_TRY(run_steps(recipe_.epilogue, *this));
    GB_CUDA_TRY(cudaMemcpyAsync(logits.data(), logits_.get(),
                                static_cast<size_t>(n) * static_cast<size_t>(c.vocab_size) * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
    GB_CUDA_TRY(cudaStreamSynchronize(stream_));
    return {};
  }

  // The capture steps copy their row to the host on the step's stream;
  // forward_inspect drains it before returning.
  Status forward_capture(const BatchLayout& batch, std::span<float> logits, CaptureRows& rows) override {
    const ModelConfig& c = config_;
    if (rows.token < 0 || rows.token >= batch.num_tokens())
      return make_error("capture of token " + std::to_string(rows.token) + " of a step with " +
                        std::to_string(batch.num_tokens()) + " tokens");
    rows.reset(c.num_layers, c.dim, q_dim());
    capture_ = &rows;
    Status st = forward(batch, logits);
    capture_ = nullptr;
    return st;
  }

  Status forward_inspect(const BatchLayout& batch, int32_t top_n, std::span<LogitSummary> summaries,
                         std::span<float> logits) override {
    const size_t num_logits = static_cast<size_t>(batch.num_logits());
    const size_t vocab = static_cast<size_t>(config_.vocab_size);
    if (batch.has_kv_slots() || batch.mass != nullptr)
      return make_error("CUDA backend: KV eviction (slots that are not positions, attention mass) runs on the CPU backend");
    if (!logits.empty() && logits.size() < num_logits * vocab)
      return make_error("CUDA backend: logits output holds " + std::to_string(logits.size()) + " floats, the step needs " +
                        std::to_string(num_logits * vocab));
    if (top_n < 0 || top_n > cuda::kMaxTopN || (top_n > 0 && summaries.size() < num_logits))
      return make_error("CUDA backend: summaries need num_logits entries and 0 <= top_n <= 256");
    GB_TRY(run_step(batch));
    if (num_logits > 0 && !logits.empty())
      GB_CUDA_TRY(cudaMemcpyAsync(logits.data(), logits_.get(), num_logits * vocab * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_));
    if (num_logits > 0 && top_n > 0) GB_TRY(summarise(static_cast<int32_t>(num_logits), top_n, summaries));
    GB_CUDA_TRY(cudaStreamSynchronize(stream_));
    return {};
  }

  Status copy_blocks(std::span<const std::pair<int32_t, int32_t>> src_dst, KvGroup group) override {
    GB_TRY(require_pool());
    if (group != KvGroup::Main) return make_error("CUDA backend: the KV pool has no window group");
    const size_t block_values = layer_floats_ / static_cast<size_t>(pool_.num_blocks);
    for (const auto& [src, dst] : src_dst) {
      if (src < 0 || dst < 0 || src >= pool_.num_blocks || dst >= pool_.num_blocks)
        return make_error("CUDA backend: copy_blocks names a block outside the pool");
      for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
        for (const auto& [plane, elem] : {std::pair{k_plane(layer), k_elem_bytes_}, std::pair{v_plane(layer), v_elem_bytes_}}) {
          const size_t block_bytes = block_values * elem;
          GB_CUDA_TRY(cudaMemcpyAsync(plane + static_cast<size_t>(dst) * block_bytes,
                                      plane + static_cast<size_t>(src) * block_bytes, block_bytes,
                                      cudaMemcpyDeviceToDevice, stream_));
        }
      }
    }
    GB_CUDA_TRY(cudaStreamSynchronize(stream_));
    return {};
  }

  Status read_kv_slot(int32_t layer, int32_t block, int32_t slot, std::span<float> k,
                      std::span<float> v) const override {
    GB_TRY(require_pool());
    const size_t kv_dim = static_cast<size_t>(config_.kv_dim());
    if (layer < 0 || layer >= config_.num_layers || block < 0 || block >= pool_.num_blocks || slot < 0 ||
        slot >= pool_.block_size || k.size() < kv_dim || v.size() < kv_dim)
      return make_error("CUDA backend: read_kv_slot out of range");
    const size_t row = (static_cast<size_t>(block) * static_cast<size_t>(pool_.block_size) + static_cast<size_t>(slot)) * kv_dim;
    GB_CUDA_TRY(cudaStreamSynchronize(stream_));
    // The stored values, widened on the host with the weight-type table's row reader.
    std::vector<uint8_t> raw(kv_dim * sizeof(float));
    for (const auto& [out, plane, elem, type] :
         {std::tuple{k.data(), k_plane(layer), k_elem_bytes_, pool_.k_type},
          std::tuple{v.data(), v_plane(layer), v_elem_bytes_, pool_.v_type}}) {
      GB_CUDA_TRY(cudaMemcpy(raw.data(), plane + row * elem, kv_dim * elem, cudaMemcpyDeviceToHost));
      kernels::weight_traits(type).dequantize_row(raw.data(), out, static_cast<int64_t>(kv_dim));
    }
    return {};
  }

  DeviceInfo device_info() const override {
    DeviceInfo info;
    info.backend = "cuda";
    info.name = device_name_;
    info.memory_used_bytes = weights_.bytes() + kv_pool_.bytes() + work_bytes() + quant_tile_.bytes();
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      info.memory_total_bytes = total_bytes;
      info.memory_free_bytes = free_bytes;
    }
    return info;
  }

 private:
  // The step buffers' device bytes (reserve_work sizes them).
  size_t work_bytes() const {
    size_t bytes = metadata_.device_bytes();
    for (const DeviceBuffer* b : {&x_, &xb_, &qkv_, &att_, &proj_, &gate_up_, &hidden_, &lowp_, &xl_, &logits_, &attn_ws_,
                                  &summary_})
      bytes += b->bytes();
    return bytes;
  }

  // Layer l's K plane, then its V plane, each layer_floats_ values of its type.
  uint8_t* k_plane(int32_t layer) const {
    return static_cast<uint8_t*>(kv_pool_.get()) + static_cast<size_t>(layer) * layer_floats_ * (k_elem_bytes_ + v_elem_bytes_);
  }
  uint8_t* v_plane(int32_t layer) const { return k_plane(layer) + layer_floats_ * k_elem_bytes_; }

  Status require_pool() const {
    if (kv_pool_.get() == nullptr) return make_error("CUDA backend: init_kv_pool() has not been called");
    return {};
  }

  int32_t q_dim() const { return config_.num_heads * config_.head_dim; }
  int32_t qkv_dim() const { return q_dim() + 2 * config_.kv_dim(); }

  Status ensure_workspace(size_t num_tokens, size_t num_logits) {
    const size_t dim = static_cast<size_t>(config_.dim), hidden = static_cast<size_t>(config_.hidden_dim);
    GB_TRY(reserve_floats(x_, num_tokens * dim, "activations"));
    GB_TRY(reserve_floats(xb_, num_tokens * dim, "activations"));
    GB_TRY(reserve_floats(qkv_, num_tokens * static_cast<size_t>(qkv_dim()), "q/k/v"));
    GB_TRY(reserve_floats(att_, num_tokens * static_cast<size_t>(q_dim()), "attention output"));
    if (config_.post_norms) GB_TRY(reserve_floats(proj_, num_tokens * dim, "projection output"));
    GB_TRY(reserve_floats(gate_up_, num_tokens * 2 * hidden, "FFN gate/up"));
    GB_TRY(reserve_floats(hidden_, num_tokens * hidden, "FFN hidden"));
    const size_t widest = std::max({dim, hidden, static_cast<size_t>(q_dim())});
    if (needs_cast_) GB_TRY(lowp_.reserve(std::max(num_tokens, num_logits) * widest * 2, "F16/BF16 activations"));
    GB_TRY(reserve_floats(xl_, std::max<size_t>(num_logits, 1) * dim, "final norm rows"));
    GB_TRY(reserve_floats(logits_, std::max<size_t>(num_logits, 1) * static_cast<size_t>(config_.vocab_size), "logits"));
    return {};
  }

  // y (n, w.rows) = x (n, w.cols) w^T + beta y, one part at a time into its columns.
  Status project(const DeviceProjection& w, const float* x, int32_t n, float* y, float beta) {
    int64_t column = 0;
    for (int32_t i = 0; i < w.num_parts; ++i) {
      const DeviceMatrix& part = w.parts[static_cast<size_t>(i)];
      GB_TRY(project_part(part, x, n, y + column, w.rows, beta));
      column += part.rows;
    }
    return {};
  }

  // Quantized weights: GEMV or dequantized tiles + cuBLAS (cuda_gemm.h); float
  // weights: cuBLAS, casting x first for F16/BF16.
  Status project_part(const DeviceMatrix& w, const float* x, int32_t n, float* y, int64_t ldy, float beta) {
    if (kernels::is_quantized(w.dtype)) {
      const cuda::QuantWorkspace ws{quant_tile_.as<float>(), quant_tile_.bytes() / sizeof(float)};
      return cuda::gemm_quant_rows(cublas_, w, x, n, y, ldy, beta, ws, stream_, options_.allow_tf32);
    }
    const void* input = x;
    if (w.dtype != WeightType::F32) {
      GB_CUDA_KERNEL(stream_, cuda::launch_cast(x, int64_t{n} * w.cols, lowp_.get(), w.dtype, stream_));
      input = lowp_.get();
    }
    return cuda::gemm_rows(cublas_, w, input, n, y, ldy, beta, options_.allow_tf32);
  }

  // --- LayerOps: the recipe's operations on this step's device buffers ---------

  // A recipe buffer: data, row stride (floats), row width and row count.
  struct View {
    float* data;
    int64_t stride;
    int32_t width;
    int32_t rows;
  };
  View view(Buf b) {
    const ModelConfig& c = config_;
    const int32_t n = num_tokens_;
    switch (b) {
      case Buf::X: return {x_.as<float>(), c.dim, c.dim, n};
      case Buf::XB: return {xb_.as<float>(), c.dim, c.dim, n};
      case Buf::Q: return {qkv_.as<float>(), qkv_dim(), q_dim(), n};
      case Buf::K: return {qkv_.as<float>() + q_dim(), qkv_dim(), c.kv_dim(), n};
      case Buf::V: return {qkv_.as<float>() + q_dim() + c.kv_dim(), qkv_dim(), c.kv_dim(), n};
      case Buf::Att: return {att_.as<float>(), q_dim(), q_dim(), n};
      case Buf::Proj: return {proj_.as<float>(), c.dim, c.dim, n};
      case Buf::Hidden: return {hidden_.as<float>(), c.hidden_dim, c.hidden_dim, n};
      case Buf::Final: return {xl_.as<float>(), c.dim, c.dim, num_logits_};
      case Buf::Logits: return {logits_.as<float>(), c.vocab_size, c.vocab_size, num_logits_};
      case Buf::None: break;
    }
    return {nullptr, 0, 0, 0};
  }

  // A float32 vector of the step's layer (norms, biases), or null when the model
  // has none: then the step is the identity, as on the CPU (an ablated model).
  const float* vec_weight(const RecipeStep& s) {
    const float* v = nullptr;
    if (s.weight == WeightSlot::OutputNorm) {
      v = weights_.output_norm();
    } else {
      const cuda::DeviceLayer& w = weights_.layers()[static_cast<size_t>(s.layer)];
      switch (s.weight) {
        case WeightSlot::AttnNorm: v = w.attn_norm; break;
        case WeightSlot::FfnNorm: v = w.ffn_norm; break;
        case WeightSlot::PostAttnNorm: v = w.post_attn_norm; break;
        case WeightSlot::PostFfnNorm: v = w.post_ffn_norm; break;
        case WeightSlot::QNorm: v = w.q_norm; break;
        case WeightSlot::KNorm: v = w.k_norm; break;
        case WeightSlot::Bq: v = w.bq; break;
        case WeightSlot::Bk: v = w.bk; break;
        case WeightSlot::Bv: v = w.bv; break;
        default: break;
      }
    }
    return v;
  }

  Error unsupported(const RecipeStep& s, const char* what) const {
    return make_error(model_->path + ": CUDA backend: recipe step '" + describe_step(s) + "' needs " + what);
  }

  Status embed(const RecipeStep&) override {
    const DeviceMatrix& emb = weights_.embedding();
    GB_CUDA_KERNEL(stream_, cuda::launch_embedding(metadata_.device().token_ids, num_tokens_, emb.data, emb.dtype, config_.dim,
                                                   x_.as<float>(), stream_));
    return {};
  }
  Status scale(const RecipeStep& s) override {
    const View o = view(s.out);
    GB_CUDA_KERNEL(stream_, cuda::launch_scale(o.data, int64_t{o.rows} * o.stride, s.value, stream_));
    return {};
  }
  Status norm(const RecipeStep& s) override {
    const View in = view(s.in), out = view(s.out);
    const float* w = vec_weight(s);
    if (w == nullptr) return {};
    GB_CUDA_KERNEL(stream_, cuda::launch_rmsnorm(in.data, nullptr, out.rows, out.width, w, s.value, out.data, stream_));
    return {};
  }
  Status norm_logit_rows(const RecipeStep& s) override {
    const float* w = vec_weight(s);
    if (w == nullptr) return {};
    GB_CUDA_KERNEL(stream_, cuda::launch_rmsnorm(view(s.in).data, metadata_.device().logit_rows, num_logits_, config_.dim, w,
                                                 s.value, view(s.out).data, stream_));
    return {};
  }
  // One GEMM into the q|k|v rows (fused or not: the weights were uploaded fused).
  Status project_qkv(const RecipeStep& s) override {
    const cuda::DeviceLayer& w = weights_.layers()[static_cast<size_t>(s.layer)];
    return project(w.wqkv, view(s.in).data, num_tokens_, qkv_.as<float>(), 0.0f);
  }
  Status add_bias(const RecipeStep& s) override {
    const View o = view(s.out);
    const float* b = vec_weight(s);
    if (b == nullptr) return {};
    GB_CUDA_KERNEL(stream_, cuda::launch_add_bias(o.data, o.rows, o.stride, o.width, b, stream_));
    return {};
  }
  Status head_norm(const RecipeStep& s) override {
    const View o = view(s.out);
    const float* w = vec_weight(s);
    if (w == nullptr) return {};
    GB_CUDA_KERNEL(stream_, cuda::launch_head_rmsnorm(o.data, o.rows, o.stride, s.heads, config_.head_dim, w, s.value, stream_));
    return {};
  }
  Status rope(const RecipeStep& s) override {
    const View o = view(s.out);
    const int32_t* positions = metadata_.device().positions;
    if (s.rope.plain()) {
      GB_CUDA_KERNEL(stream_, cuda::launch_rope(o.data, o.rows, o.stride, s.heads, config_.head_dim, s.rope.rope_dim, s.rope.base,
                                                positions, stream_));
      return {};
    }
    cuda::RopeArgs a;
    a.rope_dim = s.rope.rope_dim;
    a.base = s.rope.base;
    a.neox = s.rope.style == RopeStyle::NeoX;
    a.freq_factors = s.rope.freq_factors ? weights_.rope_freqs() : nullptr;
    a.freq_scale = s.rope.freq_scale;
    a.attn_factor = s.rope.attn_factor;
    if (s.rope.freq_factors && a.freq_factors == nullptr) return unsupported(s, "RoPE frequency factors");
    GB_CUDA_KERNEL(stream_, cuda::launch_rope_ex(o.data, o.rows, o.stride, s.heads, config_.head_dim, a, positions, stream_));
    return {};
  }
  Status kv_write(const RecipeStep& s) override {
    if (!write_kv_) return {};
    const View k = view(Buf::K), v = view(Buf::V);
    GB_CUDA_KERNEL(stream_, cuda::launch_kv_write(k.data, v.data, k.stride, num_tokens_, config_.kv_dim(),
                                                  metadata_.device().slot_mapping, k_plane(s.layer), v_plane(s.layer), stream_,
                                                  pool_.k_type, pool_.v_type));
    return {};
  }
  Status attention(const RecipeStep& s) override {
    const ModelConfig& c = config_;
    const cuda::StepDevicePointers& meta = metadata_.device();
    const View q = view(s.in);
    cuda::AttentionIo io{q.data, q.stride, view(s.out).data, c.num_heads};
    io.scale = s.attention.scale;
    io.softcap = s.attention.softcap;
    io.window = s.attention.window;
    const cuda::PagedKv kv{k_plane(s.layer), v_plane(s.layer), meta.block_ids, meta.block_indptr,
                           pool_.block_size, c.num_kv_heads, c.head_dim, pool_.k_type, pool_.v_type};
    if (metadata_.decode_only()) {
      GB_CUDA_KERNEL(stream_, cuda::launch_paged_attention_decode(io, kv, meta.seq_kv_len, meta.seq_token_indptr, num_seqs_,
                                                                  metadata_.max_kv_len(), attn_ws_.as<float>(), stream_));
    } else {
      GB_CUDA_KERNEL(stream_, cuda::launch_paged_attention_prefill(io, kv, meta.positions, meta.tiles, metadata_.num_tiles(), stream_));
    }
    return {};
  }
  // out = in W^T, or out += in W^T (GEMM beta = 1) when the step accumulates.
  Status project(const RecipeStep& s) override {
    const DeviceProjection* w = nullptr;
    if (s.weight == WeightSlot::Classifier) {
      w = &weights_.classifier();
    } else if (s.layer >= 0) {
      const cuda::DeviceLayer& l = weights_.layers()[static_cast<size_t>(s.layer)];
      if (s.weight == WeightSlot::Wo) w = &l.wo;
      if (s.weight == WeightSlot::WDown) w = &l.w_down;
    }
    if (w == nullptr) return unsupported(s, "a projection it does not hold");
    const View out = view(s.out);
    return project(*w, view(s.in).data, out.rows, out.data, s.accumulate ? 1.0f : 0.0f);
  }
  Status project_gate_up(const RecipeStep& s) override {
    const cuda::DeviceLayer& w = weights_.layers()[static_cast<size_t>(s.layer)];
    return project(w.w_gate_up, view(s.in).data, num_tokens_, gate_up_.as<float>(), 0.0f);
  }
  Status gated_activation(const RecipeStep& s) override {
    const cuda::GatedAct act = s.activation == FfnActivation::GeluTanh ? cuda::GatedAct::GeluTanh : cuda::GatedAct::SiLU;
    GB_CUDA_KERNEL(stream_, cuda::launch_gated_activation(gate_up_.as<float>(), num_tokens_, config_.hidden_dim, act,
                                                          view(s.out).data, stream_));
    return {};
  }
  Status residual_add(const RecipeStep& s) override {
    const View in = view(s.in), out = view(s.out);
    GB_CUDA_KERNEL(stream_, cuda::launch_add(out.data, in.data, int64_t{out.rows} * out.stride, stream_));
    return {};
  }
  Status softcap(const RecipeStep& s) override {
    const View o = view(s.out);
    GB_CUDA_KERNEL(stream_, cuda::launch_softcap(o.data, int64_t{o.rows} * o.stride, s.value, stream_));
    return {};
  }
  Status capture(const RecipeStep& s) override {
    if (capture_ == nullptr) return {};
    const View v = view(s.in);
    GB_CUDA_TRY(cudaMemcpyAsync(capture_->row(s.capture, s.layer, v.width),
                                v.data + int64_t{capture_->token} * v.stride, static_cast<size_t>(v.width) * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
    return {};
  }
  // Refused at make_cuda_backend (mixtures run on the CPU only); never reached.
  Status moe_ffn(const RecipeStep&) override { return make_error("the CUDA backend has no mixture-of-experts step"); }

  // Enqueues the whole forward pass; logits_ holds (num_logits, vocab) when the stream drains.
  Status run_step(const BatchLayout& batch) {
    GB_TRY(require_pool());
    GB_CUDA_TRY(cudaSetDevice(options_.device_index));
    // Normally a no-op (every step ends drained); after a step that failed
    // midway it keeps the pinned staging buffer from being rewritten under an
    // in-flight copy.
    GB_CUDA_TRY(cudaStreamSynchronize(stream_));
    const int32_t n = batch.num_tokens();
    if (n == 0) return {};
    GB_TRY(metadata_.plan(batch, config_.vocab_size, pool_.num_blocks, pool_.block_size,
                                   config_.kv_release_window(), stream_));
    num_seqs_ = batch.num_seqs();
    num_tokens_ = n;
    write_kv_ = batch.write_kv;
    num_logits_ = batch.num_logits();
    GB_TRY(ensure_workspace(static_cast<size_t>(n), static_cast<size_t>(batch.num_logits())));
    if (metadata_.decode_only()) {
      const size_t ws = cuda::decode_attention_workspace_floats(num_seqs_, config_.num_heads, config_.head_dim,
                                                                metadata_.max_kv_len());
      GB_TRY(reserve_floats(attn_ws_, ws, "attention partials"));
    }
    GB_TRY(run_steps(recipe_.prologue, *this));
    const int32_t num_layers =
        batch.num_layers < 0 ? config_.num_layers : std::min(batch.num_layers, config_.num_layers);
    for (int32_t l = 0; l < num_layers; ++l) GB_TRY(run_steps(recipe_.layers[static_cast<size_t>(l)], *this));
    if (num_logits_ == 0) return {};
    return run_steps(recipe_.epilogue, *this);
  }

  // Top-N, normaliser and entropy of each logits row, computed on the device.
  Status summarise(int32_t num_logits, int32_t top_n, std::span<LogitSummary> out) {
    const size_t rows = static_cast<size_t>(num_logits), n = static_cast<size_t>(top_n);
    // summary_ layout: top_ids (rows, n) int32 | top_logits (rows, n) | lse (rows) | entropy (rows)
    const size_t count = rows * n * 2 + rows * 2;
    GB_TRY(summary_.reserve(count * sizeof(float), "logit summaries"));
    auto* ids = summary_.as<int32_t>();
    float* top = summary_.as<float>() + rows * n;
    float* lse = top + rows * n;
    float* ent = lse + rows;
    GB_CUDA_KERNEL(stream_, cuda::launch_logits_summary(logits_.as<float>(), num_logits, config_.vocab_size, top_n, ids, top, lse,
                                                        ent, stream_));
    std::vector<float> host(count);
    GB_CUDA_TRY(cudaMemcpyAsync(host.data(), summary_.get(), count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    GB_CUDA_TRY(cudaStreamSynchronize(stream_));
    const auto* host_ids = reinterpret_cast<const int32_t*>(host.data());
    for (size_t r = 0; r < rows; ++r) {
      LogitSummary& s = out[r];
      s.top.clear();
      for (size_t i = 0; i < n; ++i) {
        const int32_t id = host_ids[r * n + i];
        if (id >= 0) s.top.emplace_back(id, host[rows * n + r * n + i]);
      }
      s.log_normalizer = host[2 * rows * n + r];
      s.entropy = host[2 * rows * n + rows + r];
    }
    return {};
  }

  std::shared_ptr<const Model> model_;
  const ModelConfig& config_;
  CudaBackendOptions options_;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  bool needs_cast_ = false;
  cuda::DeviceWeights weights_;
  cuda::StepMetadata metadata_;
  ModelRecipe recipe_;
  int32_t num_seqs_ = 0;
  int32_t num_tokens_ = 0;  // of the step being run
  bool write_kv_ = true;    // the step's BatchLayout::write_kv
  CaptureRows* capture_ = nullptr;  // forward_capture's rows, else null
  int32_t num_logits_ = 0;

  KvPoolSpec pool_;
  size_t layer_floats_ = 0;  // num_blocks * block_size * kv_dim: the values of one K or V plane of one layer
  size_t k_elem_bytes_ = 4, v_elem_bytes_ = 4;  // bytes per K / V value (F32 4, F16 and BF16 2)
  DeviceBuffer kv_pool_;     // (num_layers, [K, V], num_blocks, block_size, num_kv_heads, head_dim) of the KV types

  // Step workspace, grown on demand (T new tokens, L logit rows):
  DeviceBuffer x_;        // (T, dim) residual stream
  DeviceBuffer xb_;       // (T, dim) normed activations
  DeviceBuffer qkv_;      // (T, q_dim + 2 kv_dim)
  DeviceBuffer att_;      // (T, q_dim)
  DeviceBuffer proj_;     // (T, dim) projection output before a post-norm (Gemma only)
  DeviceBuffer gate_up_;  // (T, 2 hidden)
  DeviceBuffer hidden_;   // (T, hidden)
  DeviceBuffer lowp_;     // (max(T, L), widest input) F16/BF16 copy of a GEMM input
  DeviceBuffer xl_;       // (L, dim)
  DeviceBuffer logits_;   // (L, vocab)
  DeviceBuffer attn_ws_;  // decode partials, see paged_attention_decode.cu
  DeviceBuffer summary_;  // logit summaries, see summarise()
  DeviceBuffer quant_tile_;  // dequantized weight rows for quantized prefill GEMMs (fixed at init)
  size_t work_reserved_ = 0;  // work_bytes() after reserve_work
};

}  // namespace

Status cuda_weights_supported(const Model& model) { return cuda::check_weight_types(model); }

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why) *why = std::string("CUDA runtime: ") + cudaGetErrorString(e);
    cudaGetLastError();  // clear the error so later calls start clean
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
}

Result<std::unique_ptr<CudaBackend>> make_cuda_backend(std::shared_ptr<const Model> model,
                                                       const CudaBackendOptions& options) {
  GB_CHECK(model != nullptr);
  std::string why;
  if (!cuda_device_available(&why)) return make_error("CUDA backend unavailable: " + why);
  const ModelConfig& c = model->config;
  if (c.head_dim <= 0 || c.head_dim > cuda::kMaxHeadDim)
    return make_error(model->path + ": head_dim " + std::to_string(c.head_dim) + " is not supported by the CUDA backend (1..256)");
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim)
    return make_error(model->path + ": head counts or rope_dim are inconsistent");
  if (c.is_moe())
    return make_error(model->path + ": mixture-of-experts models run on the CPU backend only (--backend cpu)");
  if (c.attn_sinks || c.out_bias || c.activation == FfnActivation::SwigluOai)
    return make_error(model->path + ": attention sinks, an output bias and the clamped SwiGLU (gpt-oss) run on the "
                                    "CPU backend only (--backend cpu)");
  auto backend = std::make_unique<CudaBackendImpl>(std::move(model), options);
  GB_TRY(backend->init());
  return std::unique_ptr<CudaBackend>(std::move(backend));
}

}  // namespace gb
