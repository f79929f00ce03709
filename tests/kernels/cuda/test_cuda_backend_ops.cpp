// The CUDA kernels op by op against the same case table and float64 references
// as the CPU (tests/kernels/backend_ops, in the spirit of llama.cpp's
// test-backend-ops): CudaOps copies each case's host buffers to the device, runs
// the kernel the CUDA backend runs for that op (cuBLAS for float weights, the
// quantized GEMV or dequantized tiles + cuBLAS for quantized ones, rmsnorm, rope
// (plain adjacent, and the general NeoX / factors / scaling kernel), SwiGLU and
// GELU-tanh gated activations, soft-cap, add, decode attention with its window,
// scale and soft-cap) and copies the result back; run_case() compares it with the
// reference at the table's tolerances. Softmax has no CUDA kernel of its own
// (attention fuses it) and reports Unsupported, counted and printed, never
// passed. Without a device every case skips (gb_test_setup in cuda_test_support.cpp).
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_gemm.h"
#include "backend_ops.h"
#include "cuda/cuda_kernels.h"
#include "cuda_test_support.h"
#include "gb_test.h"

using gbtest::cuda::DeviceArray;
using gbtest::ops::OpCase;
using gbtest::ops::OpKind;
using gbtest::ops::Outcome;
using namespace gb::kernels;

namespace {

template <class T>
std::vector<T> host_copy(const T* p, size_t n) {
  return std::vector<T>(p, p + n);
}

// Runs and waits; false when a launch or the device reported an error.
bool finished(cudaError_t launched) { return launched == cudaSuccess && gbtest::cuda::device_error().empty(); }

class CudaOps final : public gbtest::ops::OpBackend {
 public:
  CudaOps() { ok_ = cublasCreate(&blas_) == CUBLAS_STATUS_SUCCESS; }
  ~CudaOps() override {
    if (ok_) cublasDestroy(blas_);
  }
  bool ready() const { return ok_; }

