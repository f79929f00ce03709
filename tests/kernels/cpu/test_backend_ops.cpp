// The CPU backend op by op (tests/kernels/backend_ops: the shared case table and
// float64 references). CpuOps runs each op the way CpuBackend does: activations
// quantized once per matmul, rows split across a thread pool in multiples of 4,
// the run-time dispatched kernels (the level cpuid allows, cpu_info.h), and the
// matmul at each kernel level explicitly (skipped where the CPU lacks it). The
// same table also runs through the kernels' own scalar oracles (the *_reference
// functions), so a wrong oracle cannot hide behind a fast path that copies it.
#include <cstdio>
#include <map>
#include <optional>

#include "backend_ops.h"
#include "core/thread_pool.h"
#include "cpu/cpu_info.h"
#include "cpu/matmul.h"
#include "cpu/matmul_quant.h"
#include "gb_test.h"

using namespace gb::kernels;
using gbtest::ops::OpCase;
using gbtest::ops::OpKind;
using gbtest::ops::Outcome;

namespace {

class CpuOps final : public gbtest::ops::OpBackend {
 public:
  // oracle: the kernels' scalar *_reference functions. level: the matmul kernel
  // level (cpu_info.h), nullopt = the one the process dispatches to.
  explicit CpuOps(bool oracle, std::optional<Isa> level = std::nullopt) : oracle_(oracle), level_(level), pool_(3) {}

  bool matmul(const OpCase& c, const void* w, const float* x, float* y) override {
    const WeightTypeTraits& tr = weight_traits(c.wtype);
    const int64_t row_bytes = static_cast<int64_t>(*weight_bytes(c.wtype, static_cast<uint64_t>(c.cols)));
    MatmulInput in{x, nullptr, nullptr};
    std::vector<ActBlockQ8> xq;
    std::vector<uint16_t> xb;
    if (tr.activation == ActivationType::BF16) {
      xb.resize(static_cast<size_t>(c.tokens * c.cols));
      pool_.parallel_for(c.tokens, [&](int64_t b, int64_t e, int) { round_activations_bf16(x, c.cols, b, e, xb.data()); });
      in.bf16 = xb.data();
    }
    if (tr.activation == ActivationType::Q8) {
      xq.resize(static_cast<size_t>(c.tokens * c.cols / kActBlock));
      pool_.parallel_for(c.tokens, [&](int64_t b, int64_t e, int) { quantize_activations(x, c.cols, b, e, xq.data()); });
      in.q8 = xq.data();
    }
    pool_.parallel_for(
        c.rows,
        [&](int64_t b, int64_t e, int) {
          if (oracle_) matmul_weights_reference(y, c.rows, in, w, row_bytes, tr, c.tokens, c.cols, b, e);
          else if (level_) matmul_weights_with(*level_, y, c.rows, in, w, row_bytes, tr, c.tokens, c.cols, b, e);
          else matmul_weights(y, c.rows, in, w, row_bytes, tr, c.tokens, c.cols, b, e);
        },
        4);
    return true;
  }
  bool rmsnorm(const OpCase& c, const float* x, const float* weight, float* out) override {
    for (int64_t t = 0; t < c.tokens; ++t) gb::kernels::rmsnorm(out + t * c.cols, x + t * c.cols, weight, c.cols, c.param);
    return true;
  }
  bool rope(const OpCase& c, float* v, const int32_t* positions, const RopeParams& p) override {
    for (int64_t t = 0; t < c.tokens; ++t)
      rope_ex(v + t * c.rows * c.cols, static_cast<int32_t>(c.rows), static_cast<int32_t>(c.cols), positions[t], p);
    return true;
  }
  bool swiglu(const OpCase& c, const float* gate, const float* up, float* out) override {
    const int64_t n = c.tokens * c.cols;
    if (oracle_) swiglu_reference(out, gate, up, n);
    else gb::kernels::swiglu(out, gate, up, n);
    return true;
  }
  bool gelu_gated(const OpCase& c, const float* gate, const float* up, float* out) override {
    gelu_tanh_gated(out, gate, up, c.tokens * c.cols);
    return true;
  }
  bool softcap(const OpCase& c, float* x) override {
    softcap_inplace(x, c.tokens * c.cols, c.param);
    return true;
  }
  bool add(const OpCase& c, float* x, const float* y) override {
    add_inplace(x, y, c.tokens * c.cols);
    return true;
  }
  bool softmax(const OpCase& c, float* x) override {
    for (int64_t t = 0; t < c.tokens; ++t) softmax_inplace(x + t * c.cols, c.cols);
    return true;
  }
  bool attention(const OpCase& c, const float* q, const PagedKvView& kv, float* out) override {
    std::vector<float> scores(static_cast<size_t>(c.ctx));
    const int32_t head = static_cast<int32_t>(c.rows) - 1;
    if (oracle_) paged_attention_head_ex_reference(out, q, kv, head, c.ctx, c.shape, scores.data());
    else paged_attention_head_ex(out, q, kv, head, c.ctx, c.shape, scores.data());
    return true;
  }