  bool matmul(const OpCase& c, const void* w, const float* x, float* y) override {
    const size_t row_bytes = *weight_bytes(c.wtype, static_cast<uint64_t>(c.cols));
    DeviceArray<uint8_t> dw(host_copy(static_cast<const uint8_t*>(w), row_bytes * static_cast<size_t>(c.rows)));
    DeviceArray<float> dx(host_copy(x, static_cast<size_t>(c.tokens * c.cols)));
    DeviceArray<float> dy(static_cast<size_t>(c.tokens * c.rows));
    const gb::cuda::DeviceMatrix m{dw.get(), c.wtype, c.rows, c.cols, static_cast<int64_t>(row_bytes)};
    if (is_quantized(c.wtype)) {
      if (!gb::cuda::quant_kernels_support(c.wtype)) return false;
      // The backend's path: GEMV up to kMaxGemvTokens tokens, else dequantized
      // tiles (a workspace of 3 rows, so several tiles) through cuBLAS.
      DeviceArray<float> ws(static_cast<size_t>(3 * c.cols));
      const gb::cuda::QuantWorkspace qw{ws.get(), ws.size()};
      if (!gb::cuda::gemm_quant_rows(blas_, m, dx.get(), static_cast<int32_t>(c.tokens), dy.get(), c.rows, 0.0f, qw,
                                     nullptr))
        return false;
    } else {
      // cuBLAS multiplies activations of the weights' own type.
      const void* xin = dx.get();
      DeviceArray<uint16_t> xh(c.wtype == WeightType::F32 ? 0 : static_cast<size_t>(c.tokens * c.cols));
      if (c.wtype != WeightType::F32) {
        if (!finished(gb::cuda::launch_cast(dx.get(), c.tokens * c.cols, xh.get(), c.wtype, nullptr))) return false;
        xin = xh.get();
      }
      if (!gb::cuda::gemm_rows(blas_, m, xin, static_cast<int32_t>(c.tokens), dy.get(), c.rows, 0.0f, false))
        return false;
    }
    if (!gbtest::cuda::device_error().empty()) return false;
    const auto out = dy.download();
    std::copy(out.begin(), out.end(), y);
    return true;
  }
  bool rmsnorm(const OpCase& c, const float* x, const float* weight, float* out) override {
    DeviceArray<float> dx(host_copy(x, static_cast<size_t>(c.tokens * c.cols)));
    DeviceArray<float> dw(host_copy(weight, static_cast<size_t>(c.cols)));
    DeviceArray<float> dout(static_cast<size_t>(c.tokens * c.cols));
    if (!finished(gb::cuda::launch_rmsnorm(dx.get(), nullptr, static_cast<int32_t>(c.tokens),
                                           static_cast<int32_t>(c.cols), dw.get(), c.param, dout.get(), nullptr)))
      return false;
    const auto r = dout.download();
    std::copy(r.begin(), r.end(), out);
    return true;
  }
  bool rope(const OpCase& c, float* v, const int32_t* positions, const RopeParams& p) override {
    // The backend's choice: llama2.c's float kernel for plain adjacent pairs, the
    // general (double-angle) kernel otherwise.
    const bool plain =
        p.style == RopeStyle::Adjacent && p.freq_factors == nullptr && p.freq_scale == 1.0f && p.attn_factor == 1.0f;
    const size_t n = static_cast<size_t>(c.tokens * c.rows * c.cols);
    DeviceArray<float> dv(host_copy(v, n));
    DeviceArray<int32_t> dpos(host_copy(positions, static_cast<size_t>(c.tokens)));
    const size_t half = static_cast<size_t>(p.rope_dim / 2);
    DeviceArray<float> dfactors(p.freq_factors ? host_copy(p.freq_factors, half) : std::vector<float>(1, 1.0f));
    const auto tokens = static_cast<int32_t>(c.tokens), heads = static_cast<int32_t>(c.rows);
    const auto head_dim = static_cast<int32_t>(c.cols);
    cudaError_t e;
    if (plain) {
      e = gb::cuda::launch_rope(dv.get(), tokens, c.rows * c.cols, heads, head_dim, p.rope_dim, p.base, dpos.get(),
                                nullptr);
    } else {
      gb::cuda::RopeArgs a;
      a.rope_dim = p.rope_dim;
      a.base = p.base;
      a.neox = p.style == RopeStyle::NeoX;
      a.freq_factors = p.freq_factors ? dfactors.get() : nullptr;
      a.freq_scale = p.freq_scale;
      a.attn_factor = p.attn_factor;
      e = gb::cuda::launch_rope_ex(dv.get(), tokens, c.rows * c.cols, heads, head_dim, a, dpos.get(), nullptr);
    }
    if (!finished(e)) return false;
    const auto r = dv.download();
    std::copy(r.begin(), r.end(), v);
    return true;
  }
  bool swiglu(const OpCase& c, const float* gate, const float* up, float* out) override {
    return gated(c, gate, up, gb::cuda::GatedAct::SiLU, out);
  }
  bool gelu_gated(const OpCase& c, const float* gate, const float* up, float* out) override {
    return gated(c, gate, up, gb::cuda::GatedAct::GeluTanh, out);
  }
  bool softcap(const OpCase& c, float* x) override {
    const size_t n = static_cast<size_t>(c.tokens * c.cols);
    DeviceArray<float> dx(host_copy(x, n));
    if (!finished(gb::cuda::launch_softcap(dx.get(), static_cast<int64_t>(n), c.param, nullptr))) return false;
    const auto r = dx.download();
    std::copy(r.begin(), r.end(), x);
    return true;
  }
  bool add(const OpCase& c, float* x, const float* y) override {
    const size_t n = static_cast<size_t>(c.tokens * c.cols);
    DeviceArray<float> dx(host_copy(x, n)), dy(host_copy(y, n));
    if (!finished(gb::cuda::launch_add(dx.get(), dy.get(), static_cast<int64_t>(n), nullptr))) return false;
    const auto r = dx.download();
    std::copy(r.begin(), r.end(), x);
    return true;
  }
  bool softmax(const OpCase&, float*) override { return false; }
  bool attention(const OpCase& c, const float* q, const PagedKvView& kv, float* out) override {
    if (c.cols > gb::cuda::kMaxHeadDim) return false;
    // One sequence, one query token; as many query heads as KV heads, the case's
    // query in the last one (it reads the last KV head).
    const int32_t heads = static_cast<int32_t>(c.rows), d = static_cast<int32_t>(c.cols);
    const int32_t nblocks = (c.ctx + kv.block_size - 1) / kv.block_size;
    const std::vector<int32_t> table = host_copy(kv.block_table, static_cast<size_t>(nblocks));
    const int32_t pool_blocks = *std::max_element(table.begin(), table.end()) + 1;
    const size_t pool = static_cast<size_t>(pool_blocks) * static_cast<size_t>(kv.block_size * heads * d);
    if (kv.k_type != gb::kernels::WeightType::F32 || kv.v_type != gb::kernels::WeightType::F32) return false;
    DeviceArray<float> dk(host_copy(static_cast<const float*>(kv.k_cache), pool)),
        dv(host_copy(static_cast<const float*>(kv.v_cache), pool));
    std::vector<float> qrow(static_cast<size_t>(heads * d), 0.0f);
    std::copy(q, q + d, qrow.begin() + static_cast<ptrdiff_t>((heads - 1) * d));
    DeviceArray<float> dq(qrow), dout(qrow.size());
    DeviceArray<int32_t> dtable(table), dindptr(std::vector<int32_t>{0, nblocks});
    DeviceArray<int32_t> dlen(std::vector<int32_t>{c.ctx}), dtok(std::vector<int32_t>{0, 1});
    DeviceArray<float> ws(gb::cuda::decode_attention_workspace_floats(1, heads, d, c.ctx));
    gb::cuda::PagedKv pk;
    pk.k = dk.get();
    pk.v = dv.get();
    pk.block_ids = dtable.get();
    pk.block_indptr = dindptr.get();
    pk.block_size = kv.block_size;
    pk.num_kv_heads = heads;
    pk.head_dim = d;
    gb::cuda::AttentionIo io;
    io.q = dq.get();
    io.q_row_stride = heads * d;
    io.out = dout.get();
    io.num_heads = heads;
    io.scale = c.shape.scale;
    io.softcap = c.shape.softcap;
    io.window = c.ctx - c.shape.first;  // the query (at ctx - 1) sees first .. ctx - 1
    if (!finished(gb::cuda::launch_paged_attention_decode(io, pk, dlen.get(), dtok.get(), 1, c.ctx, ws.get(), nullptr)))
      return false;
    const auto r = dout.download();
    std::copy(r.begin() + static_cast<ptrdiff_t>((heads - 1) * d), r.begin() + static_cast<ptrdiff_t>(heads * d), out);
    return true;
  }

 private:
  // The backend's fused layout: each token's gate row, then its up row.
  bool gated(const OpCase& c, const float* gate, const float* up, gb::cuda::GatedAct act, float* out) {
    std::vector<float> gate_up(static_cast<size_t>(2 * c.tokens * c.cols));
    for (int64_t t = 0; t < c.tokens; ++t) {
      std::memcpy(gate_up.data() + 2 * t * c.cols, gate + t * c.cols, sizeof(float) * static_cast<size_t>(c.cols));
      std::memcpy(gate_up.data() + (2 * t + 1) * c.cols, up + t * c.cols, sizeof(float) * static_cast<size_t>(c.cols));
    }
    DeviceArray<float> dgu(gate_up);
    DeviceArray<float> dout(static_cast<size_t>(c.tokens * c.cols));
    if (!finished(gb::cuda::launch_gated_activation(dgu.get(), static_cast<int32_t>(c.tokens),
                                                    static_cast<int32_t>(c.cols), act, dout.get(), nullptr)))
      return false;
    const auto r = dout.download();
    std::copy(r.begin(), r.end(), out);
    return true;
  }

  cublasHandle_t blas_ = nullptr;
  bool ok_ = false;
};

// Every case of `kind`; fails on the first wrong one. want_all: the CUDA
// backend runs every case of this op, so none may be unsupported.
void run_kind(OpKind kind, bool want_all) {
  CudaOps ops;
  QVERIFY2(ops.ready(), "cublasCreate failed");
  int passed = 0, unsupported = 0;
  for (const OpCase& c : gbtest::ops::op_cases()) {
    if (c.kind != kind) continue;
    // The CPU layouts (Q4_K_R ...) are made by the CPU backend at load; the GPU reads the file types.
    if (c.kind == OpKind::Matmul && !gb::kernels::is_file_type(c.wtype)) continue;
    const auto r = gbtest::ops::run_case(c, ops);
    // A type the backend refuses (lacks_cuda_kernels) must say so, not compute.
    if (c.kind == OpKind::Matmul && gbtest::cuda::lacks_cuda_kernels(c.wtype)) {
      QVERIFY2(r.outcome == Outcome::Unsupported, (c.name + " (cuda): expected unsupported").c_str());
      continue;
    }
    if (r.outcome == Outcome::Failed) QFAIL((c.name + " (cuda): " + r.problem).c_str());
    if (r.outcome == Outcome::Unsupported) std::printf("  unsupported on CUDA: %s\n", c.name.c_str());
    (r.outcome == Outcome::Passed ? passed : unsupported) += 1;
  }
  std::printf("  %d cases passed, %d unsupported\n", passed, unsupported);
  QVERIFY(passed > 0);
  if (want_all) QCOMPARE(unsupported, 0);
}

}  // namespace

GB_TEST(cuda_op_matmul_every_weight_type) { run_kind(OpKind::Matmul, true); }
GB_TEST(cuda_op_rmsnorm) { run_kind(OpKind::RmsNorm, true); }
GB_TEST(cuda_op_rope_adjacent_neox_factors_scaling) { run_kind(OpKind::Rope, true); }
GB_TEST(cuda_op_swiglu) { run_kind(OpKind::SwiGlu, true); }
GB_TEST(cuda_op_gelu_tanh_gated) { run_kind(OpKind::GeluGated, true); }
GB_TEST(cuda_op_softcap) { run_kind(OpKind::Softcap, true); }
GB_TEST(cuda_op_add) { run_kind(OpKind::Add, true); }
GB_TEST(cuda_op_paged_attention_window_scale_softcap) { run_kind(OpKind::Attention, true); }