 private:
  bool oracle_;
  std::optional<Isa> level_;
  gb::ThreadPool pool_;
};

// Runs every case of `kind`; fails on the first wrong one.
void run_kind(OpKind kind, bool oracle, std::optional<Isa> level = std::nullopt) {
  if (level && !isa_supported(*level)) QSKIP("this processor lacks the kernel level");
  CpuOps ops(oracle, level);
  int passed = 0, unsupported = 0;
  for (const OpCase& c : gbtest::ops::op_cases()) {
    if (c.kind != kind) continue;
    const auto r = gbtest::ops::run_case(c, ops);
    if (r.outcome == Outcome::Failed) QFAIL((c.name + (oracle ? " (oracle)" : "") + ": " + r.problem).c_str());
    (r.outcome == Outcome::Passed ? passed : unsupported) += 1;
  }
  std::printf("  %d cases passed, %d unsupported (%s, %s)\n", passed, unsupported,
              oracle ? "oracles" : level ? isa_name(*level) : "dispatched kernels", instruction_sets().c_str());
  QVERIFY(passed > 0);
  QCOMPARE(unsupported, 0);  // the CPU backend runs every op
}

}  // namespace

GB_TEST(op_matmul_every_weight_type) { run_kind(OpKind::Matmul, false); }
GB_TEST(op_matmul_every_weight_type_avx2_level) { run_kind(OpKind::Matmul, false, Isa::Avx2); }
GB_TEST(op_matmul_every_weight_type_avx512_level) { run_kind(OpKind::Matmul, false, Isa::Avx512); }
GB_TEST(op_matmul_every_weight_type_avx512bf16_level) { run_kind(OpKind::Matmul, false, Isa::Avx512Bf16); }
GB_TEST(op_rmsnorm) { run_kind(OpKind::RmsNorm, false); }
GB_TEST(op_rope_adjacent_and_neox_partial_and_scaled) { run_kind(OpKind::Rope, false); }
GB_TEST(op_swiglu) { run_kind(OpKind::SwiGlu, false); }
GB_TEST(op_gelu_gated) { run_kind(OpKind::GeluGated, false); }
GB_TEST(op_softcap) { run_kind(OpKind::Softcap, false); }
GB_TEST(op_add) { run_kind(OpKind::Add, false); }
GB_TEST(op_softmax) { run_kind(OpKind::Softmax, false); }
GB_TEST(op_paged_attention_windowed_scaled_capped) { run_kind(OpKind::Attention, false); }

GB_TEST(oracle_matmul_every_weight_type) { run_kind(OpKind::Matmul, true); }
GB_TEST(oracle_swiglu) { run_kind(OpKind::SwiGlu, true); }
GB_TEST(oracle_paged_attention) { run_kind(OpKind::Attention, true); }

GB_TEST(case_table_covers_every_op_and_weight_type) {
  std::map<int, int> per_kind;
  std::map<int, int> per_type;
  for (const OpCase& c : gbtest::ops::op_cases()) {
    per_kind[static_cast<int>(c.kind)] += 1;
    if (c.kind == OpKind::Matmul) per_type[static_cast<int>(c.wtype)] += 1;
  }
  QCOMPARE(static_cast<int>(per_kind.size()), static_cast<int>(OpKind::Attention) + 1);
  QCOMPARE(static_cast<int>(per_type.size()), kNumWeightTypes);
}
